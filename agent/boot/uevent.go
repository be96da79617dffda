package boot

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// BlockDevice is one entry of /sys/class/block as its uevent file and
// sysfs link describe it.
type BlockDevice struct {
	Name     string // sysfs name: vda2, nvme0n1p2
	DevName  string // DEVNAME: the node under /dev
	DevType  string // "disk" or "partition"
	Major    uint32
	Minor    uint32
	PartN    int    // PARTN: the partition number, 0 for a disk
	PartUUID string // PARTUUID, lowercase; empty when the kernel did not parse a table entry
	PartName string // PARTNAME
	Disk     string // sysfs name of the whole disk a partition belongs to
}

// String describes the device for error messages.
func (d BlockDevice) String() string {
	s := fmt.Sprintf("%s (%s %d:%d", d.Name, d.DevType, d.Major, d.Minor)
	if d.PartUUID != "" {
		s += " PARTUUID=" + d.PartUUID
	}
	return s + ")"
}

// ParseUevent parses a sysfs uevent file: KEY=value lines.
func ParseUevent(b []byte) map[string]string {
	m := make(map[string]string)
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && k != "" {
			m[k] = v
		}
	}
	return m
}

// NewBlockDevice builds a BlockDevice from its sysfs name, its uevent
// contents and the target of its /sys/class/block/<name> link (…/vda/vda2
// for a partition: the parent directory is the disk).
func NewBlockDevice(name string, uevent []byte, link string) (BlockDevice, error) {
	u := ParseUevent(uevent)
	d := BlockDevice{
		Name:     name,
		DevName:  u["DEVNAME"],
		DevType:  u["DEVTYPE"],
		PartUUID: strings.ToLower(u["PARTUUID"]),
		PartName: u["PARTNAME"],
	}
	if d.DevName == "" {
		d.DevName = name
	}
	for _, f := range []struct {
		key string
		dst *uint32
	}{{"MAJOR", &d.Major}, {"MINOR", &d.Minor}} {
		n, err := strconv.ParseUint(u[f.key], 10, 32)
		if err != nil {
			return d, fmt.Errorf("block device %s: uevent %s=%q is not a number", name, f.key, u[f.key])
		}
		*f.dst = uint32(n)
	}
	if d.DevType == "partition" {
		n, err := strconv.Atoi(u["PARTN"])
		if err != nil || n <= 0 {
			return d, fmt.Errorf("block device %s: uevent PARTN=%q is not a partition number", name, u["PARTN"])
		}
		d.PartN = n
		parts := strings.Split(strings.TrimRight(link, "/"), "/")
		if len(parts) < 2 || parts[len(parts)-1] != name {
			return d, fmt.Errorf("block device %s: sysfs link %q does not end in <disk>/%s", name, link, name)
		}
		d.Disk = parts[len(parts)-2]
	}
	return d, nil
}

// FindByPartUUID returns the one partition whose PARTUUID is uuid
// (case-insensitive). It reports found=false when there is none yet, and an
// error when there are several: two disks made from the same image (a data
// disk restored from this image's snapshot) would make the choice a guess.
func FindByPartUUID(devs []BlockDevice, uuid string) (BlockDevice, bool, error) {
	var hits []BlockDevice
	for _, d := range devs {
		if d.DevType == "partition" && strings.EqualFold(d.PartUUID, uuid) {
			hits = append(hits, d)
		}
	}
	switch len(hits) {
	case 0:
		return BlockDevice{}, false, nil
	case 1:
		return hits[0], true, nil
	}
	names := make([]string, len(hits))
	for i, h := range hits {
		names[i] = h.Name
	}
	return BlockDevice{}, false, fmt.Errorf("partitions %s all have PARTUUID %s: several disks hold this image; detach the extra disk (or give it new partition UUIDs) and reboot",
		strings.Join(names, ", "), uuid)
}

// FindPartition returns partition number n of disk, if the kernel has it.
func FindPartition(devs []BlockDevice, disk string, n int) (BlockDevice, bool) {
	for _, d := range devs {
		if d.DevType == "partition" && d.Disk == disk && d.PartN == n {
			return d, true
		}
	}
	return BlockDevice{}, false
}

// NeedsGPT returns the disks with partitions whose uevent carries no
// PARTUUID (kernels before 6.3 do not put it there); their UUIDs have to be
// read from the partition table itself.
func NeedsGPT(devs []BlockDevice) []string {
	seen := map[string]bool{}
	var disks []string
	for _, d := range devs {
		if d.DevType == "partition" && d.PartUUID == "" && d.Disk != "" && !seen[d.Disk] {
			seen[d.Disk] = true
			disks = append(disks, d.Disk)
		}
	}
	return disks
}

// FillFromGPT sets the PARTUUID and PARTNAME of disk's partitions that lack
// them from the disk's GPT entries, matched by partition number.
func FillFromGPT(devs []BlockDevice, disk string, parts []GPTPartition) {
	for i, d := range devs {
		if d.DevType != "partition" || d.Disk != disk || d.PartUUID != "" {
			continue
		}
		for _, p := range parts {
			if p.Number == d.PartN {
				devs[i].PartUUID = guidString(p.UUID)
				if devs[i].PartName == "" {
					devs[i].PartName = p.Name
				}
			}
		}
	}
}

// BootPartitions is the result of matching the root and root-verity
// partitions.
type BootPartitions struct {
	Root, Verity BlockDevice
}

// MatchBootPartitions finds the root and root-verity partitions. done is
// false while either is missing (the caller polls); an error is final.
func MatchBootPartitions(devs []BlockDevice, rootUUID, verityUUID string) (p BootPartitions, done bool, err error) {
	root, okRoot, err := FindByPartUUID(devs, rootUUID)
	if err != nil {
		return p, false, err
	}
	ver, okVerity, err := FindByPartUUID(devs, verityUUID)
	if err != nil {
		return p, false, err
	}
	if !okRoot || !okVerity {
		return p, false, nil
	}
	if root.Disk != ver.Disk {
		return p, false, fmt.Errorf("root partition %s and root-verity partition %s are on different disks: the image was split; attach the whole image as one disk",
			root.Name, ver.Name)
	}
	return BootPartitions{Root: root, Verity: ver}, true, nil
}

// DescribeDevices lists devices for an error message, sorted by name.
func DescribeDevices(devs []BlockDevice) string {
	if len(devs) == 0 {
		return "no block devices at all (is the disk driver module, virtio_blk or nvme, in the initrd?)"
	}
	s := make([]string, len(devs))
	for i, d := range devs {
		s[i] = d.String()
	}
	sort.Strings(s)
	return strings.Join(s, ", ")
}
