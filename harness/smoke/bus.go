package smoke

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/drover-os/drover/harness/qemu"
)

// State-directory files: the UEFI variable store qemu.Config.Prepare copies
// in when it is missing, and the disk controller of the last boot.
const (
	ovmfVars = "OVMF_VARS.fd"
	busFile  = "disk-bus"
)

// PrepareBus is called before every boot of a state directory. When the
// disk is attached to another controller than at the last boot (virtio-blk
// ↔ NVMe, as a change of ECS instance type does), it discards the UEFI
// variables: their boot entries name the old controller's device path, and
// OVMF then tries the network for minutes instead of booting the disk.
// Firmware on a new instance type starts from fresh variables too. It
// reports whether the disk moved.
func PrepareBus(c *qemu.Config) (bool, error) {
	bus := busName(c.NVMe)
	path := filepath.Join(c.StateDir, busFile)
	last, err := os.ReadFile(path)
	switch {
	case os.IsNotExist(err):
	case err != nil:
		return false, fmt.Errorf("reading the last boot's disk controller: %w", err)
	}
	moved := len(last) > 0 && strings.TrimSpace(string(last)) != bus
	if moved {
		if err := os.Remove(filepath.Join(c.StateDir, ovmfVars)); err != nil && !os.IsNotExist(err) {
			return false, fmt.Errorf("resetting the UEFI variables for the new disk controller: %w", err)
		}
	}
	if err := os.MkdirAll(c.StateDir, 0o755); err != nil {
		return false, err
	}
	if err := os.WriteFile(path, []byte(bus+"\n"), 0o644); err != nil {
		return false, fmt.Errorf("recording the disk controller in %s: %w", c.StateDir, err)
	}
	return moved, nil
}

func busName(nvme bool) string {
	if nvme {
		return "NVMe"
	}
	return "virtio-blk"
}
