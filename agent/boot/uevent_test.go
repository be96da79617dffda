package boot

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	rootUUID   = "5c8d1e8b-2bd0-a5e0-e2f2-f7c6a0f3a6a4"
	verityUUID = "b2d7f0c1-e3b5-a7c9-d1f3-e5a7b9c1d3e5"
)

func dev(t *testing.T, name, uevent, link string) BlockDevice {
	t.Helper()
	d, err := NewBlockDevice(name, []byte(uevent), link)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestNewBlockDevice(t *testing.T) {
	vda2 := dev(t, "vda2", "MAJOR=254\nMINOR=2\nDEVNAME=vda2\nDEVTYPE=partition\nDISKSEQ=9\nPARTN=2\nPARTUUID=5C8D1E8B-2BD0-A5E0-E2F2-F7C6A0F3A6A4\nPARTNAME=root\n",
		"../../devices/pci0000:00/0000:00:04.0/virtio1/block/vda/vda2")
	want := BlockDevice{Name: "vda2", DevName: "vda2", DevType: "partition", Major: 254, Minor: 2, PartN: 2, PartUUID: rootUUID, PartName: "root", Disk: "vda"}
	if vda2 != want {
		t.Errorf("vda2 = %+v", vda2)
	}
	nvme := dev(t, "nvme0n1p3", "MAJOR=259\nMINOR=3\nDEVNAME=nvme0n1p3\nDEVTYPE=partition\nPARTN=3\nPARTUUID="+verityUUID+"\n",
		"../../devices/pci0000:00/0000:00:05.0/nvme/nvme0/nvme0n1/nvme0n1p3")
	if nvme.Disk != "nvme0n1" || nvme.PartN != 3 || nvme.Major != 259 {
		t.Errorf("nvme0n1p3 = %+v", nvme)
	}
	disk := dev(t, "nvme0n1", "MAJOR=259\nMINOR=0\nDEVNAME=nvme0n1\nDEVTYPE=disk\nDISKSEQ=1\n", "../../devices/pci0000:00/0000:00:05.0/nvme/nvme0/nvme0n1")
	if disk.DevType != "disk" || disk.Disk != "" || disk.PartN != 0 {
		t.Errorf("nvme0n1 = %+v", disk)
	}
	for _, bad := range []struct{ name, uevent, link string }{
		{"vda2", "MINOR=2\nDEVTYPE=partition\nPARTN=2\n", "x/vda/vda2"},
		{"vda2", "MAJOR=254\nMINOR=2\nDEVTYPE=partition\n", "x/vda/vda2"},
		{"vda2", "MAJOR=254\nMINOR=2\nDEVTYPE=partition\nPARTN=2\n", "vda2"},
	} {
		if _, err := NewBlockDevice(bad.name, []byte(bad.uevent), bad.link); err == nil {
			t.Errorf("NewBlockDevice(%q, %q) succeeded", bad.uevent, bad.link)
		}
	}
}

func bootDisk(t *testing.T, disk, sep string, major uint32) []BlockDevice {
	t.Helper()
	devs := []BlockDevice{{Name: disk, DevName: disk, DevType: "disk", Major: major}}
	for i, u := range []string{"11111111-2222-4333-8444-555555555555", rootUUID, verityUUID} {
		n := i + 1
		name := disk + sep + string(rune('0'+n))
		devs = append(devs, BlockDevice{Name: name, DevName: name, DevType: "partition", Major: major, Minor: uint32(n), PartN: n, PartUUID: u, Disk: disk})
	}
	return devs
}

func TestMatchBootPartitions(t *testing.T) {
	for _, tc := range []struct{ disk, sep string }{{"vda", ""}, {"nvme0n1", "p"}} {
		devs := bootDisk(t, tc.disk, tc.sep, 254)
		p, done, err := MatchBootPartitions(devs, strings.ToUpper(rootUUID), verityUUID)
		if err != nil || !done || p.Root.Name != tc.disk+tc.sep+"2" || p.Verity.Name != tc.disk+tc.sep+"3" {
			t.Errorf("%s: %+v %v %v", tc.disk, p, done, err)
		}
		if _, ok := FindPartition(devs, tc.disk, 3); !ok {
			t.Errorf("%s: partition 3 not found", tc.disk)
		}
	}
	// Not there yet: keep polling.
	if _, done, err := MatchBootPartitions(bootDisk(t, "vda", "", 254)[:3], rootUUID, verityUUID); done || err != nil {
		t.Errorf("half the partitions: done=%v err=%v", done, err)
	}
	// The same image on two disks: refuse to guess.
	two := append(bootDisk(t, "vda", "", 254), bootDisk(t, "vdb", "", 254)...)
	if _, _, err := MatchBootPartitions(two, rootUUID, verityUUID); err == nil || !strings.Contains(err.Error(), "several disks") {
		t.Errorf("two disks: err = %v", err)
	}
	// Root on one disk, verity on another.
	split := append(bootDisk(t, "vda", "", 254)[:3], bootDisk(t, "vdb", "", 254)[3])
	if _, _, err := MatchBootPartitions(split, rootUUID, verityUUID); err == nil || !strings.Contains(err.Error(), "different disks") {
		t.Errorf("split image: err = %v", err)
	}
	if s := DescribeDevices(nil); !strings.Contains(s, "virtio_blk") {
		t.Errorf("DescribeDevices(nil) = %q", s)
	}
}

// TestScanBlockDevices runs the sysfs scan over a fake /sys/class/block.
func TestScanBlockDevices(t *testing.T) {
	sys := t.TempDir()
	devices := filepath.Join(sys, "devices", "virtio1", "block")
	class := filepath.Join(sys, "class", "block")
	for _, d := range []struct{ path, uevent string }{
		{"vda", "MAJOR=254\nMINOR=0\nDEVNAME=vda\nDEVTYPE=disk\n"},
		{"vda/vda2", "MAJOR=254\nMINOR=2\nDEVNAME=vda2\nDEVTYPE=partition\nPARTN=2\nPARTUUID=" + rootUUID + "\n"},
		{"vda/vda3", "MAJOR=254\nMINOR=3\nDEVNAME=vda3\nDEVTYPE=partition\nPARTN=3\nPARTUUID=" + verityUUID + "\n"},
		{"vda/vda9", "garbage"},
	} {
		dir := filepath.Join(devices, d.path)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "uevent"), []byte(d.uevent), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(class, 0o755); err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(class, dir)
		if err := os.Symlink(rel, filepath.Join(class, filepath.Base(d.path))); err != nil {
			t.Fatal(err)
		}
	}
	devs, err := ScanBlockDevices(class)
	if err != nil {
		t.Fatal(err)
	}
	p, done, err := MatchBootPartitions(devs, rootUUID, verityUUID)
	if len(devs) != 3 || !done || err != nil || p.Root.Disk != "vda" {
		t.Errorf("scan = %v; match %+v %v %v", devs, p, done, err)
	}
}

// TestFillFromGPT: kernels before 6.3 leave PARTUUID out of the uevent;
// the GPT entries supply it.
func TestFillFromGPT(t *testing.T) {
	devs := bootDisk(t, "vda", "", 254)
	for i := range devs {
		devs[i].PartUUID = ""
	}
	devs = append(devs, BlockDevice{Name: "vdb1", DevType: "partition", PartN: 1, PartUUID: "x", Disk: "vdb"})
	if got := NeedsGPT(devs); len(got) != 1 || got[0] != "vda" {
		t.Fatalf("NeedsGPT = %v", got)
	}
	r, _ := ParseGUID(rootUUID)
	v, _ := ParseGUID(verityUUID)
	FillFromGPT(devs, "vda", []GPTPartition{{Number: 2, UUID: r, Name: "root"}, {Number: 3, UUID: v, Name: "root-verity"}})
	p, done, err := MatchBootPartitions(devs, rootUUID, verityUUID)
	if !done || err != nil || p.Root.Name != "vda2" || p.Verity.PartName != "root-verity" {
		t.Errorf("after FillFromGPT: %+v %v %v", p, done, err)
	}
	if devs[1].PartUUID != "" {
		t.Errorf("partition 1 has no GPT entry given but got PARTUUID %q", devs[1].PartUUID)
	}
}
