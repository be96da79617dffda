package storage

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// sysfs builds a /sys under t.TempDir(): each device a directory of
// attribute files, dev/block/M:m links to them as the kernel makes.
type sysfs struct {
	t    *testing.T
	root string
}

func newSysfs(t *testing.T) *sysfs {
	return &sysfs{t: t, root: t.TempDir()}
}

func (s *sysfs) write(rel, content string) {
	p := filepath.Join(s.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content+"\n"), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

// disk adds a disk under devices/ with its /sys/block link; attrs are
// file → content.
func (s *sysfs) disk(name, devnum string, attrs map[string]string) {
	dev := filepath.Join("devices/virtual/block", name)
	for f, c := range attrs {
		s.write(filepath.Join(dev, f), c)
	}
	s.write(filepath.Join(dev, "dev"), devnum)
	s.link(filepath.Join("block", name), dev)
	s.link(filepath.Join("dev/block", devnum), dev)
}

func (s *sysfs) part(disk, name, devnum string) {
	dev := filepath.Join("devices/virtual/block", disk, name)
	s.write(filepath.Join(dev, "partition"), "1")
	s.write(filepath.Join(dev, "dev"), devnum)
	s.link(filepath.Join("dev/block", devnum), dev)
}

func (s *sysfs) link(rel, target string) {
	p := filepath.Join(s.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(s.root, target), p); err != nil {
		s.t.Fatal(err)
	}
}

func disk(size string) map[string]string {
	return map[string]string{"size": size, "removable": "0", "ro": "0"}
}

func TestScanSys(t *testing.T) {
	s := newSysfs(t)
	s.disk("vda", "253:0", disk("41943040"))
	s.part("vda", "vda3", "253:3")
	s.disk("vdb", "253:16", disk("4194304"))
	s.disk("vdc", "253:32", disk("2097152"))
	s.part("vdc", "vdc1", "253:33")
	s.disk("nvme0n1", "259:0", disk("2097152"))
	s.part("nvme0n1", "nvme0n1p1", "259:1")
	s.write("devices/virtual/block/nvme0n1/holders/dm-1", "")
	s.write("devices/virtual/block/nvme0n1/nvme0n1-extra/x", "") // not a partition: no number
	s.disk("vdd", "253:48", disk("0"))                           // no medium
	s.disk("sr0", "11:0", disk("2048"))
	s.disk("loop0", "7:0", disk("2048"))
	s.disk("dm-0", "252:0", disk("2048"))
	s.disk("vde", "253:64", map[string]string{"size": "2048", "removable": "1", "ro": "0"})
	s.disk("vdf", "253:80", map[string]string{"size": "2048", "removable": "0", "ro": "1"})

	got, err := ScanSys(s.root, "vda")
	if err != nil {
		t.Fatal(err)
	}
	want := []Disk{
		{Name: "nvme0n1", Path: "/dev/nvme0n1", Size: 1 << 30, Partitions: []string{"nvme0n1p1"}, Holders: []string{"dm-1"}},
		{Name: "vdb", Path: "/dev/vdb", Size: 2 << 30},
		{Name: "vdc", Path: "/dev/vdc", Size: 1 << 30, Partitions: []string{"vdc1"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ScanSys =\n%+v\nwant\n%+v", got, want)
	}
	if _, err := ScanSys(filepath.Join(s.root, "missing"), "vda"); err == nil {
		t.Error("ScanSys of a missing /sys: no error")
	}
}

func TestDiskOf(t *testing.T) {
	s := newSysfs(t)
	s.disk("vda", "253:0", disk("41943040"))
	s.part("vda", "vda3", "253:3")
	s.disk("nvme0n1", "259:0", disk("41943040"))
	s.part("nvme0n1", "nvme0n1p3", "259:3")
	// a dm device over a partition of nvme0n1
	s.disk("dm-0", "252:0", disk("2048"))
	s.link("devices/virtual/block/dm-0/slaves/nvme0n1p3", "devices/virtual/block/nvme0n1/nvme0n1p3")
	for dev, want := range map[string]string{"253:3": "vda", "253:0": "vda", "259:3": "nvme0n1", "252:0": "nvme0n1"} {
		got, err := DiskOf(s.root, dev)
		if err != nil || got != want {
			t.Errorf("DiskOf(%s) = %q, %v; want %q", dev, got, err, want)
		}
	}
	if _, err := DiskOf(s.root, "1:1"); err == nil {
		t.Error("DiskOf of an unknown device: no error")
	}
}

func TestMountDevice(t *testing.T) {
	mi := `22 1 252:0 / / ro,relatime shared:1 - erofs /dev/mapper/root ro
25 22 253:3 / /var rw,relatime shared:5 - ext4 /dev/vda3 rw
26 25 253:3 /lib/x /var/lib/x rw,relatime shared:5 - ext4 /dev/vda3 rw
40 25 253:19 / /var rw,relatime shared:6 - ext4 /dev/vdb3 rw
`
	if got, err := MountDevice(mi, "/var"); err != nil || got != "253:19" {
		t.Errorf("MountDevice(/var) = %q, %v; want the last mount, 253:19", got, err)
	}
	if _, err := MountDevice(mi, "/srv"); err == nil {
		t.Error("MountDevice of nothing mounted: no error")
	}
}

func TestParseBlkid(t *testing.T) {
	for _, tc := range []struct {
		out  string
		want Probe
	}{
		{"", Probe{}},
		{"DEVNAME=/dev/vdb\nUUID=1b2c-3d\nVERSION=1.0\nBLOCK_SIZE=4096\nTYPE=ext4\nUSAGE=filesystem\n",
			Probe{Found: true, Type: "ext4", UUID: "1b2c-3d"}},
		{"DEVNAME=/dev/vdc\nPTUUID=5a0e\nPTTYPE=gpt\n", Probe{Found: true, PTType: "gpt"}},
		{"DEVNAME=/dev/vdd\nPTUUID=5a0e\n", Probe{Found: true}},
		// util-linux 2.41 on an image cache disk (fsck.erofs-made images
		// probe the same).
		{"DEVNAME=/dev/vde\nLABEL=drover-images\nUUID=0f0f0f0f-0000-4000-8000-000000000000\nBLOCK_SIZE=4096\nTYPE=erofs\nUSAGE=filesystem\n",
			Probe{Found: true, Type: "erofs", UUID: "0f0f0f0f-0000-4000-8000-000000000000", Label: "drover-images"}},
	} {
		if got := ParseBlkid(tc.out); got != tc.want {
			t.Errorf("ParseBlkid(%q) = %+v, want %+v", tc.out, got, tc.want)
		}
	}
}

func TestRecord(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lib/drover/data-disk.json")
	if r, err := ReadRecord(p); r != nil || err != nil {
		t.Fatalf("no record: %v, %v", r, err)
	}
	for _, want := range []Record{{UUID: ours, State: StateFormatting}, {UUID: ours, State: StateReady}, {State: StateSystem}} {
		if err := WriteRecord(p, want); err != nil {
			t.Fatal(err)
		}
		got, err := ReadRecord(p)
		if err != nil || *got != want {
			t.Errorf("ReadRecord = %+v, %v; want %+v", got, err, want)
		}
	}
	for _, bad := range []string{`{"state":"ready"}`, `{"uuid":"x","state":"done"}`, `not json`} {
		if err := os.WriteFile(p, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if r, err := ReadRecord(p); err == nil {
			t.Errorf("ReadRecord(%s) = %+v, want an error", bad, r)
		}
	}
}

func TestMountUnits(t *testing.T) {
	units := MountUnits("/dev/nvme1n1", ours)
	var names []string
	for _, u := range units {
		names = append(names, u.Name)
	}
	want := []string{`var-lib-drover\x2ddata.mount`, "var-lib-containerd.mount", "var-lib-kubelet-pods.mount"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("names %q, want %q", names, want)
	}
	for _, s := range []string{"What=/dev/nvme1n1\n", "Where=/var/lib/drover-data\n", "Type=ext4\n", "Before=containerd.service kubelet.service\n", ours} {
		if !strings.Contains(string(units[0].Data), s) {
			t.Errorf("%s lacks %q:\n%s", units[0].Name, s, units[0].Data)
		}
	}
	for _, s := range []string{"What=/var/lib/drover-data/containerd\n", "Where=/var/lib/containerd\n", "Options=bind\n",
		`Requires=var-lib-drover\x2ddata.mount` + "\n", `After=var-lib-drover\x2ddata.mount` + "\n", "Before=containerd.service kubelet.service\n"} {
		if !strings.Contains(string(units[1].Data), s) {
			t.Errorf("%s lacks %q:\n%s", units[1].Name, s, units[1].Data)
		}
	}
	if !strings.Contains(string(units[2].Data), "What=/var/lib/drover-data/kubelet-pods\nWhere=/var/lib/kubelet/pods\n") {
		t.Errorf("%s:\n%s", units[2].Name, units[2].Data)
	}
}

func TestFake(t *testing.T) {
	f := &Fake{List: []Disk{empty1}}
	if err := f.Format("/dev/vdb", ours); err != nil {
		t.Fatal(err)
	}
	d, _ := f.Disks()
	if d[0].Probe.UUID != ours || f.Formatted[0] != "/dev/vdb "+ours {
		t.Errorf("after Format: %+v, %q", d[0], f.Formatted)
	}
	if err := f.Format("/dev/vdz", ours); err == nil {
		t.Error("Format of a missing disk: no error")
	}
}
