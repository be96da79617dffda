package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildReleaseRefusesDev: a drover built with no stamp and no VCS
// information (go build -buildvcs=false: a tarball, a CI cache) is "dev"
// with an unknown source; drover build --release refuses it before
// building, saying what to do, and writes nothing.
func TestBuildReleaseRefusesDev(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "drover")
	build := exec.Command("go", "build", "-buildvcs=false", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -buildvcs=false: %v\n%s", err, out)
	}
	out := filepath.Join(dir, "out")
	cmd := exec.Command(bin, "build", "--release", "../../recipes/minimal.yaml", "-o", out)
	got, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("drover build --release with a dev builder succeeded:\n%s", got)
	}
	for _, want := range []string{`--release: the builder's version is "dev"`, "source state unknown", "clean git checkout with `make build`"} {
		if !strings.Contains(string(got), want) {
			t.Errorf("error does not say %q:\n%s", want, got)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a refused release build made %s (%v)", out, err)
	}
}
