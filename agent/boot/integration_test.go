//go:build integration

package boot

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/image/verity"
)

// tool returns the path of a host tool or fails naming its Debian package.
func tool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found: apt-get install %s", name, pkg)
	}
	return p
}

// TestGrownGPTSfdisk checks the grown table with sfdisk, an independent
// GPT implementation.
func TestGrownGPTSfdisk(t *testing.T) {
	sfdisk := tool(t, "sfdisk", "fdisk")
	const diskSize = 256 << 20
	path := writeImage(t, diskSize)
	plan := growFile(t, path)

	out, err := exec.Command(sfdisk, "--verify", path).CombinedOutput()
	t.Logf("sfdisk --verify:\n%s", out)
	if err != nil || !strings.Contains(string(out), "No errors detected") {
		t.Errorf("sfdisk --verify: %v", err)
	}
	out, err = exec.Command(sfdisk, "--json", path).Output()
	if err != nil {
		t.Fatalf("sfdisk --json: %v", err)
	}
	var dump struct {
		PartitionTable struct {
			Label      string `json:"label"`
			ID         string `json:"id"`
			FirstLBA   uint64 `json:"firstlba"`
			LastLBA    uint64 `json:"lastlba"`
			Partitions []struct {
				Node  string `json:"node"`
				Start uint64 `json:"start"`
				Size  uint64 `json:"size"`
				Type  string `json:"type"`
				UUID  string `json:"uuid"`
				Name  string `json:"name"`
			} `json:"partitions"`
		} `json:"partitiontable"`
	}
	if err := json.Unmarshal(out, &dump); err != nil {
		t.Fatalf("sfdisk --json output: %v\n%s", err, out)
	}
	pt := dump.PartitionTable
	if pt.Label != "gpt" || pt.LastLBA != diskSize/512-34 || len(pt.Partitions) != 4 || !strings.EqualFold(pt.ID, testDiskGUID) {
		t.Fatalf("sfdisk sees %+v", pt)
	}
	v := pt.Partitions[3]
	if !strings.EqualFold(v.Type, VarPartTypeX86_64) || v.Name != "var" || v.Start != plan.Partition.FirstLBA ||
		v.Start+v.Size-1 != pt.LastLBA || !strings.EqualFold(v.UUID, verity.FormatGUID(plan.Partition.UUID)) {
		t.Errorf("sfdisk sees the var partition as %+v, plan %s", v, plan)
	}
	t.Logf("sfdisk: var partition %s start %d size %d sectors, last usable LBA %d", v.UUID, v.Start, v.Size, pt.LastLBA)
}

// loopDevice attaches path with partition scanning and returns the node.
func loopDevice(t *testing.T, path string) string {
	t.Helper()
	losetup := tool(t, "losetup", "mount")
	out, err := exec.Command(losetup, "--find", "--show", "-P", path).CombinedOutput()
	if err != nil {
		t.Fatalf("losetup --find --show -P %s: %v: %s", path, err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command(losetup, "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v: %s", dev, err, out)
		}
	})
	return dev
}

// TestVarPartitionOnLoop grows the GPT of a loop device whose root
// partition is held open, as the verity device holds it at boot, and checks
// that the kernel gets the new partition (BLKRRPART is refused, BLKPG adds
// it) with the planned size.
func TestVarPartitionOnLoop(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for loop devices")
	}
	const diskSize = 256 << 20
	path := writeImage(t, diskSize)
	node := loopDevice(t, path)
	name := filepath.Base(node)
	const sysBlock = "/sys/class/block"

	disk, err := os.OpenFile(node, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer disk.Close()
	// The kernel may lack a GPT parser (CONFIG_EFI_PARTITION): then add the
	// image's partitions the way the disk driver's scan would have.
	img, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := readGPT(img, 512)
	img.Close()
	if err != nil {
		t.Fatal(err)
	}
	devs, err := ScanBlockDevices(sysBlock)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range tbl.parts {
		if _, ok := FindPartition(devs, name, p.Number); ok {
			continue
		}
		start, size := int64(p.FirstLBA)*512, int64(p.LastLBA-p.FirstLBA+1)*512
		if err := AddPartition(disk, p.Number, start, size); err != nil {
			t.Fatal(err)
		}
		t.Logf("image partition %d added with BLKPG (the kernel did not parse the GPT)", p.Number)
	}
	var rootPart BlockDevice
	deadline := time.Now().Add(10 * time.Second)
	for {
		devs, err := ScanBlockDevices(sysBlock)
		if err != nil {
			t.Fatal(err)
		}
		var ok bool
		if rootPart, ok = FindPartition(devs, name, 2); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no partition 2 on %s: %s", name, DescribeDevices(devs))
		}
		time.Sleep(50 * time.Millisecond)
	}
	rootNode, err := ensureNode("/dev", rootPart)
	if err != nil {
		t.Fatal(err)
	}
	busy, err := os.OpenFile(rootNode, os.O_RDONLY|0x80 /* O_EXCL: claim it as a mount or dm table does */, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()

	var logBuf strings.Builder
	log := NewLog(time.Now())
	log.AttachWriter(&logBuf)
	log.SetDebug(true)
	typ, _ := ParseGUID(VarPartTypeX86_64)
	varNode, summary, err := EnsureVarPartition(node, sysBlock, "/dev", name, VarSpec{Type: typ, Name: "var"}, log)
	t.Logf("%s\n%s", summary, logBuf.String())
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(varNode)
	if err != nil || fi.Mode()&os.ModeDevice == 0 {
		t.Fatalf("var node %s: %v %v", varNode, fi, err)
	}
	f, err := os.Open(varNode)
	if err != nil {
		t.Fatal(err)
	}
	size, _, err := DiskGeometry(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	wantFirst := uint64(81920)
	wantSize := int64(diskSize/512-34-wantFirst+1) * 512
	if size != wantSize {
		t.Errorf("%s is %d bytes, want %d", varNode, size, wantSize)
	}
	t.Logf("%s: %d bytes (%d MiB)", varNode, size, size>>20)

	// A second boot finds the partition the kernel already has.
	_, summary, err = EnsureVarPartition(node, sysBlock, "/dev", name, VarSpec{Type: typ, Name: "var"}, log)
	if err != nil || !strings.Contains(summary, "exists") || !strings.Contains(summary, "already known") {
		t.Errorf("second run: %q, %v", summary, err)
	}
	checkGPT(t, path)
}
