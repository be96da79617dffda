//go:build integration

package gomod

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestIntegrationPinnedToolchain builds a small checkout with the toolchain
// pinned to go1.27.3, which the module proxy serves, while the installed go
// is another release and the caller's GOTOOLCHAIN says something else: the
// binary must be built by go1.27.3, and twice the same bytes.
func TestIntegrationPinnedToolchain(t *testing.T) {
	const pinned = "go1.27.3"
	installed, err := GoVersion(context.Background(), Env{WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if installed == pinned {
		t.Fatalf("the installed go is %s already: this test proves nothing; pin another release here", pinned)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/own\n\ngo 1.26\n"), 0o644)
	os.MkdirAll(filepath.Join(dir, "cmd", "hello"), 0o755)
	os.WriteFile(filepath.Join(dir, "cmd", "hello", "main.go"), []byte("package main\n\nfunc main() { println(\"hello\") }\n"), 0o644)
	src, err := FindSource("example.com/own", dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var sums []string
	for _, caller := range []string{"GOTOOLCHAIN=" + installed, "GOTOOLCHAIN=local"} {
		env := Env{WorkDir: t.TempDir(), Toolchain: pinned, Environ: append(os.Environ(), caller)}
		b, err := BuildLocal(ctx, env, nil, src, "./cmd/hello", "linux", "amd64", t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if b.GoVersion != pinned {
			t.Fatalf("built by %s with %s in the caller's environment, want %s", b.GoVersion, caller, pinned)
		}
		sums = append(sums, b.SHA256)
		t.Logf("installed %s, caller %s: built by %s, sha256 %s", installed, caller, b.GoVersion, b.SHA256)
	}
	if sums[0] != sums[1] {
		t.Errorf("two builds differ: %v", sums)
	}
}
