package gomod

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
)

func validComponent() Component {
	return Component{
		Name: "kubelet", Module: "k8s.io/kubernetes", Version: "v1.36.3", Package: "k8s.io/kubernetes/cmd/kubelet",
		Replace: []Replace{{Old: "k8s.io/api", New: "k8s.io/api", Version: "v0.36.3"}},
		Ldflags: []string{"-s -w", "-X k8s.io/component-base/version.gitVersion=v1.36.3"},
		Tags:    []string{"providerless", "netgo"},
	}
}

func TestValidate(t *testing.T) {
	if err := func() *Component { c := validComponent(); return &c }().validate(); err != nil {
		t.Fatalf("valid component: %v", err)
	}
	for _, tc := range []struct {
		edit func(*Component)
		want string
	}{
		{func(c *Component) { c.Name = "a/b" }, "name must be"},
		{func(c *Component) { c.Version = "latest" }, `version "latest" is not an exact module version`},
		{func(c *Component) { c.Version = "v1.36" }, "not an exact module version"},
		{func(c *Component) { c.Package = "k8s.io/kubernetesx/cmd" }, "is not inside module k8s.io/kubernetes"},
		{func(c *Component) { c.Module = "" }, "is not a module path"},
		{func(c *Component) { c.Replace = []Replace{{Old: "a", New: "./staging/a"}} }, "directory replace is not reproducible"},
		{func(c *Component) { c.Replace = []Replace{{Old: "a", New: "b"}} }, "new side must be 'module vX.Y.Z'"},
		{func(c *Component) { c.Replace = append(c.Replace, c.Replace[0]) }, "is replaced twice"},
		{func(c *Component) { c.Tags = []string{"a,b"} }, "build tag"},
		{func(c *Component) { c.Ldflags = []string{"-X a=b\n"} }, "newline"},
	} {
		c := validComponent()
		tc.edit(&c)
		err := c.validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "fix the recipe") {
			t.Errorf("%+v: err = %v, want %q and a hint", c, err, tc.want)
		}
	}
}

func lockedSample() *Locked {
	return &Locked{
		Component: validComponent(),
		GoMod:     "module drover.invalid/build/kubelet\ngo 1.26.0\nrequire k8s.io/kubernetes v1.36.3 // indirect\nreplace k8s.io/api => k8s.io/api v0.36.3\n",
		Sum:       []string{"k8s.io/api v0.36.3 h1:AAAA", "k8s.io/api v0.36.3/go.mod h1:BBBB"},
		GoVersion: "go1.26.8",
	}
}

func TestCacheKeyStable(t *testing.T) {
	a := CacheKey(lockedSample(), "linux", "amd64", "go1.26.8")
	b := CacheKey(lockedSample(), "linux", "amd64", "go1.26.8")
	if a != b {
		t.Fatalf("CacheKey differs between calls:\n%s\n%s", a, b)
	}
	// A golden value: a change here invalidates every cached binary, so it
	// must be a deliberate one.
	const want = "gomod kubelet k8s.io/kubernetes@v1.36.3 k8s.io/kubernetes/cmd/kubelet linux/amd64 go1.26.8 "
	if !strings.HasPrefix(a, want) || len(a) != len(want)+64 || strings.ContainsRune(a, '\n') {
		t.Errorf("CacheKey = %q, want %q + 64 hex digits on one line", a, want)
	}
	t.Logf("key: %s", a)
	// The whole key, so that adding a field (Test) that leaves every
	// existing main-package key as it was is checked, not assumed.
	if want := want + "8724495dc18083f27e9f124c80da20199603126f1a1a19f6013dcc210dbfa52a"; a != want {
		t.Errorf("CacheKey = %q, want %q: every cached binary would be rebuilt", a, want)
	}

	// Replaces are a set: their order in the recipe does not matter.
	l := lockedSample()
	l.Replace = []Replace{{Old: "k8s.io/client-go", New: "k8s.io/client-go", Version: "v0.36.3"}, l.Replace[0]}
	m := lockedSample()
	m.Replace = []Replace{l.Replace[1], l.Replace[0]}
	if CacheKey(l, "linux", "amd64", "go1.26.8") != CacheKey(m, "linux", "amd64", "go1.26.8") {
		t.Error("CacheKey depends on the order of replaces")
	}
}

func TestCacheKeySensitive(t *testing.T) {
	base := CacheKey(lockedSample(), "linux", "amd64", "go1.26.8")
	for name, edit := range map[string]func(*Locked){
		"name":         func(l *Locked) { l.Name = "kubelet2" },
		"module":       func(l *Locked) { l.Module = "k8s.io/kubernetes2" },
		"version":      func(l *Locked) { l.Version = "v1.36.4" },
		"package":      func(l *Locked) { l.Package = "k8s.io/kubernetes/cmd/kubeadm" },
		"replace":      func(l *Locked) { l.Replace = []Replace{{Old: "k8s.io/api", New: "k8s.io/api", Version: "v0.36.4"}} },
		"no replace":   func(l *Locked) { l.Replace = nil },
		"ldflags":      func(l *Locked) { l.Ldflags = []string{"-s -w"} },
		"ldflag order": func(l *Locked) { l.Ldflags = []string{l.Ldflags[1], l.Ldflags[0]} },
		"tags":         func(l *Locked) { l.Tags = nil },
		"tag order":    func(l *Locked) { l.Tags = []string{l.Tags[1], l.Tags[0]} },
		"test binary":  func(l *Locked) { l.Test = true },
		"go.mod":       func(l *Locked) { l.GoMod = strings.Replace(l.GoMod, "go 1.26.0", "go 1.26.1", 1) },
		"go.sum":       func(l *Locked) { l.Sum = l.Sum[:1] },
		"go.sum hash":  func(l *Locked) { l.Sum = []string{"k8s.io/api v0.36.3 h1:CCCC", l.Sum[1]} },
		// Moving text between fields must not collide (JSON keeps fields apart).
		"field shift": func(l *Locked) { l.Ldflags = []string{"-s -w -X k8s.io/component-base/version.gitVersion=v1.36.3"} },
	} {
		l := lockedSample()
		edit(l)
		if CacheKey(l, "linux", "amd64", "go1.26.8") == base {
			t.Errorf("%s: key unchanged", name)
		}
	}
	for _, tgt := range [][3]string{{"linux", "arm64", "go1.26.8"}, {"windows", "amd64", "go1.26.8"}, {"linux", "amd64", "go1.26.9"}} {
		if CacheKey(lockedSample(), tgt[0], tgt[1], tgt[2]) == base {
			t.Errorf("%v: key unchanged", tgt)
		}
	}
}

func TestCleanEnviron(t *testing.T) {
	got := cleanEnviron([]string{"PATH=/bin", "GOFLAGS=-race", "GOAMD64=v3", "CGO_ENABLED=1", "HOME=/h", "GOPROXY=x", "XGO=1"})
	want := []string{"HOME=/h", "PATH=/bin", "XGO=1"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("cleanEnviron = %v, want %v", got, want)
	}
}

// TestPrepareEnvironment runs the local go command (`go env` only, no
// network): the caller's module settings are inherited, build settings not.
func TestPrepareEnvironment(t *testing.T) {
	env := Env{WorkDir: t.TempDir(), Environ: append(os.Environ(),
		"GOPROXY=off", "GOFLAGS=-race", "GOAMD64=v3", "GOEXPERIMENT=boringcrypto", "CGO_ENABLED=1", "GOOS=windows", "GOROOT=/caller/goroot")}
	g, err := env.prepare(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(g.version, "go1.") {
		t.Errorf("version = %q, want go1.x", g.version)
	}
	has := map[string]bool{}
	for _, kv := range g.base {
		has[kv] = true
	}
	for _, kv := range []string{"GOPROXY=off", "GOENV=off", "GOTOOLCHAIN=local", "GOWORK=off", "CGO_ENABLED=0", "GOFLAGS=-mod=mod"} {
		if !has[kv] {
			t.Errorf("environment lacks %s", kv)
		}
	}
	for _, kv := range pinned {
		if !has[kv] {
			t.Errorf("environment lacks the pinned %s", kv)
		}
	}
	roots := 0
	for _, kv := range g.base {
		if strings.HasPrefix(kv, "GOROOT=") {
			roots++
		}
	}
	if roots != 1 {
		t.Errorf("environment has %d GOROOT settings, want the toolchain's one", roots)
	}
	for _, kv := range []string{"GOFLAGS=-race", "GOAMD64=v3", "GOEXPERIMENT=boringcrypto", "CGO_ENABLED=1", "GOOS=windows", "GOROOT=/caller/goroot"} {
		if has[kv] {
			t.Errorf("environment leaks %s", kv)
		}
	}
	v, err := GoVersion(context.Background(), env)
	if err != nil || v != g.version {
		t.Errorf("GoVersion = %q, %v; want %q", v, err, g.version)
	}
	if lang, err := langVersion(v); err != nil || strings.Count(lang, ".") != 1 {
		t.Errorf("langVersion(%q) = %q, %v; want 1.N", v, lang, err)
	}
}

func TestGoMissing(t *testing.T) {
	_, err := GoVersion(context.Background(), Env{Go: "/nonexistent/go", WorkDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "check that Go is installed") {
		t.Errorf("err = %v, want a hint to install Go", err)
	}
}

func TestLangVersion(t *testing.T) {
	for in, want := range map[string]string{"go1.26.8": "1.26", "go1.27rc1": "1.27", "go1.21.0": "1.21"} {
		if got, err := langVersion(in); err != nil || got != want {
			t.Errorf("langVersion(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := langVersion("devel +abc"); err == nil {
		t.Error("langVersion(devel): want an error")
	}
}

func TestSumLinesAndDiff(t *testing.T) {
	got := sumLines("b v1 h1:x\n\na v1 h1:y\nb v1 h1:x\n")
	if want := []string{"a v1 h1:y", "b v1 h1:x"}; !reflect.DeepEqual(got, want) {
		t.Errorf("sumLines = %v, want %v", got, want)
	}
	if d := lineDiff("a\nb\n", "a\nc\n"); d != "+c; -b" {
		t.Errorf("lineDiff = %q", d)
	}
	if d := lineDiff("a\nb\n", "b\na\n"); d != "reformatted" {
		t.Errorf("lineDiff of reordered = %q", d)
	}
}

func TestStderrTail(t *testing.T) {
	var lines []string
	for i := range 30 {
		lines = append(lines, fmt.Sprintf("go: downloading m%d v1.0.0", i), fmt.Sprintf("line %d", i))
	}
	got := stderrTail(strings.Join(lines, "\n"), 3)
	if want := "[… 27 lines, see the log …]\nline 27\nline 28\nline 29"; got != want {
		t.Errorf("stderrTail = %q, want %q", got, want)
	}
}

// kubeletStderr is an excerpt of what `go get k8s.io/kubernetes/cmd/kubelet`
// prints without replaces.
const kubeletStderr = `go: downloading k8s.io/api v0.0.0
go: k8s.io/kubernetes/cmd/kubelet imports
	k8s.io/kubernetes/pkg/scheduler/framework/plugins/volumezone imports
	k8s.io/cloud-provider/volume/helpers: k8s.io/cloud-provider@v0.0.0: reading https://proxy.example/k8s.io/cloud-provider/@v/v0.0.0.zip: 403 Forbidden
	server response: This module version is not available.
go: k8s.io/kubernetes/cmd/kubelet imports
	k8s.io/client-go/listers/policy/v1: k8s.io/client-go@v0.0.0: reading https://proxy.example/k8s.io/client-go/@v/v0.0.0.zip: 403 Forbidden
	k8s.io/api/core/v1: k8s.io/api@v0.0.0: reading https://proxy.example/k8s.io/api/@v/v0.0.0.zip: 404 Not Found
`

func TestMissingReplacesError(t *testing.T) {
	var got []string
	for _, m := range placeholderRE.FindAllStringSubmatch(kubeletStderr, -1) {
		got = append(got, m[1])
	}
	if want := []string{"k8s.io/cloud-provider", "k8s.io/client-go", "k8s.io/api"}; !reflect.DeepEqual(got, want) {
		t.Errorf("placeholder modules = %v, want %v", got, want)
	}
	cause := errors.New("exit status 1")
	e := &MissingReplacesError{Component: "kubelet", Module: "k8s.io/kubernetes@v1.36.3",
		Missing:   []string{"k8s.io/api", "k8s.io/client-go"},
		Suggested: []Replace{{Old: "k8s.io/api", New: "k8s.io/api", Version: "v0.36.3"}, {Old: "k8s.io/client-go", New: "k8s.io/client-go", Version: "v0.36.3"}},
		Err:       cause}
	want := "locking Go component kubelet: k8s.io/kubernetes@v1.36.3 depends on k8s.io/api, k8s.io/client-go at v0.0.0, " +
		"a placeholder that k8s.io/kubernetes's own go.mod replaces with local directories, which Go ignores in a dependency; " +
		"add these lines to the component's replace list in the recipe:\n" +
		"  - k8s.io/api => k8s.io/api v0.36.3\n  - k8s.io/client-go => k8s.io/client-go v0.36.3"
	if e.Error() != want {
		t.Errorf("Error():\n%s\nwant:\n%s", e.Error(), want)
	}
	if !errors.Is(e, cause) {
		t.Error("MissingReplacesError does not wrap the go command's error")
	}
	e.Suggested = nil
	if !strings.HasSuffix(e.Error(), "as 'module => module vX.Y.Z'") {
		t.Errorf("without suggestions: %s", e.Error())
	}
}

func TestLockedValidate(t *testing.T) {
	l := lockedSample()
	if err := l.validate(); err != nil {
		t.Fatalf("valid lock: %v", err)
	}
	l.GoMod = strings.Replace(l.GoMod, "build/kubelet", "build/other", 1)
	if err := l.validate(); err == nil || !strings.Contains(err.Error(), "run `drover lock` again") {
		t.Errorf("wrong module line: err = %v", err)
	}
	l = lockedSample()
	l.Sum = nil
	if err := l.validate(); err == nil || !strings.Contains(err.Error(), "no go.sum lines") {
		t.Errorf("no sums: err = %v", err)
	}
	if _, err := Build(context.Background(), Env{}, lockedSample(), "linux", "amd64/x"); err == nil || !strings.Contains(err.Error(), "not valid") {
		t.Errorf("bad GOARCH: err = %v", err)
	}
}

func TestShellJoin(t *testing.T) {
	got := shellJoin([]string{"GOOS=linux", "go", "build", "-ldflags", "-s -w -X main.v=it's", ""})
	if want := `GOOS=linux go build -ldflags '-s -w -X main.v=it'\''s' ''`; got != want {
		t.Errorf("shellJoin = %s, want %s", got, want)
	}
}
