package smoke

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/drover-os/drover/harness/cluster"
)

const dataUUID = "6331b58c-1354-4a43-8c6c-268efb49f88c"

func goodStorage() *StorageReport {
	return &StorageReport{Mounts: []StorageMount{
		{Path: "/var/lib/containerd", Source: "/dev/vdb", Dev: "253:16", Root: "/containerd", FSType: "ext4", UUID: dataUUID, Used: 300 << 20, Size: 2 << 30},
		{Path: "/var/lib/kubelet/pods", Source: "/dev/vdb", Dev: "253:16", Root: "/kubelet-pods", FSType: "ext4", UUID: dataUUID},
		{Path: "/var", Source: "/dev/vda4", Dev: "253:4", Root: "/", FSType: "ext4", UUID: "f74e"},
	}}
}

func TestJudgeContainerStorage(t *testing.T) {
	uuid, dev, err := JudgeContainerStorage(goodStorage())
	if err != nil || uuid != dataUUID || dev != "/dev/vdb" {
		t.Fatalf("good report: %q %q %v", uuid, dev, err)
	}
	for name, bad := range map[string]func(s *StorageReport){
		"no report": func(s *StorageReport) { s.Error = "open /proc/1/mountinfo: denied" },
		// the agent skipped the mount: containerd's directory is /var's
		"on the system disk": func(s *StorageReport) {
			s.Mounts[0] = StorageMount{Path: "/var/lib/containerd", Error: "not a mount point"}
		},
		"bound from /var": func(s *StorageReport) {
			s.Mounts[0].Source, s.Mounts[0].Dev = "/dev/vda4", "253:4"
		},
		"the filesystem's root, not containerd": func(s *StorageReport) { s.Mounts[0].Root = "/" },
		"not ext4":                              func(s *StorageReport) { s.Mounts[0].FSType = "xfs" },
		"no UUID":                               func(s *StorageReport) { s.Mounts[0].UUID = "" },
		"nothing pulled onto it":                func(s *StorageReport) { s.Mounts[0].Used = 100 << 10 },
		"pods not bound": func(s *StorageReport) {
			s.Mounts[1] = StorageMount{Path: "/var/lib/kubelet/pods", Error: "not a mount point"}
		},
		"pods on another device":        func(s *StorageReport) { s.Mounts[1].Dev = "253:32" },
		"pods from the wrong directory": func(s *StorageReport) { s.Mounts[1].Root = "/containerd" },
		"pods not reported":             func(s *StorageReport) { s.Mounts = s.Mounts[:1] },
	} {
		s := goodStorage()
		bad(s)
		if _, _, err := JudgeContainerStorage(s); err == nil {
			t.Errorf("%s: passed", name)
		}
	}
	if _, _, err := JudgeContainerStorage(nil); err == nil {
		t.Error("nil report: passed")
	}
}

const debugfsLS = ` 1572865   40711 (2)      0      0    4096 02-Dec-2026 22:13 .
      2   40755 (2)      0      0    4096 02-Dec-2026 22:13 ..
 1572866   40700 (2)      0      0    4096 02-Dec-2026 22:14 io.containerd.content.v1.content
 1572870   40700 (2)      0      0    4096 02-Dec-2026 22:14 io.containerd.snapshotter.v1.overlayfs
`

func TestJudgeDataDiskAfter(t *testing.T) {
	good := map[string]string{"TYPE": "ext4", "UUID": dataUUID}
	if err := JudgeDataDiskAfter(good, dataUUID, debugfsLS); err != nil {
		t.Fatalf("good disk: %v", err)
	}
	for name, tc := range map[string]struct {
		blkid map[string]string
		uuid  string
		ls    string
	}{
		"still empty": {map[string]string{}, dataUUID, debugfsLS},
		"another filesystem (formatted the wrong disk)": {map[string]string{"TYPE": "ext4", "UUID": "cee7"}, dataUUID, debugfsLS},
		"no UUID from the node":                         {good, "", debugfsLS},
		"not ext4":                                      {map[string]string{"TYPE": "xfs", "UUID": dataUUID}, dataUUID, debugfsLS},
		"no containerd directories":                     {good, dataUUID, "/containerd: File not found by ext2_lookup"},
		"content but no snapshots":                      {good, dataUUID, strings.Split(debugfsLS, "io.containerd.snapshotter")[0]},
	} {
		if err := JudgeDataDiskAfter(tc.blkid, tc.uuid, tc.ls); err == nil {
			t.Errorf("%s: passed", name)
		}
	}
	if got := dirNames(debugfsLS); got != "io.containerd.content.v1.content io.containerd.snapshotter.v1.overlayfs" {
		t.Errorf("dirNames = %q", got)
	}
}

func TestJudgeUntouched(t *testing.T) {
	ev := cluster.Event{Type: "Warning", Reason: storageEventReason, Source: "drover-agent", InvolvedKind: "Node", InvolvedName: "n",
		Message: "/dev/vdc holds ext4 (UUID cee7): never touched; container storage is on /dev/vdb. drover never writes to a disk that holds anything"}
	const sum = "3b0c4e2f9a1d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f"
	for _, dev := range []string{"/dev/vdc", ""} {
		if d, err := JudgeUntouched(sum, sum, dev, "cee7", []cluster.Event{ev}); err != nil || !strings.Contains(d, "unchanged") {
			t.Fatalf("good (%q): %q %v", dev, d, err)
		}
	}
	otherDisk := ev
	otherDisk.Message = strings.Replace(ev.Message, "cee7", "ea77", 1)
	other := ev
	other.Reason = "OOMKilling"
	normal := ev
	normal.Type = "Normal"
	for name, tc := range map[string]struct {
		after, device string
		evs           []cluster.Event
	}{
		"written":                {"0" + sum[1:], "/dev/vdc", []cluster.Event{ev}},
		"no event":               {sum, "/dev/vdc", nil},
		"another reason":         {sum, "/dev/vdc", []cluster.Event{other}},
		"not a warning":          {sum, "/dev/vdc", []cluster.Event{normal}},
		"names another disk":     {sum, "/dev/vdb", []cluster.Event{ev}},
		"another UUID, any name": {sum, "", []cluster.Event{otherDisk}},
	} {
		if _, err := JudgeUntouched(sum, tc.after, tc.device, "cee7", tc.evs); err == nil {
			t.Errorf("%s: passed", name)
		}
	}
}

func TestJudgeSameStorage(t *testing.T) {
	moved := goodStorage()
	moved.Mounts[0].Source, moved.Mounts[1].Source = "/dev/nvme2n1", "/dev/nvme2n1"
	if d, err := JudgeSameStorage(moved, dataUUID); err != nil || !strings.Contains(d, "/dev/nvme2n1") {
		t.Fatalf("same UUID under another name: %q %v", d, err)
	}
	// a later boot that formatted again, or took the other disk
	other := goodStorage()
	other.Mounts[0].UUID = "ea77a723-267a-4cf9-a909-9eb7e5dca6ad"
	if _, err := JudgeSameStorage(other, dataUUID); err == nil {
		t.Error("another filesystem after the reboot: passed")
	}
	if _, err := JudgeSameStorage(goodStorage(), ""); err == nil {
		t.Error("no UUID from the first boot: passed")
	}
	system := goodStorage()
	system.Mounts[0] = StorageMount{Path: "/var/lib/containerd", Error: "not a mount point"}
	if _, err := JudgeSameStorage(system, dataUUID); err == nil {
		t.Error("back on the system disk: passed")
	}
}

func TestFirstBootName(t *testing.T) {
	for _, tc := range []struct {
		i    int
		nvme bool
		want string
	}{{0, false, "/dev/vdb"}, {1, false, "/dev/vdc"}, {0, true, ""}, {1, true, ""}} {
		if got := firstBootName(tc.i, tc.nvme); got != tc.want {
			t.Errorf("firstBootName(%d, %v) = %s, want %s", tc.i, tc.nvme, got, tc.want)
		}
	}
}

// TestPrepareDataDisks makes the disks with the real tools: an empty file
// blkid finds nothing on, and an ext4 whose UUID and digest are recorded.
func TestPrepareDataDisks(t *testing.T) {
	for _, tool := range []string{"mkfs.ext4", "blkid"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	ctx := context.Background()
	d, err := prepareDataDisks(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if m, err := blkidExport(ctx, d.Empty); err != nil || len(m) != 0 {
		t.Errorf("the empty disk: %v %v", m, err)
	}
	if m, err := blkidExport(ctx, d.Full); err != nil || m["TYPE"] != "ext4" || m["UUID"] != d.FullUUID {
		t.Errorf("the full disk: %v %v, want ext4 %s", m, err, d.FullUUID)
	}
	if sum, _ := fileSHA256(d.Full); sum != d.FullSHA256 || len(sum) != 64 {
		t.Errorf("sha256 %s, recorded %s", sum, d.FullSHA256)
	}
	if !slices.Equal(d.order(false), []string{d.Empty, d.Full}) || !slices.Equal(d.order(true), []string{d.Full, d.Empty}) {
		t.Errorf("order: %q %q", d.order(false), d.order(true))
	}
}
