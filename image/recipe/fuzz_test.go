package recipe

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// FuzzParse: recipes are hand-edited, so Parse must never panic; it says
// the same thing every time it reads the same bytes; every problem is a
// FieldError naming the file, a line and the field; and an accepted recipe,
// written back out as YAML, parses to the same recipe (nothing is read that
// a user could not have written).
func FuzzParse(f *testing.F) {
	names, err := filepath.Glob("../../recipes/*.yaml")
	if err != nil || len(names) == 0 {
		f.Fatalf("no recipes to seed from: %v", err)
	}
	for _, n := range names {
		data, err := os.ReadFile(n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"", "name: x\n", "a: &x [*x]\n", "name: x\nunits: {enable: [a], disable: [b], mask: [c]}\n",
		"name: x\nprefer: {/a: b, /a: c, x: 'Y'}\n", "name: x\nfiles: [{path: /a, content: b, mode: 0x100000644}]\n",
		"name: x\nurls: [{name: u, url: 'https://h/x', sha256: " + strings.Repeat("a", 64) + ", install: /u, mode: 0o755}]\n",
		"name: x\ngo: [{name: k, module: m, version: v1, package: m, install: /k, replace: ['a => b v1']}]\n",
		"name: x\ncni: {plugins: [bridge, a.b]}\n", "name: x\ncni: {plugins: []}\n", "name: x\ncni: {plugins: ~}\n",
		"name: x\nimage: {size: 2GiB, espSize: 99999999999GiB, formats: [qcow2]}\n", "name: x\nimage: {size: 9223372036854775807KiB}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Parse("fuzz.yaml", data)
		if err != nil {
			_, again := Parse("fuzz.yaml", data)
			if again == nil || again.Error() != err.Error() {
				t.Fatalf("Parse is not deterministic:\n%v\n---\n%v", err, again)
			}
			checkProblems(t, err)
			return
		}
		for _, size := range []string{r.Image.Size, r.Image.ESPSize} {
			if n, err := ParseSize(size); size != "" && (err != nil || n < 0) {
				t.Fatalf("accepted size %q reads as %d, %v", size, n, err)
			}
		}
		out := marshal(t, r)
		r2, err := Parse("fuzz.yaml", []byte(out))
		if err != nil {
			t.Fatalf("an accepted recipe written back out is refused: %v\n%s", err, out)
		}
		// The one list where left out and empty differ: the default CNI
		// plugins, or none.
		p1, n1 := r.CNIPlugins()
		p2, n2 := r2.CNIPlugins()
		if n1 != n2 || !slices.Equal(p1, p2) {
			t.Fatalf("CNI plugins changed through YAML: %q (named %v), then %q (named %v)\n%s", p1, n1, p2, n2, out)
		}
		// Compared as YAML: a list left out and an empty list are the same.
		if a, b := marshal(t, comparable(r)), marshal(t, comparable(r2)); a != b {
			t.Fatalf("recipe changed through YAML\nfirst:\n%s\nsecond:\n%s", a, b)
		}
	})
}

// checkProblems requires every problem in err to be a FieldError that
// names the file, a line and (but for an empty recipe) the field path; a
// YAML syntax error names the file.
func checkProblems(t *testing.T, err error) {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		var fe *FieldError
		if !errors.As(e, &fe) {
			if !strings.HasPrefix(e.Error(), "fuzz.yaml: yaml: ") {
				t.Fatalf("problem is neither a FieldError nor a named YAML error: %q", e)
			}
			continue
		}
		if fe.File != "fuzz.yaml" || fe.Msg == "" {
			t.Fatalf("problem does not name the file or says nothing: %#v", fe)
		}
		// Only the whole document has no field path: when it is empty or
		// not a mapping.
		whole := fe.Msg == "empty recipe; it needs at least a name" || strings.HasPrefix(fe.Msg, "want a mapping")
		if fe.Line <= 0 && fe.Msg != "empty recipe; it needs at least a name" || fe.Path == "" && !whole {
			t.Fatalf("problem does not name its line and field: %#v", fe)
		}
	}
}

// comparable is r without what only says where it was read from.
func comparable(r *Recipe) Recipe {
	c := *r
	c.Raw = nil
	c.Go = append([]GoComponent(nil), r.Go...)
	for i := range c.Go {
		c.Go[i].Line = 0
	}
	c.URLs = append([]URLComponent(nil), r.URLs...)
	for i := range c.URLs {
		c.URLs[i].Line = 0
	}
	c.Files = append([]File(nil), r.Files...)
	for i := range c.Files {
		c.Files[i].Line = 0
	}
	return c
}

func marshal(t *testing.T, v any) string {
	out, err := yaml.Marshal(v)
	if err != nil {
		t.Fatalf("marshalling an accepted recipe: %v", err)
	}
	return string(out)
}
