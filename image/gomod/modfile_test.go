package gomod

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestRenderInitialGoMod(t *testing.T) {
	f := goModFile{Module: moduleBase + "kubelet", Go: "1.26", Replace: []Replace{
		{Old: "k8s.io/client-go", New: "k8s.io/client-go", Version: "v0.36.3"},
		{Old: "k8s.io/api", New: "k8s.io/api", Version: "v0.36.3"},
		{Old: "example.com/x", OldVersion: "v1.0.0", New: "example.com/y", Version: "v1.0.1"},
	}}
	want := `module drover.invalid/build/kubelet
go 1.26
replace example.com/x v1.0.0 => example.com/y v1.0.1
replace k8s.io/api => k8s.io/api v0.36.3
replace k8s.io/client-go => k8s.io/client-go v0.36.3
`
	if got := f.render(); got != want {
		t.Errorf("render:\n%s\nwant:\n%s", got, want)
	}
}

// editSample is real `go mod edit -json` output (go1.26) after a go get of
// golang.org/x/tools/cmd/stringer with one replace added.
const editSample = `{
	"Module": {"Path": "drover.invalid/build/stringer"},
	"Go": "1.26.0",
	"Toolchain": "go1.26.8",
	"Require": [
		{"Path": "golang.org/x/tools", "Version": "v0.30.0", "Indirect": true},
		{"Path": "golang.org/x/mod", "Version": "v0.23.0", "Indirect": true},
		{"Path": "example.com/direct", "Version": "v1.0.0"}
	],
	"Exclude": null,
	"Replace": [{"Old": {"Path": "golang.org/x/sync"}, "New": {"Path": "golang.org/x/sync", "Version": "v0.11.0"}}],
	"Retract": null,
	"Tool": null,
	"Ignore": null
}`

func TestParseAndRenderGoMod(t *testing.T) {
	f, err := parseEditJSON([]byte(editSample))
	if err != nil {
		t.Fatal(err)
	}
	want := `module drover.invalid/build/stringer
go 1.26.0
toolchain go1.26.8
require example.com/direct v1.0.0
require golang.org/x/mod v0.23.0 // indirect
require golang.org/x/tools v0.30.0 // indirect
replace golang.org/x/sync => golang.org/x/sync v0.11.0
`
	got := f.render()
	if got != want {
		t.Errorf("render:\n%s\nwant:\n%s", got, want)
	}
	// The normalised form survives a line-oriented lock file: no blank or
	// indented lines that a "trim each line" reader would alter.
	l := &Locked{GoMod: got}
	for _, line := range l.GoModLines() {
		if line == "" || strings.TrimSpace(line) != line {
			t.Errorf("line %q would not survive a lock file", line)
		}
	}
	if back := GoModFromLines(l.GoModLines()); back != got {
		t.Errorf("GoModFromLines(GoModLines()) = %q, want %q", back, got)
	}
}

func TestParseEditJSONRefusesUnknownDirectives(t *testing.T) {
	in := `{"Module": {"Path": "m"}, "Go": "1.26", "Exclude": [{"Path": "a", "Version": "v1.0.0"}]}`
	_, err := parseEditJSON([]byte(in))
	if err == nil || !strings.Contains(err.Error(), "exclude/retract/tool/ignore/godebug") {
		t.Errorf("err = %v, want a refusal naming the directives", err)
	}
}

func TestStagingReplacesKubernetes(t *testing.T) {
	text, err := os.ReadFile("testdata/kubernetes-v1.36.3.go.mod")
	if err != nil {
		t.Fatal(err)
	}
	got := StagingReplaces(string(text), "v1.36.3")
	if len(got) != 33 {
		t.Fatalf("got %d replaces, want the 33 staging modules: %v", len(got), got)
	}
	first, last := got[0], got[len(got)-1]
	if first != (Replace{Old: "k8s.io/api", New: "k8s.io/api", Version: "v0.36.3"}) {
		t.Errorf("first = %v, want k8s.io/api => k8s.io/api v0.36.3", first)
	}
	if last.Old != "k8s.io/streaming" {
		t.Errorf("last = %v, want k8s.io/streaming (sorted)", last)
	}
	for _, r := range got {
		if !strings.HasPrefix(r.Old, "k8s.io/") || r.New != r.Old || r.Version != "v0.36.3" || r.OldVersion != "" {
			t.Errorf("unexpected replace %v", r)
		}
	}
}

func TestStagingReplacesForms(t *testing.T) {
	text := `module example.com/mono

go 1.22

require (
	example.com/lib v0.0.0 // => ./staging/not-a-replace
	example.com/other v1.0.0
)

replace example.com/single => ./staging/src/example.com/single // trailing comment
replace example.com/elsewhere => ../elsewhere
replace example.com/pinned => example.com/pinned v1.2.0

replace (
	// a comment line
	example.com/lib => ./staging/src/example.com/lib
	example.com/old v0.0.0 => ./staging/src/example.com/old
	example.com/lib => ./staging/src/example.com/lib
)
`
	tests := []struct{ version, want string }{
		{"v1.30.2", "v0.30.2"},
		{"v1.31.0-rc.1", "v0.31.0-rc.1"},
		{"v0.5.1", "v0.5.1"},
		{"main", "main"}, // not a version: used as is
	}
	for _, tc := range tests {
		got := StagingReplaces(text, tc.version)
		want := []Replace{
			{Old: "example.com/lib", New: "example.com/lib", Version: tc.want},
			{Old: "example.com/old", New: "example.com/old", Version: tc.want},
			{Old: "example.com/single", New: "example.com/single", Version: tc.want},
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("StagingReplaces(%s):\n got %v\nwant %v", tc.version, got, want)
		}
	}
	if got := StagingReplaces("module x\n\ngo 1.22\n", "v1.0.0"); got != nil {
		t.Errorf("no replaces: got %v, want nil", got)
	}
}

func TestParseReplace(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Replace
	}{
		{"k8s.io/api => k8s.io/api v0.36.3", Replace{Old: "k8s.io/api", New: "k8s.io/api", Version: "v0.36.3"}},
		{"a v1.0.0 => b v1.0.1", Replace{Old: "a", OldVersion: "v1.0.0", New: "b", Version: "v1.0.1"}},
		{"  a   =>  b v2.0.0 ", Replace{Old: "a", New: "b", Version: "v2.0.0"}},
	} {
		got, err := ParseReplace(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseReplace(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if back, _ := ParseReplace(got.String()); back != got {
			t.Errorf("ParseReplace(%q.String()) = %v, want round trip", got, back)
		}
	}
	for _, in := range []string{"a b", "a => b", "=> b v1.0.0", "a v1 v2 => b v1.0.0", "a => b v1 extra"} {
		if _, err := ParseReplace(in); err == nil || !strings.Contains(err.Error(), "'old => new version'") {
			t.Errorf("ParseReplace(%q): err = %v, want the syntax hint", in, err)
		}
	}
}

// TestRequiredVersion reads a require line of a go.mod, in a block or not,
// and names the module it cannot find.
func TestRequiredVersion(t *testing.T) {
	text := "module k8s.io/kubernetes\n\ngo 1.25.0\n\nrequire github.com/a/b v1.0.0\n\nrequire (\n\tgithub.com/onsi/ginkgo/v2 v2.32.0\n\tgithub.com/onsi/gomega v1.38.0 // indirect\n)\n"
	for mod, want := range map[string]string{"github.com/onsi/ginkgo/v2": "v2.32.0", "github.com/a/b": "v1.0.0", "github.com/onsi/gomega": "v1.38.0"} {
		if got, err := RequiredVersion(text, mod); err != nil || got != want {
			t.Errorf("%s: %q, %v; want %s", mod, got, err, want)
		}
	}
	if _, err := RequiredVersion(text, "github.com/onsi/ginkgo"); err == nil || !strings.Contains(err.Error(), "requires no github.com/onsi/ginkgo") {
		t.Errorf("a module not required: %v", err)
	}
}
