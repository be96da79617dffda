package gomod

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// These tests run the real go command against the file:// fake proxy of
// proxy_test.go: no network, no root.

func helloComponent() Component {
	return Component{Name: "hello", Module: "example.com/mono", Version: "v1.2.3", Package: "example.com/mono/cmd/hello",
		Ldflags: []string{"-s -w", "-X main.version=v1.2.3"}, Tags: []string{"extra"}}
}

func TestLockMissingReplaces(t *testing.T) {
	env := fakeProxyEnv(t)
	_, err := Lock(context.Background(), env, helloComponent())
	var mr *MissingReplacesError
	if !errors.As(err, &mr) {
		t.Fatalf("err = %v, want a MissingReplacesError", err)
	}
	want := []Replace{{Old: "example.com/lib", New: "example.com/lib", Version: "v0.2.3"}}
	if !reflect.DeepEqual(mr.Missing, []string{"example.com/lib"}) || !reflect.DeepEqual(mr.Suggested, want) {
		t.Errorf("Missing = %v, Suggested = %v; want [example.com/lib], %v", mr.Missing, mr.Suggested, want)
	}
	if !strings.Contains(err.Error(), "  - example.com/lib => example.com/lib v0.2.3") {
		t.Errorf("error does not show the replace line to add:\n%v", err)
	}
	t.Logf("error: %v", err)
}

func lockHello(t *testing.T, env Env) *Locked {
	t.Helper()
	text, err := ModuleGoMod(context.Background(), env, "example.com/mono", "v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	c := helloComponent()
	c.Replace = StagingReplaces(text, c.Version)
	l, err := Lock(context.Background(), env, c)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestLockAndBuild(t *testing.T) {
	env := fakeProxyEnv(t)
	ctx := context.Background()
	l1, l2 := lockHello(t, env), lockHello(t, env)
	if !reflect.DeepEqual(l1, l2) {
		t.Fatalf("two locks differ:\n%+v\n%+v", l1, l2)
	}
	lang, err := langVersion(l1.GoVersion)
	if err != nil {
		t.Fatal(err)
	}
	wantMod := "module drover.invalid/build/hello\ngo " + lang + "\n" +
		"require example.com/lib v0.0.0 // indirect\nrequire example.com/mono v1.2.3 // indirect\n" +
		"replace example.com/lib => example.com/lib v0.2.3\n"
	if l1.GoMod != wantMod {
		t.Errorf("GoMod:\n%s\nwant:\n%s", l1.GoMod, wantMod)
	}
	var mods []string
	for _, s := range l1.Sum {
		mods = append(mods, strings.Fields(s)[0]+" "+strings.Fields(s)[1])
	}
	wantSums := []string{"example.com/lib v0.2.3", "example.com/lib v0.2.3/go.mod", "example.com/mono v1.2.3", "example.com/mono v1.2.3/go.mod"}
	if !reflect.DeepEqual(mods, wantSums) {
		t.Errorf("go.sum lines for %v, want %v", mods, wantSums)
	}

	b1, err := Build(ctx, env, l1, runtime.GOOS, runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	defer b1.Cleanup()
	b2, err := Build(ctx, env, l2, runtime.GOOS, runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Cleanup()
	t.Logf("built %s: %d bytes, sha256 %s", b1.Path, b1.Size, b1.SHA256)
	if b1.SHA256 != b2.SHA256 || b1.Size != b2.Size {
		t.Errorf("two builds differ: %s (%d) vs %s (%d)", b1.SHA256, b1.Size, b2.SHA256, b2.Size)
	}
	if b1.Module != "example.com/mono" || b1.Version != "v1.2.3" || b1.GoVersion != l1.GoVersion {
		t.Errorf("build info: module %s@%s go %s", b1.Module, b1.Version, b1.GoVersion)
	}
	if len(b1.Deps) != 1 || !strings.HasPrefix(b1.Deps[0], "example.com/lib@v0.2.3 h1:") {
		t.Errorf("Deps = %v, want the replaced example.com/lib@v0.2.3 with its hash", b1.Deps)
	}
	settings := map[string]string{}
	for _, s := range b1.BuildInfo.Settings {
		settings[s.Key] = s.Value
	}
	if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" || settings["-tags"] != "extra" {
		t.Errorf("build settings = %v, want CGO_ENABLED=0, -trimpath=true, -tags=extra", settings)
	}
	out, err := exec.Command(b1.Path).Output()
	if err != nil || string(out) != "hello v1.2.3 extra\n" {
		t.Errorf("running the binary: %q, %v; want ldflags -X and the tag applied", out, err)
	}

	// A cross build must find go.sum complete too.
	other := map[string]string{"amd64": "arm64"}[runtime.GOARCH]
	if other == "" {
		other = "amd64"
	}
	b3, err := Build(ctx, env, l1, "linux", other)
	if err != nil {
		t.Fatal(err)
	}
	defer b3.Cleanup()
	if b3.SHA256 == b1.SHA256 {
		t.Errorf("linux/%s build has the same sha256 as the host build", other)
	}
	if err := b1.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(b1.Path); !os.IsNotExist(err) {
		t.Errorf("after Cleanup, %s: %v", b1.Path, err)
	}
}

func TestBuildRefusesIncompleteLock(t *testing.T) {
	env := fakeProxyEnv(t)
	l := lockHello(t, env)
	l.Sum = slices.DeleteFunc(slices.Clone(l.Sum), func(s string) bool { return strings.HasPrefix(s, "example.com/lib v0.2.3 ") })
	_, err := Build(context.Background(), env, l, runtime.GOOS, runtime.GOARCH)
	if err == nil || !strings.Contains(err.Error(), "the go command changed go.sum (+example.com/lib v0.2.3 h1:") ||
		!strings.Contains(err.Error(), "run `drover lock` again") {
		t.Errorf("err = %v, want a refusal naming the added go.sum line", err)
	}
}

func TestBuildCached(t *testing.T) {
	env := fakeProxyEnv(t)
	ctx := context.Background()
	store := newDirStore(t)
	l := lockHello(t, env)
	b1, cached, err := BuildCached(ctx, env, store, l, runtime.GOOS, runtime.GOARCH)
	if err != nil || cached {
		t.Fatalf("first BuildCached: cached=%v, err=%v; want a build", cached, err)
	}
	if b1.Path != store.Path(b1.SHA256) || store.puts != 1 || store.links != 1 {
		t.Errorf("first build: path %s, %d puts, %d links; want the store path, 1, 1", b1.Path, store.puts, store.links)
	}
	entries, _ := os.ReadDir(env.WorkDir)
	if len(entries) != 0 {
		t.Errorf("work dir not cleaned up: %v", entries)
	}
	b2, cached, err := BuildCached(ctx, env, store, l, runtime.GOOS, runtime.GOARCH)
	if err != nil || !cached {
		t.Fatalf("second BuildCached: cached=%v, err=%v; want a hit", cached, err)
	}
	if b2.SHA256 != b1.SHA256 || b2.BuildInfo == nil || b2.Module != "example.com/mono" || !reflect.DeepEqual(b2.Deps, b1.Deps) {
		t.Errorf("cached binary %+v differs from built %+v", b2, b1)
	}
	if store.puts != 1 {
		t.Errorf("a hit stored again (%d puts)", store.puts)
	}

	// A damaged blob is rebuilt, not trusted.
	must(t, os.WriteFile(store.Path(b1.SHA256), []byte("garbage"), 0o644))
	b3, cached, err := BuildCached(ctx, env, store, l, runtime.GOOS, runtime.GOARCH)
	if err != nil || cached || b3.SHA256 != b1.SHA256 {
		t.Errorf("after damage: cached=%v, err=%v, sha %s; want a rebuild giving %s", cached, err, b3.SHA256, b1.SHA256)
	}
}

func TestLockErrors(t *testing.T) {
	env := fakeProxyEnv(t)
	ctx := context.Background()
	c := helloComponent()
	c.Version = "v9.9.9"
	_, err := Lock(ctx, env, c)
	if err == nil || !strings.Contains(err.Error(), "example.com/mono/cmd/hello@v9.9.9 is not served by the Go module proxy") ||
		!strings.Contains(err.Error(), "go list -m -versions example.com/mono") {
		t.Errorf("nonexistent version: err = %v", err)
	}

	c = helloComponent()
	c.Package = "example.com/mono/cmd/nosuch"
	_, err = Lock(ctx, env, c)
	if err == nil || !strings.Contains(err.Error(), "example.com/mono@v1.2.3 has no package example.com/mono/cmd/nosuch; check the package path") {
		t.Errorf("missing package: err = %v", err)
	}

	c = helloComponent()
	c.Package = "example.com/mono/util"
	c.Replace = []Replace{{Old: "example.com/lib", New: "example.com/lib", Version: "v0.2.3"}}
	_, err = Lock(ctx, env, c)
	if err == nil || !strings.Contains(err.Error(), "package example.com/mono/util is package util, not a main package") {
		t.Errorf("library package: err = %v", err)
	}
}
