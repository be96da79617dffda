//go:build integration

package qemu

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestBlockStatsFromQEMU asks a real QEMU (a machine with no CPU, only the
// drive) over QMP: the protocol, the drive's name and the counters' fields
// are QEMU's, not this package's idea of them.
func TestBlockStatsFromQEMU(t *testing.T) {
	dir := t.TempDir()
	disk := filepath.Join(dir, "disk.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-f", "qcow2", disk, "1M").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v: %s", err, out)
	}
	vm := &VM{qmp: filepath.Join(dir, "qmp.sock")}
	cmd := exec.Command("qemu-system-x86_64", "-machine", "none", "-nodefaults", "-display", "none",
		"-drive", "if=none,id="+BootDisk+",format=qcow2,file="+disk,
		"-qmp", "unix:"+vm.qmp+",server=on,wait=off")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var err error
	for i := 0; i < 100; i++ {
		if _, err = os.Stat(vm.qmp); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	st, err := vm.BlockStats(BootDisk)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing has read the drive: QEMU counts only what a guest issued.
	if st != (BlockStats{}) {
		t.Errorf("an idle drive's counters: %+v, want zero", st)
	}
	if _, err := vm.BlockStats("nodisk"); err == nil {
		t.Error("a drive QEMU does not have: no error")
	}
}
