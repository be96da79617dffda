package recipe

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func writeRecipes(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const baseRecipe = `name: base
packages: [systemd, runc]
go:
  - name: kubelet
    module: k8s.io/kubernetes
    version: v1.37.2
    package: k8s.io/kubernetes/cmd/kubelet
    install: /usr/bin/kubelet
    release: kubernetes
  - name: tool
    module: example.org/tool
    version: v1.0.0
    package: example.org/tool
    install: /usr/bin/tool
    tags: [a]
files:
  - path: /etc/a
    content: base
units:
  enable: [a.service]
image:
  formats: [raw, qcow2]
`

// TestExtendsMerge: scalars replace, lists append without repeating,
// go/urls/files entries merge by identity in their place.
func TestExtendsMerge(t *testing.T) {
	dir := writeRecipes(t, map[string]string{
		"base.yaml": baseRecipe,
		"over.yaml": `extends: base.yaml
name: over
packages: [runc, crun]
go:
  - name: kubelet
    version: v1.34.4
  - name: tool
    tags: [b]
  - name: extra
    module: example.org/extra
    version: v0.1.0
    package: example.org/extra
    install: /usr/bin/extra
files:
  - path: /etc/a
    content: over
  - path: /etc/b
    content: b
units:
  enable: [b.service, a.service]
image:
  formats: [vhd]
`,
	})
	r, err := Load(filepath.Join(dir, "over.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "over" || r.Extends != "base.yaml" {
		t.Errorf("name %q extends %q", r.Name, r.Extends)
	}
	if want := []string{"systemd", "runc", "crun"}; !slices.Equal(r.Packages, want) {
		t.Errorf("packages %v, want %v", r.Packages, want)
	}
	var names []string
	for _, g := range r.Go {
		names = append(names, g.Name)
	}
	if want := []string{"kubelet", "tool", "extra"}; !slices.Equal(names, want) {
		t.Fatalf("go components %v, want %v", names, want)
	}
	k := r.Go[0]
	if k.Version != "v1.34.4" || k.Module != "k8s.io/kubernetes" || k.Release != "kubernetes" || k.Install != "/usr/bin/kubelet" {
		t.Errorf("kubelet not merged field by field: %+v", k)
	}
	if k.From != filepath.Join(dir, "over.yaml") {
		t.Errorf("kubelet From %q: the overlay wrote its version", k.From)
	}
	if tags := r.Go[1].Tags; !slices.Equal(tags, []string{"a", "b"}) {
		t.Errorf("tool tags %v, want [a b]", tags)
	}
	if len(r.Files) != 2 || r.Files[0].Content != "over" || r.Files[1].Path != "/etc/b" {
		t.Errorf("files %+v", r.Files)
	}
	if !slices.Equal(r.Units.Enable, []string{"a.service", "b.service"}) {
		t.Errorf("units.enable %v", r.Units.Enable)
	}
	if !slices.Equal(r.Image.Formats, []string{"raw", "qcow2", "vhd"}) {
		t.Errorf("image.formats %v", r.Image.Formats)
	}
	if len(r.Sources) != 2 || filepath.Base(r.Sources[1].Path) != "base.yaml" {
		t.Errorf("sources %+v", r.Sources)
	}
	if r.LockPath() != filepath.Join(dir, "over.yaml.lock") {
		t.Errorf("lock %s: one lock per recipe file", r.LockPath())
	}

	// A change to the base changes the overlay's digests.
	before, inputs := r.Digest(), r.InputsDigest()
	os.WriteFile(filepath.Join(dir, "base.yaml"), []byte(strings.Replace(baseRecipe, "runc]", "runc, conntrack]", 1)), 0o644)
	r2, err := Load(filepath.Join(dir, "over.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if r2.Digest() == before || r2.InputsDigest() == inputs {
		t.Error("a change to the base left the overlay's digests unchanged")
	}
}

// TestExtendsErrors: problems name the file and line they were written at,
// in the overlay or in the base.
func TestExtendsErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"error in overlay", map[string]string{"base.yaml": baseRecipe,
			"over.yaml": "extends: base.yaml\ngo:\n  - name: kubelet\n    version: v1.34\n"},
			`over.yaml:4: go[0].version: release: kubernetes needs a release version: "v1.34" is not a Kubernetes release version like v1.37.2`},
		{"error in base", map[string]string{"base.yaml": "name: b\npackages: ['Bad Name']\n",
			"over.yaml": "extends: base.yaml\nname: o\n"},
			`base.yaml:2: packages[0]: "Bad Name" is not a Debian package name (name or name=version)`},
		{"unknown field in base", map[string]string{"base.yaml": "name: b\npackges: [a]\n",
			"over.yaml": "extends: base.yaml\n"},
			`base.yaml:2: packges: unknown field`},
		{"cycle", map[string]string{"a.yaml": "extends: b.yaml\nname: a\n", "b.yaml": "extends: c.yaml\nname: b\n", "c.yaml": "extends: a.yaml\n",
			"over.yaml": "extends: a.yaml\n"},
			`c.yaml:1: extends: "a.yaml": recipes extend each other in a cycle: `},
		{"self", map[string]string{"over.yaml": "extends: over.yaml\nname: x\n"},
			`over.yaml:1: extends: "over.yaml": recipes extend each other in a cycle: `},
		{"missing base", map[string]string{"over.yaml": "name: x\nextends: nope.yaml\n"},
			`over.yaml:2: extends: reading the base recipe: open `},
		{"path", map[string]string{"over.yaml": "extends: ../x.yaml\n"},
			`over.yaml:1: extends: "../x.yaml": name a recipe in the same directory (a file name, no path)`},
		{"not a string", map[string]string{"over.yaml": "extends: [a.yaml]\n"},
			`over.yaml:1: extends: want the file name of the base recipe, e.g. ecs-node.yaml, got a list`},
		{"replace with release", map[string]string{"base.yaml": baseRecipe,
			"over.yaml": "extends: base.yaml\ngo:\n  - name: kubelet\n    replace: ['k8s.io/api => k8s.io/api v0.34.4']\n"},
			`over.yaml:4: go[0].replace: release: kubernetes derives the staging replaces from the version; remove the list`},
		{"release module", map[string]string{"base.yaml": baseRecipe,
			"over.yaml": "extends: base.yaml\ngo:\n  - name: tool\n    release: kubernetes\n"},
			`over.yaml:4: go[1].release: release: kubernetes builds k8s.io/kubernetes, not "example.org/tool"`},
	} {
		dir := writeRecipes(t, tc.files)
		_, err := Load(filepath.Join(dir, "over.yaml"))
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		if got := strings.ReplaceAll(err.Error(), dir+"/", ""); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s:\n got %s\nwant %s…", tc.name, got, tc.want)
		}
	}
}

// TestExtendsCNIPlugins: an overlay's cni.plugins follow its base's, and
// each keeps the file it was written in.
func TestExtendsCNIPlugins(t *testing.T) {
	dir := writeRecipes(t, map[string]string{
		"base.yaml": "name: base\ncni:\n  plugins: [bridge, loopback]\n",
		"over.yaml": "extends: base.yaml\nname: over\ncni:\n  plugins:\n    - loopback\n    - tuning\n",
	})
	r, err := Load(filepath.Join(dir, "over.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if got, named := r.CNIPlugins(); !slices.Equal(got, []string{"bridge", "loopback", "tuning"}) || !named {
		t.Errorf("plugins %v (named %v), want the base's and then the overlay's new one", got, named)
	}
	want := []string{filepath.Join(dir, "base.yaml") + ":3", filepath.Join(dir, "base.yaml") + ":3", filepath.Join(dir, "over.yaml") + ":6"}
	if !slices.Equal(r.CNI.At, want) {
		t.Errorf("At %q, want %q", r.CNI.At, want)
	}
}
