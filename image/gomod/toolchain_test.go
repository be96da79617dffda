package gomod

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeGo is a go command that answers `go env -json` with GOVERSION
// version whatever GOTOOLCHAIN says, like an installed go that does not
// switch toolchains, and records the GOTOOLCHAIN it was given.
func fakeGo(t *testing.T, version string) (bin, seen string) {
	t.Helper()
	dir := t.TempDir()
	bin, seen = filepath.Join(dir, "go"), filepath.Join(dir, "gotoolchain")
	script := "#!/bin/sh\necho \"$GOTOOLCHAIN\" > " + seen + "\necho '{\"GOVERSION\": \"" + version + "\", \"GOROOT\": \"/fake/goroot\"}'\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, seen
}

func TestToolchainIsTheLocksNotTheCallers(t *testing.T) {
	bin, seen := fakeGo(t, "go1.27.3")
	env := Env{Go: bin, WorkDir: t.TempDir(), Toolchain: "go1.27.3", Environ: []string{"PATH=/usr/bin:/bin", "GOTOOLCHAIN=go1.26.8"}}
	g, err := env.prepare(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(seen); strings.TrimSpace(string(got)) != "go1.27.3" {
		t.Errorf("the go command ran with GOTOOLCHAIN=%q, want the lock's go1.27.3", strings.TrimSpace(string(got)))
	}
	n := 0
	for _, kv := range g.base {
		if strings.HasPrefix(kv, "GOTOOLCHAIN=") {
			n++
			if kv != "GOTOOLCHAIN=go1.27.3" {
				t.Errorf("build environment has %s", kv)
			}
		}
	}
	if n != 1 {
		t.Errorf("build environment has %d GOTOOLCHAIN settings", n)
	}
}

func TestRefusesAnotherToolchain(t *testing.T) {
	bin, _ := fakeGo(t, "go1.26.8")
	_, err := GoVersion(context.Background(), Env{Go: bin, WorkDir: t.TempDir(), Toolchain: "go1.27.3"})
	if err == nil || !strings.Contains(err.Error(), "the lock pins Go toolchain go1.27.3 but the go command runs go1.26.8: refusing to build with another toolchain") {
		t.Fatalf("err = %v", err)
	}
	for _, bad := range []string{"go1.27.3+auto", "1.27.3", "local"} {
		if _, err := GoVersion(context.Background(), Env{Go: bin, WorkDir: t.TempDir(), Toolchain: bad}); err == nil {
			t.Errorf("toolchain %q accepted", bad)
		}
	}
}

func TestFindSource(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/own\n\ngo 1.26\n"), 0o644)
	os.MkdirAll(filepath.Join(dir, "recipes"), 0o755)
	s, err := FindSource("example.com/own", filepath.Join(dir, "recipes"))
	if err != nil || s.Dir != dir || s.Commit != "" || s.State != "" {
		t.Fatalf("FindSource = %+v, %v; want the module root %s, not yet described", s, err, dir)
	}
	if _, err := FindSource("example.com/other", dir); err == nil || !strings.Contains(err.Error(), "pass --agent and --init") {
		t.Errorf("other module: %v", err)
	}
}
