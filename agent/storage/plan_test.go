package storage

import (
	"strings"
	"testing"

	"github.com/drover-os/drover/agent/nodeconfig"
)

const (
	ours  = "3f1e1c5a-4b7e-4f0e-9d0a-0c1d2e3f4a5b"
	fresh = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
)

var (
	empty1  = Disk{Name: "vdb", Path: "/dev/vdb", Size: 2 << 30}
	empty2  = Disk{Name: "vdc", Path: "/dev/vdc", Size: 2 << 30}
	ext4    = Disk{Name: "vdd", Path: "/dev/vdd", Size: 1 << 30, Probe: Probe{Found: true, Type: "ext4", UUID: "1111-2222"}}
	gpt     = Disk{Name: "vde", Path: "/dev/vde", Size: 1 << 30, Probe: Probe{Found: true, PTType: "gpt"}}
	parts   = Disk{Name: "nvme2n1", Path: "/dev/nvme2n1", Size: 1 << 30, Partitions: []string{"nvme2n1p1"}}
	held    = Disk{Name: "vdf", Path: "/dev/vdf", Size: 1 << 30, Holders: []string{"dm-3"}}
	unknown = Disk{Name: "vdg", Path: "/dev/vdg", Size: 1 << 30, Probe: Probe{Err: "blkid -p /dev/vdg: exit status 8"}}
	odd     = Disk{Name: "vdh", Path: "/dev/vdh", Size: 1 << 30, Probe: Probe{Found: true}}
	mine    = Disk{Name: "nvme1n1", Path: "/dev/nvme1n1", Size: 2 << 30, Probe: Probe{Found: true, Type: "ext4", UUID: ours}}
	cache   = Disk{Name: "vdi", Path: "/dev/vdi", Size: 1 << 30, Probe: Probe{Found: true, Type: "erofs", UUID: "0f0f0f0f-0000-4000-8000-000000000000", Label: nodeconfig.ImageCacheLabel}}
	torn    = Disk{Name: "vdb", Path: "/dev/vdb", Size: 2 << 30, Probe: Probe{Found: true, Type: "ext4", UUID: ours}}
)

func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mode   string
		disks  []Disk
		rec    *Record
		use    string // "" for the system disk
		format bool
		uuid   string
		record *Record
		refuse string   // a part of the refusal
		why    string   // a part of Why
		unused []string // each disk's why, in order
	}{
		{name: "no data disk", mode: "auto", why: "the instance has no data disk", record: &Record{State: StateSystem}},
		{name: "one empty disk", mode: "auto", disks: []Disk{empty1}, use: "/dev/vdb", format: true, uuid: fresh,
			record: &Record{UUID: fresh, State: StateFormatting}},
		{name: "one empty disk beside one with data", mode: "auto", disks: []Disk{empty1, ext4}, use: "/dev/vdb", format: true, uuid: fresh,
			record: &Record{UUID: fresh, State: StateFormatting}, unused: []string{"/dev/vdd holds ext4 (UUID 1111-2222): never touched"}},
		{name: "only disks holding something", mode: "auto", disks: []Disk{ext4, gpt, parts, held, unknown, odd}, why: "no data disk is empty",
			record: &Record{State: StateSystem}, unused: []string{
				"/dev/vdd holds ext4 (UUID 1111-2222): never touched",
				"/dev/vde has a partition table (gpt): never touched",
				"/dev/nvme2n1 has partitions (nvme2n1p1): never touched",
				"/dev/vdf is in use by dm-3: never touched",
				"/dev/vdg could not be probed (blkid -p /dev/vdg: exit status 8): never touched",
				"/dev/vdh holds something blkid names no type for: never touched",
			}},
		// The image cache disk is the agent's to import from: neither
		// storage nor a disk to warn about.
		{name: "one empty disk beside the image cache disk", mode: "auto", disks: []Disk{cache, empty1}, use: "/dev/vdb", format: true, uuid: fresh,
			record: &Record{UUID: fresh, State: StateFormatting}},
		{name: "the image cache disk alone", mode: "auto", disks: []Disk{cache}, why: "the instance has no data disk", record: &Record{State: StateSystem}},
		{name: "two empty disks", mode: "auto", disks: []Disk{empty1, empty2}, why: "2 empty data disks (/dev/vdb /dev/vdc): which one is meant is not clear",
			record: &Record{State: StateSystem}, unused: []string{
				"/dev/vdb is empty, but so is another data disk: which one is meant is not clear; attach exactly one empty data disk",
				"/dev/vdc is empty, but so is another data disk: which one is meant is not clear; attach exactly one empty data disk",
			}},
		{name: "required, one empty disk", mode: "required", disks: []Disk{empty1}, use: "/dev/vdb", format: true, uuid: fresh,
			record: &Record{UUID: fresh, State: StateFormatting}},
		{name: "required, no empty disk", mode: "required", disks: []Disk{ext4},
			refuse: "storage: required, but no data disk is empty; attach exactly one empty, unpartitioned data disk and replace the instance",
			unused: []string{"/dev/vdd holds ext4 (UUID 1111-2222): never touched"}},
		{name: "required, two empty disks", mode: "required", disks: []Disk{empty1, empty2},
			refuse: "storage: required, but 2 empty data disks", unused: []string{
				"/dev/vdb is empty, but so is another data disk: which one is meant is not clear; attach exactly one empty data disk",
				"/dev/vdc is empty, but so is another data disk: which one is meant is not clear; attach exactly one empty data disk",
			}},
		{name: "required, no disk", mode: "required", refuse: "storage: required, but the instance has no data disk"},
		{name: "system", mode: "system", disks: []Disk{empty1}, why: "the node file says storage: system"},
		{name: "ready, by UUID under another name", mode: "auto", disks: []Disk{empty2, mine}, rec: &Record{UUID: ours, State: StateReady},
			use: "/dev/nvme1n1", uuid: ours, unused: []string{"/dev/vdc is empty and not used"}},
		{name: "ready, UUID in upper case", mode: "auto", disks: []Disk{mine}, rec: &Record{UUID: strings.ToUpper(ours), State: StateReady},
			use: "/dev/nvme1n1", uuid: strings.ToUpper(ours)},
		{name: "ready, disk gone", mode: "auto", disks: []Disk{empty1}, rec: &Record{UUID: ours, State: StateReady},
			refuse: "(ext4 UUID " + ours + ", recorded at its first boot) is not attached", unused: []string{"/dev/vdb is empty and not used"}},
		{name: "formatting interrupted after mkfs wrote the UUID", mode: "auto", disks: []Disk{torn, empty2}, rec: &Record{UUID: ours, State: StateFormatting},
			use: "/dev/vdb", format: true, uuid: ours, record: &Record{UUID: ours, State: StateFormatting}, unused: []string{"/dev/vdc is empty and not used"}},
		{name: "formatting interrupted before mkfs wrote anything", mode: "auto", disks: []Disk{empty1}, rec: &Record{UUID: ours, State: StateFormatting},
			use: "/dev/vdb", format: true, uuid: ours, record: &Record{UUID: ours, State: StateFormatting}},
		{name: "formatting interrupted, then two empty disks", mode: "auto", disks: []Disk{empty1, empty2}, rec: &Record{UUID: ours, State: StateFormatting},
			why: "2 empty data disks", record: &Record{State: StateSystem}, unused: []string{
				"/dev/vdb is empty, but so is another data disk: which one is meant is not clear; attach exactly one empty data disk",
				"/dev/vdc is empty, but so is another data disk: which one is meant is not clear; attach exactly one empty data disk",
			}},
		{name: "first boot stayed on the system disk", mode: "auto", disks: []Disk{empty1}, rec: &Record{State: StateSystem},
			why: "a disk attached since is not used", unused: []string{"/dev/vdb is empty and not used"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			disks := append([]Disk(nil), tc.disks...)
			d := Plan(tc.mode, disks, tc.rec, fresh)
			switch {
			case tc.use == "" && d.Use != nil:
				t.Errorf("uses %s, want the system disk", d.Use.Path)
			case tc.use != "" && (d.Use == nil || d.Use.Path != tc.use):
				t.Errorf("uses %v, want %s", d.Use, tc.use)
			}
			if d.Format != tc.format || d.UUID != tc.uuid {
				t.Errorf("format %v uuid %q, want %v %q", d.Format, d.UUID, tc.format, tc.uuid)
			}
			if (d.Record == nil) != (tc.record == nil) || d.Record != nil && *d.Record != *tc.record {
				t.Errorf("record %+v, want %+v", d.Record, tc.record)
			}
			if tc.refuse == "" && d.Refuse != "" || !strings.Contains(d.Refuse, tc.refuse) {
				t.Errorf("refuse %q, want %q", d.Refuse, tc.refuse)
			}
			if tc.refuse != "" && d.Record != nil {
				t.Errorf("a refusal records %+v", d.Record)
			}
			if !strings.Contains(d.Why, tc.why) || tc.why == "" && d.Why != "" && tc.refuse == "" {
				t.Errorf("why %q, want %q", d.Why, tc.why)
			}
			var got []string
			for _, u := range d.Unused {
				got = append(got, u.Why)
			}
			if strings.Join(got, "\n") != strings.Join(tc.unused, "\n") {
				t.Errorf("unused:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.unused, "\n"))
			}
		})
	}
}

func TestDecisionString(t *testing.T) {
	for _, tc := range []struct {
		d    Decision
		want string
	}{
		{Plan(nodeconfig.StorageAuto, []Disk{empty1, ext4}, nil, fresh),
			"container storage on /dev/vdb (2.0 GiB), formatted ext4 UUID " + fresh + "; /dev/vdd holds ext4 (UUID 1111-2222): never touched"},
		{Plan(nodeconfig.StorageAuto, []Disk{mine}, &Record{UUID: ours, State: StateReady}, fresh),
			"container storage on /dev/nvme1n1 (2.0 GiB), ext4 UUID " + ours},
		{Plan(nodeconfig.StorageAuto, []Disk{{Name: "vdb", Path: "/dev/vdb", Size: 512 << 20, Probe: Probe{Found: true, PTType: "dos"}}}, nil, fresh),
			"container storage on the system disk: no data disk is empty; /dev/vdb has a partition table (dos): never touched"},
		{Plan(nodeconfig.StorageRequired, nil, nil, fresh),
			"refused: storage: required, but the instance has no data disk; attach exactly one empty, unpartitioned data disk and replace the instance"},
	} {
		if got := tc.d.String(); got != tc.want {
			t.Errorf("String() =\n %s\nwant\n %s", got, tc.want)
		}
	}
}

func TestHoldsData(t *testing.T) {
	if HoldsData(empty1) || !HoldsData(ext4) || !HoldsData(held) {
		t.Error("HoldsData: empty1 false, ext4 and held true")
	}
}
