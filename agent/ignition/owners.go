package ignition

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// idTable maps the names in one colon-separated database (/etc/passwd or
// /etc/group under the apply root) to numeric ids. The agent cannot use
// os/user: that reads the host's database, and the root may be a test dir.
type idTable struct {
	file  string // "/etc/passwd" or "/etc/group", for messages
	ids   map[string]int
	err   error
	ready bool
}

func (t *idTable) load(root string) {
	if t.ready {
		return
	}
	t.ready = true
	data, err := os.ReadFile(filepath.Join(root, t.file))
	if err != nil {
		t.err = err
		return
	}
	t.ids = map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		// name:password:id:... in both databases
		fields := strings.Split(line, ":")
		if len(fields) < 3 {
			continue
		}
		if id, err := strconv.Atoi(fields[2]); err == nil {
			if _, dup := t.ids[fields[0]]; !dup {
				t.ids[fields[0]] = id
			}
		}
	}
}

// resolve gives the numeric id of o; ok is false for an unset owner.
func (t *idTable) resolve(root string, o Owner) (id int, ok bool, err error) {
	switch {
	case o.ID != nil:
		return *o.ID, true, nil
	case o.Name == "":
		return 0, false, nil
	}
	t.load(root)
	if t.err != nil {
		return 0, false, fmt.Errorf("%q cannot be looked up: reading the node's %s: %w — use a numeric id", o.Name, t.file, t.err)
	}
	id, found := t.ids[o.Name]
	if !found {
		return 0, false, fmt.Errorf("%q is not in the node's %s — use a numeric id or a name the image defines", o.Name, t.file)
	}
	return id, true, nil
}
