package lock

import (
	"bytes"
	"maps"
	"os"
	"regexp"
	"strings"
	"testing"
)

// lineError is how Parse names the place of a damaged line.
// A missing header line has no line to name; it names the line kind.
var lineError = regexp.MustCompile(`^fuzz\.lock(:[0-9]+: .+|: no "(inputs|epoch)" line); the lock is damaged: run ` + "`drover lock`" + ` again$`)

// FuzzParse: a lock file is hand-edited and merged, so Parse must never
// panic on it; every error names the file (and the line, for a damaged
// line); and an accepted lock survives Format → Parse → Format unchanged
// (Format prints every field), so what `drover lock` writes is what a build
// reads.
func FuzzParse(f *testing.F) {
	f.Add(sample().Format("a header"))
	if data, err := os.ReadFile("../../recipes/minimal.yaml.lock"); err == nil {
		f.Add(data)
	} else {
		f.Fatal(err)
	}
	const head = "lock 2\ninputs ab\nepoch 0 x\n"
	for _, s := range []string{
		"", "lock 2\n", head, head + "\t\n", head + "go k m@v p t\ngomod k\tx\n", "lock 2\ninputs a\ninputs b\nepoch 1 x\n",
		head + "go k m@v p t\n  gomod k  require a v1\n", head + "go k m@v p t\ngo k m@v p t\n", head + "suite s 2026-01-01T00:00:00+08:00 ff\n",
		"lock 2\ninputs a\nepoch -5 x\n", head + "deb a 1 amd64 -1 aa trixie pool/a.deb\n", head + "url u aa 3 https://x/y\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := Parse("fuzz.lock", data)
		if err != nil {
			msg := err.Error()
			if !bytes.HasPrefix([]byte(msg), []byte("fuzz.lock:")) && !bytes.HasPrefix([]byte(msg), []byte("reading fuzz.lock:")) {
				t.Fatalf("error does not name the file: %q", msg)
			}
			if bytes.Contains([]byte(msg), []byte("damaged")) && !lineError.MatchString(msg) {
				t.Fatalf("damaged-line error does not name the line: %q", msg)
			}
			return
		}
		text := l.Format("")
		// Nothing accepted is lost: each kind of record line appears as
		// often in the formatted lock as in the input (a parse that kept
		// one of two lines for the same Go component, deb or URL would
		// build from a lock the reviewer did not read).
		if in, out := recordLines(data), recordLines(text); !maps.Equal(in, out) {
			t.Fatalf("lossy parse: record lines %v in the input, %v after Format\n%s", in, out, text)
		}
		l2, err := Parse("fuzz.lock", text)
		if err != nil {
			t.Fatalf("Format of an accepted lock does not parse: %v\n%s", err, text)
		}
		if again := l2.Format(""); !bytes.Equal(text, again) {
			t.Fatalf("Format is not stable:\n%s\n---\n%s", text, again)
		}
	})
}

// recordLines counts a lock's record lines by kind (their first field).
func recordLines(data []byte) map[string]int {
	n := map[string]int{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "suite", "signer", "deb", "go", "gomod", "gosum", "url":
			n[f[0]]++
		}
	}
	return n
}
