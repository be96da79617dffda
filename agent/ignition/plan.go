package ignition

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/coreos/ignition/v2/config/util"
	"github.com/coreos/ignition/v2/config/v3_5/types"
)

// NodePlan is everything an apply will do, worked out before anything is
// written: printable, comparable with a golden file, and the source of the
// managed-path list the guard checks for drift.
type NodePlan struct {
	// Version is the spec the user-data declared.
	Version string
	Steps   []Step
	// Managed lists every path the plan writes, in step order.
	Managed []Managed
	// Start lists the units the config enables, in config order, for the
	// agent to start once systemd has reloaded: the enable links appear
	// after the boot transaction was queued, and systemd does not add new
	// dependencies to queued jobs, so otherwise they would not run until
	// the target is started again — never, as /etc is rebuilt every boot.
	Start []string
}

// Step is one change to the node's /etc or /var.
type Step interface {
	fmt.Stringer
	// Origin is the JSON path of the config entry behind the step.
	Origin() string
	// check looks at the node before anything is written; apply performs
	// the step inside a transaction that can undo it.
	check(e *env) []Problem
	apply(t *txn) error
}

// Managed is one path the config owns.
type Managed struct {
	Path string
	// Kind is "directory", "file", "symlink" or "hardlink".
	Kind string
	// SHA256 is the hex digest of a file's contents; in a Plan it is empty
	// for a file whose contents depend on the node (kept or appended to).
	SHA256 string
	// Target is a link's target.
	Target string
}

func (m Managed) String() string {
	switch {
	case m.Kind == "file" && m.SHA256 == "":
		return m.Kind + " " + m.Path + " sha256 known after apply"
	case m.Kind == "file":
		return m.Kind + " " + m.Path + " sha256 " + m.SHA256
	case m.Target != "":
		return m.Kind + " " + m.Path + " -> " + m.Target
	}
	return m.Kind + " " + m.Path
}

// Owner is a user or group: by id, by name (resolved in the node's
// /etc/passwd or /etc/group), or unset (root for a new node, unchanged for
// an existing one).
type Owner struct {
	ID   *int
	Name string
}

func (o Owner) String() string {
	switch {
	case o.ID != nil:
		return strconv.Itoa(*o.ID)
	case o.Name != "":
		return o.Name
	}
	return "-"
}

func (o Owner) set() bool { return o.ID != nil || o.Name != "" }

// MkdirStep creates a directory or adjusts an existing one.
type MkdirStep struct {
	Path        string
	Mode        *int // nil: 0755 when created, else unchanged
	User, Group Owner
	Overwrite   bool // may replace a file or link at Path
	From        string
}

// FileStep writes a file atomically.
type FileStep struct {
	Path string
	// Keep means the config gives no contents: an existing file keeps its
	// contents (a missing one is created empty) and Append is added.
	Keep     bool
	Contents []byte // the whole file when !Keep
	Append   []byte // added to the kept contents when Keep
	SHA256   string // of Contents; empty when Keep
	Mode     *int   // nil: 0644 for a written file, unchanged for a kept one
	User     Owner
	Group    Owner
	// Overwrite may replace a link or other non-regular node at Path; a
	// regular file is always replaced, as the config is the node's state.
	Overwrite bool
	From      string
}

// LinkStep creates a symbolic or hard link.
type LinkStep struct {
	Path, Target string
	Hard         bool
	User, Group  Owner
	Overwrite    bool   // may replace a regular file at Path
	Why          string // "enable x.service", "mask x.service" or empty
	From         string
}

// DisableStep removes a unit's enable links from /etc/systemd/system.
type DisableStep struct {
	Unit string
	From string
}

func (s *MkdirStep) Origin() string   { return s.From }
func (s *FileStep) Origin() string    { return s.From }
func (s *LinkStep) Origin() string    { return s.From }
func (s *DisableStep) Origin() string { return s.From }

func (s *MkdirStep) String() string {
	mode := "mode 0755 if created"
	if s.Mode != nil {
		mode = "mode " + fmtMode(*s.Mode)
	}
	return "directory " + s.Path + " " + mode + owners(s.User, s.Group) + overwrite(s.Overwrite)
}

func (s *FileStep) String() string {
	var b strings.Builder
	b.WriteString("file " + s.Path)
	switch {
	case s.Keep && len(s.Append) > 0:
		fmt.Fprintf(&b, " keep contents, append %d bytes", len(s.Append))
	case s.Keep:
		b.WriteString(" keep contents or create empty")
	default:
		fmt.Fprintf(&b, " %d bytes sha256 %s", len(s.Contents), s.SHA256)
	}
	switch {
	case s.Mode != nil:
		b.WriteString(" mode " + fmtMode(*s.Mode))
	case s.Keep:
		b.WriteString(" mode 0644 if created")
	default:
		b.WriteString(" mode 0644")
	}
	return b.String() + owners(s.User, s.Group) + overwrite(s.Overwrite)
}

func (s *LinkStep) String() string {
	kind := "symlink"
	if s.Hard {
		kind = "hardlink"
	}
	str := kind + " " + s.Path + " -> " + s.Target + owners(s.User, s.Group) + overwrite(s.Overwrite)
	if s.Why != "" {
		str += " (" + s.Why + ")"
	}
	return str
}

func (s *DisableStep) String() string {
	return "disable " + s.Unit + ": remove " + systemdDir + "/*.wants/" + s.Unit + " and *.requires/" + s.Unit
}

func owners(u, g Owner) string {
	if !u.set() && !g.set() {
		return ""
	}
	return " owner " + u.String() + ":" + g.String()
}

func overwrite(o bool) string {
	if o {
		return " overwrite"
	}
	return ""
}

func fmtMode(m int) string { return fmt.Sprintf("%04o", m) }

func cleanPath(p string) string { return path.Clean(p) }

// String prints the plan: numbered steps with the config entry behind each,
// then the managed paths.
func (p *NodePlan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ignition plan (spec %s): %d steps\n", p.Version, len(p.Steps))
	for i, s := range p.Steps {
		fmt.Fprintf(&b, "%3d. %s\n       from %s\n", i+1, s, s.Origin())
	}
	fmt.Fprintf(&b, "managed paths: %d\n", len(p.Managed))
	for _, m := range p.Managed {
		b.WriteString("  " + m.String() + "\n")
	}
	return b.String()
}

// Plan turns a parsed, resolved config into ordered steps. It is pure: the
// node is looked at only by Apply. It fails only when http(s) contents
// have not been fetched (call Resolve first).
func Plan(cfg *Config) (*NodePlan, error) {
	if cfg == nil {
		return nil, errors.New("planning the ignition config: no config (Parse failed?)")
	}
	c := &collector{tree: cfg.tree}
	files := cfg.Ignition.Storage.Files
	for i := range files {
		if i >= len(cfg.files) || !cfg.files[i].complete() {
			c.add(fmt.Sprintf("contents of %s have not been fetched — call Resolve with a Fetcher before Plan", files[i].Path), "storage", "files", i)
		}
	}
	if len(c.list) > 0 {
		return nil, Problems(c.list)
	}

	p := &NodePlan{Version: cfg.Version}
	st := cfg.Ignition.Storage
	for _, i := range byDepth(len(st.Directories), func(i int) string { return st.Directories[i].Path }) {
		d := st.Directories[i]
		p.add(&MkdirStep{Path: cleanPath(d.Path), Mode: d.Mode, User: user(d.Node), Group: group(d.Node),
			Overwrite: util.IsTrue(d.Overwrite), From: jsonPath([]any{"storage", "directories", i})})
	}
	for _, i := range byDepth(len(files), func(i int) string { return files[i].Path }) {
		f, fc := files[i], cfg.files[i]
		s := &FileStep{Path: cleanPath(f.Path), Keep: !fc.hasSource, Mode: f.Mode, User: user(f.Node), Group: group(f.Node),
			Overwrite: util.IsTrue(f.Overwrite), From: jsonPath([]any{"storage", "files", i})}
		if s.Keep {
			s.Append = fc.final(nil)
		} else {
			s.Contents = fc.final(nil)
			s.SHA256 = digest(s.Contents)
		}
		p.add(s)
	}
	for _, i := range byDepth(len(st.Links), func(i int) string { return st.Links[i].Path }) {
		l := st.Links[i]
		target := ""
		if l.Target != nil {
			target = *l.Target
		}
		if util.IsTrue(l.Hard) {
			target = cleanPath(target)
		}
		p.add(&LinkStep{Path: cleanPath(l.Path), Target: target, Hard: util.IsTrue(l.Hard), User: user(l.Node), Group: group(l.Node),
			Overwrite: util.IsTrue(l.Overwrite), From: jsonPath([]any{"storage", "links", i})})
	}
	units := cfg.Ignition.Systemd.Units
	for i, u := range units {
		planUnit(p, u, units, []any{"systemd", "units", i})
	}
	return p, nil
}

func planUnit(p *NodePlan, u types.Unit, all []types.Unit, at []any) {
	from := jsonPath(at)
	mode := 0o644
	if util.IsTrue(u.Mask) {
		p.add(&LinkStep{Path: unitPath(u.Name), Target: "/dev/null", Overwrite: true, Why: "mask " + u.Name, From: from})
		return
	}
	if !util.NilOrEmpty(u.Contents) {
		data := []byte(*u.Contents)
		p.add(&FileStep{Path: unitPath(u.Name), Contents: data, SHA256: digest(data), Mode: &mode, Overwrite: true, From: from})
	}
	for j, d := range u.Dropins {
		if util.NilOrEmpty(d.Contents) {
			continue
		}
		data := []byte(*d.Contents)
		p.add(&FileStep{Path: dropinPath(u.Name, d.Name), Contents: data, SHA256: digest(data), Mode: &mode, Overwrite: true,
			From: jsonPath(sub(at, "dropins", j))})
	}
	switch {
	case util.IsTrue(u.Enabled):
		links := enableLinks(u, all)
		for _, l := range links {
			p.add(&LinkStep{Path: l.path, Target: l.target, Overwrite: true, Why: "enable " + u.Name, From: from})
		}
		if name := startName(links); name != "" && !slices.Contains(p.Start, name) {
			p.Start = append(p.Start, name)
		}
	case u.Enabled != nil:
		p.add(&DisableStep{Unit: u.Name, From: from})
	}
}

func (p *NodePlan) add(s Step) {
	p.Steps = append(p.Steps, s)
	switch s := s.(type) {
	case *MkdirStep:
		p.Managed = append(p.Managed, Managed{Path: s.Path, Kind: "directory"})
	case *FileStep:
		p.Managed = append(p.Managed, Managed{Path: s.Path, Kind: "file", SHA256: s.SHA256})
	case *LinkStep:
		kind := "symlink"
		if s.Hard {
			kind = "hardlink"
		}
		p.Managed = append(p.Managed, Managed{Path: s.Path, Kind: kind, Target: s.Target})
	}
}

// byDepth orders entries parents first, keeping config order among equals,
// so a directory exists before anything is written into it.
func byDepth(n int, pathOf func(int) string) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		return strings.Count(cleanPath(pathOf(idx[a])), "/") < strings.Count(cleanPath(pathOf(idx[b])), "/")
	})
	return idx
}

func user(n types.Node) Owner {
	o := Owner{ID: n.User.ID}
	if n.User.Name != nil {
		o.Name = *n.User.Name
	}
	return o
}

func group(n types.Node) Owner {
	o := Owner{ID: n.Group.ID}
	if n.Group.Name != nil {
		o.Name = *n.Group.Name
	}
	return o
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
