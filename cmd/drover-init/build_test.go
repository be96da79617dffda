//go:build integration

package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// sizeBudget is the most drover-init may weigh: it is loaded into memory
// from the initrd on every boot.
const sizeBudget = 5 << 20

// TestStaticBinary builds drover-init as the image builder does and checks
// that it is a static ELF (no PT_INTERP: there is no dynamic loader in the
// initrd) within the size budget.
func TestStaticBinary(t *testing.T) {
	out := filepath.Join(t.TempDir(), "drover-init")
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatal("drover-init has a PT_INTERP program header: it is dynamically linked (build with CGO_ENABLED=0)")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Fatalf("drover-init imports %v", libs)
	}
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("drover-init: static ELF, %d bytes (%.2f MiB)", fi.Size(), float64(fi.Size())/(1<<20))
	if fi.Size() > sizeBudget {
		t.Errorf("drover-init is %d bytes, over the %d-byte budget: check what new dependency came in (go version -m)", fi.Size(), sizeBudget)
	}

	// Outside PID 1 the binary prints its plan.
	plan, err := exec.Command(out, "--plan", "../../agent/boot/testdata/config.json").CombinedOutput()
	// It is the plan agent/boot's golden file holds for the same config
	// (the golden goes on with the steps' generic descriptions).
	want, rerr := os.ReadFile("../../agent/boot/testdata/plan.golden")
	if err != nil || rerr != nil || !strings.Contains(string(plan), ". switch-root: ") || !strings.HasPrefix(string(want), string(plan)) {
		t.Errorf("--plan: %v, %v\n%s\nwant (agent/boot/testdata/plan.golden):\n%s", err, rerr, plan, want)
	}
	if err := exec.Command(out).Run(); err == nil {
		t.Error("running drover-init without arguments outside PID 1 succeeded")
	}
}
