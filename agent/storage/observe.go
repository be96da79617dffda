package storage

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// skipPrefixes are /sys/block entries that are not disks an instance is
// given: loop and RAM disks, device-mapper and md devices (built on
// disks), optical drives.
var skipPrefixes = []string{"loop", "ram", "zram", "dm-", "sr", "md"}

// ScanSys lists the whole disks under sys (a /sys), leaving out bootDisk
// (a name such as vda), removable, read-only and empty devices and the
// kinds in skipPrefixes. Probe is left to the caller (blkid).
func ScanSys(sys, bootDisk string) ([]Disk, error) {
	entries, err := os.ReadDir(filepath.Join(sys, "block"))
	if err != nil {
		return nil, fmt.Errorf("listing block devices: %w", err)
	}
	var disks []Disk
	for _, e := range entries {
		name := e.Name()
		if name == bootDisk || skipped(name) {
			continue
		}
		dir := filepath.Join(sys, "block", name)
		if readInt(filepath.Join(dir, "removable")) == 1 || readInt(filepath.Join(dir, "ro")) == 1 {
			continue
		}
		sectors := readInt(filepath.Join(dir, "size"))
		if sectors <= 0 {
			continue
		}
		d := Disk{Name: name, Path: "/dev/" + name, Size: uint64(sectors) * 512} // sysfs counts 512-byte sectors whatever the block size
		sub, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", dir, err)
		}
		for _, s := range sub {
			if isPartition(name, s.Name()) && fileExists(filepath.Join(dir, s.Name(), "partition")) {
				d.Partitions = append(d.Partitions, s.Name())
			}
		}
		holders, _ := os.ReadDir(filepath.Join(dir, "holders"))
		for _, h := range holders {
			d.Holders = append(d.Holders, h.Name())
		}
		disks = append(disks, d)
	}
	sort.Slice(disks, func(i, j int) bool { return disks[i].Name < disks[j].Name })
	return disks, nil
}

func skipped(name string) bool {
	for _, p := range skipPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// isPartition says whether sub, an entry of /sys/block/<disk>, is named
// as a partition of disk: vdb1 of vdb, nvme0n1p1 of nvme0n1.
func isPartition(disk, sub string) bool {
	rest, ok := strings.CutPrefix(sub, disk)
	if !ok || rest == "" {
		return false
	}
	rest = strings.TrimPrefix(rest, "p")
	_, err := strconv.Atoi(rest)
	return err == nil
}

func readInt(p string) int64 {
	b, err := os.ReadFile(p)
	if err != nil {
		return -1
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return -1
	}
	return v
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// ParseBlkid reads `blkid -p -o export` output for one device.
func ParseBlkid(out string) Probe {
	var p Probe
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		p.Found = true
		switch k {
		case "TYPE":
			p.Type = v
		case "UUID":
			p.UUID = v
		case "LABEL":
			p.Label = v
		case "PTTYPE":
			p.PTType = v
		}
	}
	return p
}

// MountDevice is the device number ("major:minor") of the filesystem
// mounted at mountpoint, from a /proc/<pid>/mountinfo; the last mount
// there wins, as it hides the others.
func MountDevice(mountinfo, mountpoint string) (string, error) {
	dev := ""
	sc := bufio.NewScanner(strings.NewReader(mountinfo))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 5 && f[4] == mountpoint {
			dev = f[2]
		}
	}
	if dev == "" {
		return "", fmt.Errorf("nothing is mounted at %s", mountpoint)
	}
	return dev, nil
}

// DiskOf is the whole disk (a /sys/block name) that the block device
// numbered dev ("major:minor") is on: the device itself, the disk of a
// partition, or, for a device-mapper or md device, the disk under its
// first slave.
func DiskOf(sys, dev string) (string, error) {
	for range 8 { // a stack of dm/md devices is never this deep
		target, err := filepath.EvalSymlinks(filepath.Join(sys, "dev", "block", dev))
		if err != nil {
			return "", fmt.Errorf("finding the disk of device %s: %w", dev, err)
		}
		if fileExists(filepath.Join(target, "partition")) {
			return filepath.Base(filepath.Dir(target)), nil
		}
		slaves, _ := os.ReadDir(filepath.Join(target, "slaves"))
		if len(slaves) == 0 {
			return filepath.Base(target), nil
		}
		b, err := os.ReadFile(filepath.Join(target, "slaves", slaves[0].Name(), "dev"))
		if err != nil {
			return "", fmt.Errorf("finding the disk of device %s: %w", dev, err)
		}
		dev = strings.TrimSpace(string(b))
	}
	return "", fmt.Errorf("finding the disk of device %s: too many stacked devices", dev)
}
