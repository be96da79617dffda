package gpt

import (
	"bytes"
	"encoding/binary"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const (
	espUUID    = "11111111-2222-4333-8444-555555555555"
	rootUUID   = "0a1b2c3d-4e5f-4061-8273-8495a6b7c8d9"
	verityUUID = "d9c8b7a6-9584-4372-8160-5f4e3d2c1b0a"
	diskGUID   = "6b2a3f60-0d6e-4d7e-9a41-2f1d9b0c7e55"
)

func dpsParts(t *testing.T) []Part {
	t.Helper()
	root, ok := Root(ArchX86_64, rootUUID, 300<<20+12345)
	if !ok {
		t.Fatal("x86-64 unknown")
	}
	verity, _ := RootVerity(ArchX86_64, verityUUID, 2<<20+4096)
	return []Part{ESP(espUUID, 64<<20), root, verity}
}

func TestPlanAlignsAndFits(t *testing.T) {
	l, err := Plan(dpsParts(t), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		first, last uint64
		length      int64
	}{
		{2048, 2048 + 64*2048 - 1, 64 << 20},       // ESP at 1 MiB
		{133120, 133120 + 301*2048 - 1, 301 << 20}, // 300 MiB + 12345 → 301 MiB
		{749568, 749568 + 3*2048 - 1, 3 << 20},     // 2 MiB + 4096 → 3 MiB
	}
	for i, w := range want {
		p := l.Parts[i]
		if p.Index != i+1 || p.FirstLBA != w.first || p.LastLBA != w.last || p.Length != w.length || p.Offset != int64(w.first)*512 {
			t.Errorf("part %d = index %d LBAs %d-%d length %d offset %d; want LBAs %d-%d length %d",
				i, p.Index, p.FirstLBA, p.LastLBA, p.Length, p.Offset, w.first, w.last, w.length)
		}
		if p.Offset%DefaultAlign != 0 {
			t.Errorf("part %d starts at %d, not 1 MiB aligned", i, p.Offset)
		}
	}
	// 1 + 64 + 301 + 3 MiB of partitions, then 33 sectors of backup GPT
	// rounded up to the next MiB.
	if l.DiskSize != 370<<20 || l.FirstUsableLBA != 34 || l.LastUsableLBA != 370*2048-34 {
		t.Errorf("disk %d bytes, usable %d-%d; want 370 MiB, 34-%d", l.DiskSize, l.FirstUsableLBA, l.LastUsableLBA, 370*2048-34)
	}
}

func TestPlanFixedDiskAndFill(t *testing.T) {
	parts := append(dpsParts(t), Var("4e1a6c3b-2d5f-4a8e-9b7c-1d2e3f405162", 0))
	l, err := Plan(parts, 1<<30, 0)
	if err != nil {
		t.Fatal(err)
	}
	v := l.Parts[3]
	if v.Offset != 369<<20 || v.Offset+v.Length != 1023<<20 || v.LastLBA > l.LastUsableLBA {
		t.Errorf("var fills %d+%d (last LBA %d, usable %d); want 369 MiB to 1023 MiB", v.Offset, v.Length, v.LastLBA, l.LastUsableLBA)
	}
	if _, err := Plan(dpsParts(t), 300<<20, 0); err == nil || !strings.Contains(err.Error(), "too small, the partitions need 387973120 bytes") {
		t.Errorf("too-small disk: err = %v", err)
	}
	l, err = Plan(dpsParts(t), 0, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if l.Parts[0].FirstLBA != 40 || l.Parts[1].Offset != 40*512+64<<20 {
		t.Errorf("4 KiB alignment: ESP at LBA %d, root at %d", l.Parts[0].FirstLBA, l.Parts[1].Offset)
	}
}

func TestPlanRejects(t *testing.T) {
	ok := ESP(espUUID, 1<<20)
	for name, tc := range map[string]struct {
		parts []Part
		disk  int64
		align int64
		want  string
	}{
		"no parts":       {nil, 0, 0, "no partitions"},
		"bad align":      {[]Part{ok}, 0, 1000, "alignment"},
		"odd disk":       {[]Part{ok}, 1000, 0, "disk size"},
		"bad type":       {[]Part{{Name: "x", Type: "nope", UUID: espUUID, Size: 1}}, 0, 0, "type"},
		"nil uuid":       {[]Part{{Name: "x", Type: TypeESP, UUID: "00000000-0000-0000-0000-000000000000", Size: 1}}, 0, 0, "derive one"},
		"duplicate uuid": {[]Part{ok, ESP(strings.ToUpper(espUUID), 1)}, 0, 0, "already used"},
		"long label":     {[]Part{{Name: strings.Repeat("x", 37), Type: TypeESP, UUID: espUUID, Size: 1}}, 0, 0, "36"},
		"fill not last":  {[]Part{ESP(espUUID, 0), Var(rootUUID, 1)}, 1 << 30, 0, "only for the last"},
		"fill no disk":   {[]Part{ESP(espUUID, 0)}, 0, 0, "only for the last"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Plan(tc.parts, tc.disk, tc.align)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestLayoutStringGolden(t *testing.T) {
	l, err := Plan(dpsParts(t), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "plan.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(l.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got := l.String(); got != string(want) {
		t.Errorf("Layout.String() =\n%s\nwant (testdata/plan.golden)\n%s", got, want)
	}
}

func TestDPSConstants(t *testing.T) {
	root, _ := Root(ArchARM64, rootUUID, 1)
	verity, _ := RootVerity(ArchARM64, verityUUID, 1)
	if root.Type != "b921b045-1df0-41c3-af44-4c6f280d3fae" || verity.Type != "df3300ce-d69f-4c92-978c-9bfb0f38d820" {
		t.Errorf("arm64 types %s %s", root.Type, verity.Type)
	}
	if root.Attributes != 1<<60 || verity.Attributes != 1<<60 || ESP(espUUID, 1).Attributes != 0 {
		t.Error("root and verity must be read-only (bit 60), the ESP not")
	}
	if _, ok := Root("mips", rootUUID, 1); ok {
		t.Error("unknown arch accepted")
	}
	if TypeName(strings.ToUpper(TypeRootVerityX86_64)) != "root-x86-64-verity" || TypeName("abc") != "abc" {
		t.Error("TypeName")
	}
	if got := AttributeNames(AttrReadOnly | AttrRequired | 1<<40); got != "required,bit40,read-only" {
		t.Errorf("AttributeNames = %q", got)
	}
}

// memDisk is an in-memory disk for Write and ReadLayout.
type memDisk []byte

func (m memDisk) WriteAt(p []byte, off int64) (int, error) { return copy(m[off:], p), nil }
func (m memDisk) ReadAt(p []byte, off int64) (int, error)  { return copy(p, m[off:]), nil }

// smallParts is dpsParts scaled down so in-memory disks stay small.
func smallParts(t *testing.T) []Part {
	parts := dpsParts(t)
	parts[0].Size, parts[1].Size, parts[2].Size = 3<<20, 2<<20+12345, 4096
	return parts
}

func writeDisk(t *testing.T, fill byte) (memDisk, *Layout) {
	t.Helper()
	l, err := Plan(smallParts(t), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	disk := memDisk(bytes.Repeat([]byte{fill}, int(l.DiskSize)))
	if err := Write(disk, l, diskGUID); err != nil {
		t.Fatal(err)
	}
	return disk, l
}

func TestWriteOnDiskBytes(t *testing.T) {
	disk, l := writeDisk(t, 0) // 9 MiB: 18432 sectors, the MBR covers 18431
	mbr := disk[:512]
	if !bytes.Equal(mbr[446:462], []byte{0, 0, 2, 0, 0xEE, 0xFF, 0xFF, 0xFF, 1, 0, 0, 0, 0xFF, 0x47, 0, 0}) || mbr[510] != 0x55 || mbr[511] != 0xAA {
		t.Errorf("protective MBR entry = % x", mbr[446:462])
	}
	if string(disk[512:520]) != "EFI PART" {
		t.Fatal("no primary header")
	}
	// The root entry: mixed-endian type GUID, read-only bit, UTF-16 name.
	e := disk[2*512+128 : 2*512+256]
	wantType := []byte{0xe3, 0xbc, 0x68, 0x4f, 0xcd, 0xe8, 0xb1, 0x4d, 0x96, 0xe7, 0xfb, 0xca, 0xf9, 0x84, 0xb7, 0x09}
	if !bytes.Equal(e[0:16], wantType) {
		t.Errorf("root type GUID on disk = % x", e[0:16])
	}
	if binary.LittleEndian.Uint64(e[32:]) != l.Parts[1].FirstLBA || binary.LittleEndian.Uint64(e[48:]) != AttrReadOnly {
		t.Error("root entry LBA or attributes wrong")
	}
	if string(e[56:66]) != "r\x00o\x00o\x00t\x00\x00\x00" {
		t.Errorf("root name = % x", e[56:66])
	}
	if string(disk[len(disk)-512:len(disk)-504]) != "EFI PART" {
		t.Error("no backup header in the last sector")
	}
}

func TestWriteIsDeterministicOverAnyDisk(t *testing.T) {
	clean, l := writeDisk(t, 0)
	dirty, _ := writeDisk(t, 0xA5)
	regions := [][2]int64{{0, 34 * 512}, {l.DiskSize - 33*512, l.DiskSize}}
	for _, r := range regions {
		if !bytes.Equal(clean[r[0]:r[1]], dirty[r[0]:r[1]]) {
			t.Errorf("bytes %d-%d depend on what the disk held before", r[0], r[1])
		}
	}
	again, _ := writeDisk(t, 0)
	if !bytes.Equal(clean, again) {
		t.Error("two writes differ")
	}
}

func TestReadLayoutRoundTrip(t *testing.T) {
	disk, l := writeDisk(t, 0)
	got, guid, err := ReadLayout(disk, int64(len(disk)))
	if err != nil {
		t.Fatal(err)
	}
	if guid != diskGUID {
		t.Errorf("disk GUID %s, want %s", guid, diskGUID)
	}
	if got.DiskSize != l.DiskSize || got.Align != l.Align || got.FirstUsableLBA != l.FirstUsableLBA || got.LastUsableLBA != l.LastUsableLBA {
		t.Errorf("read %+v, wrote %+v", got, l)
	}
	for i, p := range got.Parts {
		w := l.Parts[i]
		w.Size = w.Length // the table records only what was allotted
		if p != w {
			t.Errorf("part %d read back as %+v, want %+v", i, p, w)
		}
	}
	if got.String() == "" {
		t.Error("empty String")
	}
}

func TestReadLayoutRejectsDamage(t *testing.T) {
	for name, tc := range map[string]struct {
		corrupt func(d memDisk)
		want    string
	}{
		"no MBR":          {func(d memDisk) { d[510] = 0 }, "protective MBR"},
		"primary header":  {func(d memDisk) { d[512+40]++ }, "primary GPT is damaged"},
		"backup entries":  {func(d memDisk) { d[len(d)-33*512+56] ^= 1 }, "backup partition entries differ"},
		"backup header":   {func(d memDisk) { d[len(d)-512+40]++ }, "backup"},
		"no backup":       {func(d memDisk) { clear(d[len(d)-512:]) }, "backup"},
		"primary entries": {func(d memDisk) { d[2*512+56] ^= 1 }, "primary GPT is damaged"},
	} {
		t.Run(name, func(t *testing.T) {
			disk, _ := writeDisk(t, 0)
			tc.corrupt(disk)
			_, _, err := ReadLayout(disk, int64(len(disk)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}
