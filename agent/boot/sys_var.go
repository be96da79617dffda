package boot

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ext4 superblock magic: 0xEF53 at byte 56 of the superblock, which starts
// at byte 1024 of the filesystem.
const (
	ext4MagicOffset = 1024 + 56
	ext4Magic       = 0xef53
)

// HasExt4Magic reports whether b, read from byte ext4MagicOffset of a
// partition, is the ext2/3/4 superblock magic. A var partition without it
// is one whose first boot stopped before mke2fs finished.
func HasExt4Magic(b []byte) bool {
	return len(b) >= 2 && binary.LittleEndian.Uint16(b) == ext4Magic
}

// mke2fsPaths are where the image may keep mke2fs, inside the new root.
var mke2fsPaths = []string{"/usr/sbin/mke2fs", "/sbin/mke2fs"}

// ensureVarPartition finds the var partition on the boot disk, creating it
// on first boot, and makes sure the kernel has its node.
func (m *Machine) ensureVarPartition() error {
	devs, err := ScanBlockDevices(m.Paths.sysBlock())
	if err != nil {
		return err
	}
	var disk BlockDevice
	for _, d := range devs {
		if d.Name == m.parts.Root.Disk && d.DevType == "disk" {
			disk = d
		}
	}
	if disk.Name == "" {
		return fmt.Errorf("the boot disk %s of partition %s is not in %s", m.parts.Root.Disk, m.parts.Root.Name, m.Paths.sysBlock())
	}
	node, err := ensureNode(m.Paths.Dev, disk)
	if err != nil {
		return err
	}
	typ, err := ParseGUID(m.Config.VarPartType)
	if err != nil {
		return err
	}
	varDev, summary, err := EnsureVarPartition(node, m.Paths.sysBlock(), m.Paths.Dev, disk.Name, VarSpec{Type: typ, Name: m.Config.VarLabel}, m.Log)
	if err != nil {
		return err
	}
	m.varDev = varDev
	m.Log.Printf("var-partition: %s", summary)
	return nil
}

// EnsureVarPartition plans and applies the var partition on the whole-disk
// node diskPath (sysfs name diskName) and returns the partition's node.
func EnsureVarPartition(diskPath, sysBlock, devDir, diskName string, spec VarSpec, log *Log) (node, summary string, err error) {
	f, err := os.OpenFile(diskPath, os.O_RDWR, 0)
	if err != nil {
		return "", "", fmt.Errorf("opening the boot disk %s: %w", diskPath, err)
	}
	defer f.Close()
	size, ss, err := DiskGeometry(f)
	if err != nil {
		return "", "", err
	}
	plan, err := PlanVarPartition(f, size, ss, spec)
	if err != nil {
		return "", "", fmt.Errorf("planning the var partition on %s: %w", diskPath, err)
	}
	summary = plan.String()
	if plan.Created {
		log.Debugf("GPT writes on %s:\n%s", diskPath, strings.TrimRight(DescribeWrites(plan.Writes), "\n"))
		if err := ApplyWrites(f, plan.Writes); err != nil {
			return "", "", fmt.Errorf("writing the GPT of %s: %w", diskPath, err)
		}
		if err := f.Sync(); err != nil {
			return "", "", fmt.Errorf("syncing the GPT of %s: %w", diskPath, err)
		}
	}
	part, how, err := KernelPartition(f, sysBlock, diskName, plan.Partition.Number, plan.Start(), plan.Size(), PartitionWait)
	if err != nil {
		return "", "", err
	}
	node, err = ensureNode(devDir, part)
	if err != nil {
		return "", "", err
	}
	return node, fmt.Sprintf("%s: %s (%s)", summary, node, how), nil
}

// formatVar formats the var partition unless it already holds ext4.
func (m *Machine) formatVar() error {
	ok, err := hasExt4(m.varDev)
	if err != nil {
		return err
	}
	if ok {
		m.Log.Debugf("%s has an ext4 superblock: keeping it", m.varDev)
		return nil
	}
	m.Log.Printf("var-format: no ext4 superblock on %s: formatting it", m.varDev)
	return Mke2fs(m.Paths.Sysroot, m.Paths, m.varDev, m.Config.VarLabel)
}

func hasExt4(dev string) (bool, error) {
	f, err := os.Open(dev)
	if err != nil {
		return false, fmt.Errorf("opening %s: %w", dev, err)
	}
	defer f.Close()
	b := make([]byte, 2)
	if _, err := f.ReadAt(b, ext4MagicOffset); err != nil {
		return false, fmt.Errorf("reading the superblock of %s: %w", dev, err)
	}
	return HasExt4Magic(b), nil
}

// Mke2fs runs the image's own mke2fs on dev, chrooted into root, with the
// initrd's /dev, /proc and /sys bind-mounted there for the time it runs
// (mke2fs opens the device, and checks /proc that it is not mounted).
func Mke2fs(root string, p Paths, dev, label string) (err error) {
	var prog string
	for _, c := range mke2fsPaths {
		if fi, err := os.Stat(filepath.Join(root, c)); err == nil && fi.Mode().IsRegular() {
			prog = c
			break
		}
	}
	if prog == "" {
		return fmt.Errorf("the image has no mke2fs (looked for %s): add e2fsprogs to the recipe", strings.Join(mke2fsPaths, ", "))
	}
	for _, src := range []string{p.Dev, p.Proc, p.Sys} {
		dst := filepath.Join(root, src)
		if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind-mounting %s at %s for mke2fs: %w (the image must have %s)", src, dst, err, src)
		}
		defer func() {
			if uerr := unix.Unmount(dst, unix.MNT_DETACH); uerr != nil && err == nil {
				err = fmt.Errorf("unmounting %s after mke2fs: %w", dst, uerr)
			}
		}()
	}
	cmd := exec.Command(prog, "-t", "ext4", "-L", label, "-F", dev)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("formatting %s with %s (in %s): %w: %s", dev, prog, root, err, lastLines(out.String(), 5))
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " / ")
}
