package smoke

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/drover-os/drover/harness/qemu"
)

func TestPrepareBus(t *testing.T) {
	dir := t.TempDir()
	vars := filepath.Join(dir, ovmfVars)
	c := &qemu.Config{StateDir: dir}
	step := func(nvme, wantMoved, wantVars bool) {
		t.Helper()
		os.WriteFile(vars, []byte("boot entries"), 0o644)
		c.NVMe = nvme
		moved, err := PrepareBus(c)
		if err != nil {
			t.Fatal(err)
		}
		_, err = os.Stat(vars)
		if moved != wantMoved || (err == nil) != wantVars {
			t.Errorf("nvme=%v: moved=%v, UEFI vars kept=%v; want %v, %v", nvme, moved, err == nil, wantMoved, wantVars)
		}
	}
	step(false, false, true) // first boot: nothing recorded yet
	step(false, false, true) // reboot on the same controller keeps the boot entries
	step(true, true, false)  // moved to NVMe: fresh variables
	step(true, false, true)
	step(false, true, false) // and back
}
