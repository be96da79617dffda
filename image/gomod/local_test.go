package gomod

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestBuildLocalCached: the second build of an unchanged checkout takes the
// stored binary (no go build: the log shows none), a changed source file
// or another GOARCH builds again, and a damaged blob is rebuilt, never
// returned.
func TestBuildLocalCached(t *testing.T) {
	ctx := context.Background()
	var log bytes.Buffer
	env := Env{WorkDir: t.TempDir(), Log: &log}
	g, err := env.prepare(ctx)
	must(t, err)
	src := tinySource(t, g.version)
	store := newDirStore(t)
	build := func(goarch string) (*Binary, bool) {
		t.Helper()
		log.Reset()
		b, err := BuildLocal(ctx, env, store, src, "./cmd/tiny", "linux", goarch, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return b, strings.Contains(log.String(), " build ")
	}
	first, built := build(runtime.GOARCH)
	if !built || store.links != 1 {
		t.Fatalf("first build: built %v, %d links\n%s", built, store.links, log.String())
	}
	second, built := build(runtime.GOARCH)
	if built || second.SHA256 != first.SHA256 {
		t.Errorf("unchanged checkout: built again %v, sha256 %s vs %s\n%s", built, second.SHA256, first.SHA256, log.String())
	}
	// Callers remove the file they get (the image holds its bytes); the
	// stored binary must survive that.
	must(t, os.Remove(second.Path))
	if third, built := build(runtime.GOARCH); built || third.SHA256 != first.SHA256 {
		t.Errorf("after the caller removed the binary it got, the next build built again: %v", built)
	}
	if _, built := build(map[string]string{"amd64": "arm64", "arm64": "amd64"}[runtime.GOARCH]); !built {
		t.Errorf("another GOARCH took the stored binary")
	}
	main := filepath.Join(src.Dir, "cmd", "tiny", "main.go")
	data, err := os.ReadFile(main)
	must(t, err)
	must(t, os.WriteFile(main, bytes.Replace(data, []byte("ring.New(2)"), []byte("ring.New(3)"), 1), 0o644))
	changed, built := build(runtime.GOARCH)
	if !built || changed.SHA256 == first.SHA256 {
		t.Errorf("a changed source file: built %v, sha256 %s (first %s)", built, changed.SHA256, first.SHA256)
	}
	// Damage every stored blob: the next build must not return one.
	ents, err := os.ReadDir(store.dir)
	must(t, err)
	for _, e := range ents {
		must(t, os.WriteFile(filepath.Join(store.dir, e.Name()), []byte("damaged"), 0o755))
	}
	again, built := build(runtime.GOARCH)
	if !built || again.SHA256 != changed.SHA256 {
		t.Errorf("a damaged blob: built %v, sha256 %s, want %s", built, again.SHA256, changed.SHA256)
	}
}
