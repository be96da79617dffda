package storage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// System is what the agent's storage step needs from the node: the data
// disks as they are, and mkfs. Host is the real one, Fake the tests'.
type System interface {
	// Disks lists the whole disks but the boot disk, probed.
	Disks() ([]Disk, error)
	// Format makes an ext4 filesystem with uuid on dev, holding the
	// directories of Binds.
	Format(dev, uuid string) error
}

// Host is the node: /sys, /proc/self/mountinfo, blkid and mkfs.ext4
// (util-linux and e2fsprogs are in the image), under Root.
type Host struct {
	Root string
}

// Disks finds the boot disk (the disk of the filesystem at /var) and
// lists the others with blkid's probe of each.
func (h Host) Disks() ([]Disk, error) {
	mi, err := os.ReadFile(filepath.Join(h.Root, "proc/self/mountinfo"))
	if err != nil {
		return nil, fmt.Errorf("reading the mounts: %w", err)
	}
	dev, err := MountDevice(string(mi), "/var")
	if err != nil {
		return nil, fmt.Errorf("finding the boot disk: %w", err)
	}
	sys := filepath.Join(h.Root, "sys")
	boot, err := DiskOf(sys, dev)
	if err != nil {
		return nil, fmt.Errorf("finding the boot disk: %w", err)
	}
	disks, err := ScanSys(sys, boot)
	if err != nil {
		return nil, err
	}
	for i := range disks {
		disks[i].Probe = blkid(disks[i].Path)
	}
	return disks, nil
}

// blkid probes dev itself (-p: the superblocks and partition tables on
// the device, not the cache or udev's database, which may not be up).
func blkid(dev string) Probe {
	cmd := exec.Command("blkid", "-p", "-o", "export", dev)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit) && exit.ExitCode() == 2:
		return Probe{} // nothing found
	case err != nil:
		return Probe{Err: fmt.Sprintf("blkid -p %s: %v %s", dev, err, strings.TrimSpace(stderr.String()))}
	}
	return ParseBlkid(string(out))
}

// Format runs mkfs.ext4 on dev with uuid and Label; -d fills the new
// filesystem's root with the directories of Binds, so they exist the
// moment it is mounted (the agent's mount namespace is private and does
// not need to see it). -E nodiscard: a new ECS disk reads as zeros, and
// discarding a large one costs the first boot time.
func (h Host) Format(dev, uuid string) error {
	tmpl, err := os.MkdirTemp("", "drover-data-")
	if err != nil {
		return fmt.Errorf("formatting %s: %w", dev, err)
	}
	defer os.RemoveAll(tmpl)
	for _, b := range Binds {
		mode := os.FileMode(0o711) // containerd's own mode for its root
		if err := os.Mkdir(filepath.Join(tmpl, b.Dir), mode); err != nil {
			return fmt.Errorf("formatting %s: %w", dev, err)
		}
		if err := os.Chmod(filepath.Join(tmpl, b.Dir), mode); err != nil { // past the umask
			return fmt.Errorf("formatting %s: %w", dev, err)
		}
	}
	cmd := exec.Command("mkfs.ext4", "-F", "-q", "-U", uuid, "-L", Label, "-E", "nodiscard", "-d", tmpl, filepath.Join(h.Root, dev))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("formatting %s (mkfs.ext4 -U %s): %v: %s", dev, uuid, err, strings.TrimSpace(string(out)))
	}
	return nil
}
