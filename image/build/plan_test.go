package build

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/image/lock"
	"github.com/drover-os/drover/image/recipe"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// planInputs is the test recipe (read as if from recipes/, as the CLI
// would name it) and a lock made for it.
func planInputs(t *testing.T) (*recipe.Recipe, *lock.Lock) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "plan.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := recipe.Parse("recipes/plan-test.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	l := &lock.Lock{
		Inputs: r.InputsDigest(),
		Epoch:  1795252544,
		Suites: []lock.Suite{{Name: "trixie", Date: time.Unix(1795252544, 0).UTC(), InRelease: strings.Repeat("f", 64)}},
		Debs: []lock.Deb{
			{Name: "base-files", Version: "13.8", Arch: "amd64", Size: 88324, SHA256: strings.Repeat("1", 64), Path: "pool/main/b/base-files/base-files_13.8_amd64.deb"},
			{Name: "systemd", Version: "257.9-1", Arch: "amd64", Size: 3 << 20, SHA256: strings.Repeat("2", 64), Path: "pool/main/s/systemd/systemd_257.9-1_amd64.deb"},
		},
		Go: []lock.Go{{Name: "kubelet", Module: "k8s.io/kubernetes", Version: "v1.36.3", Package: "k8s.io/kubernetes/cmd/kubelet", Toolchain: "go1.26.8",
			GoMod: []string{"module drover.invalid/build/kubelet"}, Sum: []string{"a v1 h1:x=", "b v1 h1:y=", "c v1 h1:z="}}},
		URLs: []lock.URL{{Name: "tool", SHA256: strings.Repeat("a", 64), Size: 3, URL: "https://example.invalid/tool"}},
	}
	return r, l
}

// TestPlanGolden pins what `drover build --plan` prints for a recipe with
// packages, a Go and a URL component, a cmdline and three formats.
func TestPlanGolden(t *testing.T) {
	r, l := planInputs(t)
	p, err := NewPlan(r, l, "out/")
	if err != nil {
		t.Fatal(err)
	}
	got := p.String()
	path := filepath.Join("testdata", "plan.golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (write it with `go test ./image/build -run TestPlanGolden -update` and review it)", err)
	}
	if got != string(want) {
		t.Errorf("plan differs from %s (regenerate with -update after an intended change)\n got:\n%s\nwant:\n%s", path, got, want)
	}
}

// TestPlanRefusesStaleLock: a lock made for other inputs stops the build
// before anything runs, saying what to run.
func TestPlanRefusesStaleLock(t *testing.T) {
	r, l := planInputs(t)
	l.Inputs = strings.Repeat("0", 64)
	p, err := NewPlan(r, l, "out")
	want := "lock recipes/plan-test.yaml.lock does not match recipe recipes/plan-test.yaml (its packages, kernel, suites or components changed since it was locked): run `drover lock recipes/plan-test.yaml`"
	if p != nil || err == nil || err.Error() != want {
		t.Fatalf("plan %v, error %v\nwant: %s", p, err, want)
	}
}

// TestBuildID: the build ID (os-release BUILD_ID) changes with every input
// of the image — each lock field and every byte of the recipe — and with
// nothing else (the output directory, the order the lock lists things in).
func TestBuildID(t *testing.T) {
	id := func(r *recipe.Recipe, l *lock.Lock, out string) string {
		t.Helper()
		p, err := NewPlan(r, l, out)
		if err != nil {
			t.Fatal(err)
		}
		return (&builder{p: p, man: &Manifest{}}).buildID()
	}
	r, l := planInputs(t)
	base := id(r, l, "out")
	if len(base) != 16 || strings.Trim(base, "0123456789abcdef") != "" {
		t.Fatalf("build ID %q is not 16 hex digits", base)
	}

	// Not otherwise: another output directory, the same inputs read again,
	// the lock's lists in another order.
	r2, l2 := planInputs(t)
	l2.Debs[0], l2.Debs[1] = l2.Debs[1], l2.Debs[0]
	l2.Go[0].Sum[0], l2.Go[0].Sum[2] = l2.Go[0].Sum[2], l2.Go[0].Sum[0]
	if got := id(r2, l2, "elsewhere"); got != base {
		t.Errorf("same inputs, build ID %s, want %s", got, base)
	}

	// drover's own binaries are built from the checkout, outside the lock:
	// their digests are inputs too.
	own := func(sha string) string {
		p, err := NewPlan(r, l, "out")
		if err != nil {
			t.Fatal(err)
		}
		return (&builder{p: p, man: &Manifest{Own: []OwnFile{{Path: "/usr/bin/drover-agent", SHA256: sha}}}}).buildID()
	}
	if a, b := own(strings.Repeat("a", 64)), own(strings.Repeat("b", 64)); a == b || a == base {
		t.Errorf("drover-agent's digest does not change the build ID (%s, %s, %s without it)", a, b, base)
	}

	for name, change := range map[string]func(r *recipe.Recipe, l *lock.Lock){
		"epoch":        func(r *recipe.Recipe, l *lock.Lock) { l.Epoch++ },
		"suite date":   func(r *recipe.Recipe, l *lock.Lock) { l.Suites[0].Date = l.Suites[0].Date.Add(time.Second) },
		"InRelease":    func(r *recipe.Recipe, l *lock.Lock) { l.Suites[0].InRelease = strings.Repeat("e", 64) },
		"deb version":  func(r *recipe.Recipe, l *lock.Lock) { l.Debs[1].Version = "257.9-2" },
		"deb sha256":   func(r *recipe.Recipe, l *lock.Lock) { l.Debs[0].SHA256 = strings.Repeat("3", 64) },
		"deb size":     func(r *recipe.Recipe, l *lock.Lock) { l.Debs[0].Size++ },
		"go toolchain": func(r *recipe.Recipe, l *lock.Lock) { l.Go[0].Toolchain = "go1.26.9" },
		"go.sum line":  func(r *recipe.Recipe, l *lock.Lock) { l.Go[0].Sum[1] = "b v1 h1:w=" },
		"go.mod line":  func(r *recipe.Recipe, l *lock.Lock) { l.Go[0].GoMod = append(l.Go[0].GoMod, "require a v1") },
		"url sha256":   func(r *recipe.Recipe, l *lock.Lock) { l.URLs[0].SHA256 = strings.Repeat("b", 64) },
		"recipe cmdline": func(r *recipe.Recipe, l *lock.Lock) {
			r.Raw = []byte(strings.Replace(string(r.Raw), "quiet", "quiet2", 1))
		},
		"recipe comment": func(r *recipe.Recipe, l *lock.Lock) { r.Raw = append(r.Raw, "# more\n"...) },
	} {
		r, l := planInputs(t)
		change(r, l)
		if got := id(r, l, "out"); got == base {
			t.Errorf("changing the %s leaves the build ID at %s", name, got)
		}
	}
}
