package boot

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/diskfs/go-diskfs/backend"
	"github.com/diskfs/go-diskfs/partition/gpt"
)

const (
	testDiskGUID  = "8a3c5e22-6b1d-4f0e-9c47-2d1b3a5f7e90"
	testRootType  = gpt.Type("4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709")
	testVerityTyp = gpt.Type("2C7357ED-EBD2-46D9-AEC1-23D437EC2BF5")
	imageSize     = 64 << 20
)

func testVarSpec(t *testing.T) VarSpec {
	t.Helper()
	typ, err := ParseGUID(VarPartTypeX86_64)
	if err != nil {
		t.Fatal(err)
	}
	return VarSpec{Type: typ, Name: "var", MinBytes: 16 << 20}
}

// writeImage writes a drover-like disk image (esp, root, root-verity) of
// imageSize bytes with go-diskfs, then grows the file to diskSize, as an
// ECS system disk larger than the image looks.
func writeImage(t *testing.T, diskSize int64) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "disk.raw")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(imageSize); err != nil {
		t.Fatal(err)
	}
	table := &gpt.Table{
		LogicalSectorSize:  512,
		PhysicalSectorSize: 512,
		ProtectiveMBR:      true,
		GUID:               testDiskGUID,
		Partitions: []*gpt.Partition{
			{Index: 1, Start: 2048, End: 2048 + 16384 - 1, Type: gpt.EFISystemPartition, Name: "esp", GUID: "11111111-2222-4333-8444-555555555555"},
			{Index: 2, Start: 18432, End: 18432 + 61440 - 1, Type: testRootType, Name: "root", GUID: "5c8d1e8b-2bd0-a5e0-e2f2-f7c6a0f3a6a4"},
			{Index: 3, Start: 79872, End: 79872 + 2048 - 1, Type: testVerityTyp, Name: "root-verity", GUID: "b2d7f0c1-e3b5-a7c9-d1f3-e5a7b9c1d3e5"},
		},
	}
	if err := table.Write(f, imageSize); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(diskSize); err != nil {
		t.Fatal(err)
	}
	return path
}

func growFile(t *testing.T, path string) *VarPlan {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size, ss, err := DiskGeometry(f)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := PlanVarPartition(f, size, ss, testVarSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := ApplyWrites(f, plan.Writes); err != nil {
		t.Fatal(err)
	}
	return plan
}

// checkGPT checks both headers and entry arrays of the disk image at path,
// whose backup must sit on its last sector, and returns the primary table.
func checkGPT(t *testing.T, path string) *gptTable {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return checkGPTFile(t, f)
}

// memFile is an in-memory disk image go-diskfs can read.
type memFile struct{ *bytes.Reader }

func (m memFile) Stat() (fs.FileInfo, error) { return memInfo(m.Size()), nil }
func (m memFile) Close() error               { return nil }

type memInfo int64

func (memInfo) Name() string       { return "disk" }
func (i memInfo) Size() int64      { return int64(i) }
func (memInfo) Mode() fs.FileMode  { return 0o644 }
func (memInfo) ModTime() time.Time { return time.Time{} }
func (memInfo) IsDir() bool        { return false }
func (memInfo) Sys() any           { return nil }

func checkGPTFile(t *testing.T, f backend.File) *gptTable {
	t.Helper()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	read := func(off int64, n int) []byte {
		b := make([]byte, n)
		if _, err := f.ReadAt(b, off); err != nil {
			t.Fatalf("reading %d bytes at %d: %v", n, off, err)
		}
		return b
	}
	last := uint64(fi.Size()/512) - 1
	p, err := readGPT(f, 512)
	if err != nil {
		t.Fatalf("primary GPT: %v", err)
	}
	if p.header.alternateLBA != last {
		t.Errorf("primary alternate LBA = %d, want the last sector %d", p.header.alternateLBA, last)
	}
	bh, err := parseGPTHeader(read(int64(last)*512, 512))
	if err != nil {
		t.Fatalf("backup GPT header at LBA %d: %v", last, err)
	}
	if bh.myLBA != last || bh.alternateLBA != 1 || bh.firstUsable != p.header.firstUsable || bh.lastUsable != p.header.lastUsable || bh.diskGUID != p.header.diskGUID {
		t.Errorf("backup header %+v does not mirror primary %+v", bh, p.header)
	}
	entries := read(int64(bh.entriesLBA)*512, int(bh.numEntries*bh.entrySize))
	if crc32.ChecksumIEEE(entries) != bh.entriesCRC || bh.entriesCRC != p.header.entriesCRC {
		t.Errorf("backup entry CRC %08x, stored %08x, primary %08x", crc32.ChecksumIEEE(entries), bh.entriesCRC, p.header.entriesCRC)
	}
	if bh.entriesLBA+uint64(len(entries)/512) != last || p.header.lastUsable != bh.entriesLBA-1 {
		t.Errorf("backup entries at LBA %d, last usable %d: not packed against the backup header", bh.entriesLBA, p.header.lastUsable)
	}
	// go-diskfs, an independent reader, must accept the result too.
	dt, err := gpt.Read(f, 512, 512)
	if err != nil {
		t.Fatalf("go-diskfs cannot read the grown table: %v", err)
	}
	if dt.RecoveredFromBackup {
		t.Error("go-diskfs had to use the backup table")
	}
	if err := dt.Verify(f, uint64(fi.Size())); err != nil {
		t.Errorf("go-diskfs verify: %v", err)
	}
	return p
}

func TestGrowLargerDisk(t *testing.T) {
	const diskSize = 256 << 20
	path := writeImage(t, diskSize)
	plan := growFile(t, path)
	if !plan.Created || plan.OldBackupLBA != imageSize/512-1 || plan.NewBackupLBA != diskSize/512-1 {
		t.Fatalf("plan = %s", plan)
	}
	tbl := checkGPT(t, path)
	if len(tbl.parts) != 4 {
		t.Fatalf("partitions after grow: %+v", tbl.parts)
	}
	v := tbl.parts[3]
	if v.Number != 4 || v.Name != "var" || v.Type != testVarSpec(t).Type || v.UUID != VarPartitionUUID(tbl.header.diskGUID) {
		t.Errorf("var partition = %+v", v)
	}
	// The root/verity partitions end at LBA 81919: var starts at the next
	// MiB boundary and runs to the last usable LBA.
	if v.FirstLBA != 81920 || v.LastLBA != tbl.header.lastUsable || v.LastLBA != diskSize/512-34 {
		t.Errorf("var spans LBA %d..%d, want 81920..%d", v.FirstLBA, v.LastLBA, diskSize/512-34)
	}
	if plan.Start() != 81920*512 || plan.Size() != int64(v.LastLBA-v.FirstLBA+1)*512 {
		t.Errorf("plan start %d size %d", plan.Start(), plan.Size())
	}
	// The stale backup header in the middle is gone.
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 512)
	if _, err := f.ReadAt(b, imageSize-512); err != nil || string(b[:8]) == gptSignature {
		t.Errorf("old backup GPT header still present (%v)", err)
	}
	// The protective MBR covers the whole disk again.
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	if got := binary.LittleEndian.Uint32(b[446+12:]); got != diskSize/512-1 {
		t.Errorf("protective MBR size = %d sectors, want %d", got, diskSize/512-1)
	}
	// The existing entries are untouched.
	if tbl.parts[1].Name != "root" || tbl.parts[1].FirstLBA != 18432 || tbl.parts[2].LastLBA != 81919 {
		t.Errorf("existing partitions changed: %+v", tbl.parts[:3])
	}
	if !strings.Contains(plan.String(), "move the backup GPT") {
		t.Errorf("plan string %q does not mention the backup move", plan)
	}
}

func TestGrowIsIdempotent(t *testing.T) {
	path := writeImage(t, 256<<20)
	first := growFile(t, path)
	again := growFile(t, path)
	if again.Created || len(again.Writes) != 0 || again.Partition != first.Partition {
		t.Errorf("second plan = %s with %d writes, want the existing partition %+v", again, len(again.Writes), first.Partition)
	}
}

// TestGrowInterrupted applies every prefix of the writes (a power cut
// after each) and checks that the disk still has a valid primary table and
// that planning again yields the same partition.
func TestGrowInterrupted(t *testing.T) {
	path := writeImage(t, imageSize+32<<20)
	pristine, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	full := growFile(t, path)
	for n := 0; n < len(full.Writes); n++ {
		disk := append([]byte(nil), pristine...)
		w := &memDisk{b: disk}
		if err := ApplyWrites(w, full.Writes[:n]); err != nil {
			t.Fatal(err)
		}
		p, err := PlanVarPartition(bytes.NewReader(disk), int64(len(disk)), 512, testVarSpec(t))
		if err != nil {
			t.Fatalf("after %d writes: %v", n, err)
		}
		if p.Partition != full.Partition {
			t.Errorf("after %d writes: plan %s, want %+v", n, p, full.Partition)
		}
		// Finishing with the new plan leaves a complete, valid table.
		if err := ApplyWrites(w, p.Writes); err != nil {
			t.Fatal(err)
		}
		if tbl := checkGPTFile(t, memFile{bytes.NewReader(disk)}); len(tbl.parts) != 4 {
			t.Errorf("after %d writes and a resumed plan (%s): partitions %+v", n, p, tbl.parts)
		}
	}
}

type memDisk struct{ b []byte }

func (m *memDisk) WriteAt(p []byte, off int64) (int, error) { return copy(m.b[off:], p), nil }

func TestGrowSameSizeDisk(t *testing.T) {
	// The image itself has 30 MiB free at its end: var fills it, the
	// backup GPT stays where it is.
	path := writeImage(t, imageSize)
	plan := growFile(t, path)
	if !plan.Created || plan.OldBackupLBA != plan.NewBackupLBA {
		t.Fatalf("plan = %s", plan)
	}
	for _, w := range plan.Writes {
		if strings.Contains(w.What, "old backup") || strings.Contains(w.What, "MBR") {
			t.Errorf("unexpected write %s on a disk that did not grow", w.What)
		}
	}
	checkGPT(t, path)
}

func TestGrowNoRoom(t *testing.T) {
	path := writeImage(t, imageSize)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	spec := testVarSpec(t)
	spec.MinBytes = 1 << 30
	_, err = PlanVarPartition(f, imageSize, 512, spec)
	if err == nil || !strings.Contains(err.Error(), "use a system disk at least") {
		t.Errorf("error = %v, want advice to use a larger disk", err)
	}
	if _, err := PlanVarPartition(f, imageSize-1<<20, 512, testVarSpec(t)); err == nil || !strings.Contains(err.Error(), "smaller than the image") {
		t.Errorf("truncated disk: error = %v", err)
	}
}

// TestDamagedPrimary: a damaged primary GPT is rebuilt from the backup
// when the backup is on the disk's last sector (a fresh image, or a grow
// cut short), and refused when it is not (the disk grew, so the backup
// still sits where the image ended and cannot be found safely).
func TestDamagedPrimary(t *testing.T) {
	damages := map[string]func([]byte){
		"no signature":  func(d []byte) { copy(d[512:], "NOT PART") },
		"header crc":    func(d []byte) { d[512+40]++ },
		"entries crc":   func(d []byte) { d[1024+100]++ },
		"entry count 0": func(d []byte) { binary.LittleEndian.PutUint32(d[512+80:], 0) },
	}
	for name, damage := range damages {
		t.Run(name, func(t *testing.T) {
			path := writeImage(t, imageSize)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			damage(b)
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			plan := growFile(t, path)
			if !plan.Created {
				t.Fatalf("plan = %s", plan)
			}
			if tbl := checkGPT(t, path); len(tbl.parts) != 4 {
				t.Errorf("partitions after repair: %+v", tbl.parts)
			}

			grown := append(append([]byte(nil), b...), make([]byte, 64<<20)...)
			if _, err := PlanVarPartition(bytes.NewReader(grown), int64(len(grown)), 512, testVarSpec(t)); err == nil {
				t.Error("damaged primary with no backup at the disk's end accepted")
			}
		})
	}
}

func TestGrow4KSectors(t *testing.T) {
	// A 4Kn disk: 6 sectors of entries, alignment of 256 sectors.
	path := filepath.Join(t.TempDir(), "4k.raw")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	table := &gpt.Table{LogicalSectorSize: 4096, PhysicalSectorSize: 4096, ProtectiveMBR: true, GUID: testDiskGUID,
		Partitions: []*gpt.Partition{{Index: 1, Start: 256, End: 256 + 2560 - 1, Type: testRootType, Name: "root"}}}
	if err := table.Write(f, 16<<20); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(128 << 20); err != nil {
		t.Fatal(err)
	}
	plan, err := PlanVarPartition(f, 128<<20, 4096, testVarSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := ApplyWrites(f, plan.Writes); err != nil {
		t.Fatal(err)
	}
	if plan.Partition.FirstLBA != 2816 || plan.Partition.LastLBA != 128<<20/4096-1-4-1 {
		t.Errorf("var at LBA %d..%d", plan.Partition.FirstLBA, plan.Partition.LastLBA)
	}
	dt, err := gpt.Read(f, 4096, 4096)
	if err != nil || dt.Verify(f, 128<<20) != nil || len(dt.Partitions) < 2 {
		t.Fatalf("go-diskfs read %v, %v", dt, err)
	}
}

func TestGUIDDiskOrder(t *testing.T) {
	u, err := ParseGUID("c12a7328-f81f-11d2-ba4b-00a0c93ec93b")
	if err != nil {
		t.Fatal(err)
	}
	d := guidToDisk(u)
	want := []byte{0x28, 0x73, 0x2a, 0xc1, 0x1f, 0xf8, 0xd2, 0x11, 0xba, 0x4b, 0x00, 0xa0, 0xc9, 0x3e, 0xc9, 0x3b}
	if !bytes.Equal(d[:], want) || guidFromDisk(d[:]) != u {
		t.Errorf("on-disk ESP GUID = %x, want %x", d, want)
	}
	for _, bad := range []string{"", "c12a7328f81f11d2ba4b00a0c93ec93b", "g12a7328-f81f-11d2-ba4b-00a0c93ec93b"} {
		if _, err := ParseGUID(bad); err == nil {
			t.Errorf("ParseGUID(%q) succeeded", bad)
		}
	}
}
