package esp

import (
	"bytes"
	"encoding/binary"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/diskfs/go-diskfs/filesystem/fat32"
)

var testMtime = time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)

func testFiles() []File {
	kernel := make([]byte, 3<<20+123)
	for i := range kernel {
		kernel[i] = byte(i*31 + i>>9)
	}
	files := LoaderFiles("EFI/BOOT/BOOTX64.EFI", kernel, []byte("MZ systemd-boot"), nil)
	return append(files,
		File{Path: "empty"},
		File{Path: "a/b/c/a rather long name.txt", Data: []byte("deep")},
	)
}

func build(t *testing.T, files []File) []byte {
	t.Helper()
	img, err := Build(MinSize(files), files, "DROVER-ESP", 0x1234ABCD, testMtime)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestBuildIsReproducibleAcrossTimeAndOrder(t *testing.T) {
	files := testFiles()
	first := build(t, files)
	// go-diskfs reads the wall clock for every directory entry; crossing a
	// 2-second FAT tick proves none of it survives.
	time.Sleep(2100 * time.Millisecond)
	reversed := make([]File, len(files))
	for i, f := range files {
		reversed[len(files)-1-i] = f
	}
	second := build(t, reversed)
	if !bytes.Equal(first, second) {
		t.Fatal("two builds of the same files differ")
	}
}

func TestBuildContentsAndMetadata(t *testing.T) {
	files := testFiles()
	img := build(t, files)

	for _, sector := range []int{0, 6} {
		if got := binary.LittleEndian.Uint32(img[sector*512+67:]); got != 0x1234ABCD {
			t.Errorf("volume ID in sector %d = %#x, want 0x1234abcd", sector, got)
		}
	}
	if got := string(img[71:82]); got != "DROVER-ESP " {
		t.Errorf("boot sector label = %q", got)
	}

	fs, err := fat32.Read(newMemFrom(img), int64(len(img)), 0, 512)
	if err != nil {
		t.Fatal(err)
	}
	want := testMtime.Truncate(2 * time.Second)
	for _, f := range files {
		if len(f.Data) == 0 {
			// go-diskfs cannot read a file without clusters, which is what
			// an empty file is; TestEmptyFileHasNoClusterAndFSInfoIsExact covers it.
			continue
		}
		fh, err := fs.OpenFile("/"+f.Path, 0)
		if err != nil {
			t.Fatalf("open %s: %v", f.Path, err)
		}
		got, err := io.ReadAll(fh)
		if err != nil {
			t.Fatalf("read %s: %v", f.Path, err)
		}
		if !bytes.Equal(got, f.Data) {
			t.Errorf("%s: read %d bytes that differ from the %d written", f.Path, len(got), len(f.Data))
		}
		for p := f.Path; p != "."; p = parentOf(p) {
			info, err := fs.Stat(p)
			if err != nil {
				t.Fatalf("stat %s: %v", p, err)
			}
			if !info.ModTime().Equal(want) {
				t.Errorf("%s: mtime %v, want %v", p, info.ModTime(), want)
			}
		}
	}
}

func parentOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return "."
}

// TestEveryDirectoryEntryCarriesMtime scans the raw directory clusters,
// so "." and ".." and the volume label, which no API lists, are checked too.
func TestEveryDirectoryEntryCarriesMtime(t *testing.T) {
	img := build(t, testFiles())
	g := geometryFor(int64(len(img)))
	w := walker{b: img, g: g, fat: img[32*512 : (32+g.sectorsPerFAT)*512]}
	date, clock := fatTime(testMtime)
	entries := 0
	var scan func(cluster uint32, depth int)
	scan = func(cluster uint32, depth int) {
		chain, err := w.chain(cluster)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range chain {
			base := g.dataStart + int64(c-2)*g.clusterBytes
			for off := base; off < base+g.clusterBytes; off += 32 {
				e := img[off : off+32]
				if e[0] == 0 {
					return
				}
				if e[0] == 0xE5 || e[11]&0x3F == 0x0F {
					continue
				}
				entries++
				name := strings.TrimSpace(string(e[:11]))
				for _, field := range []struct {
					at   int
					want uint16
				}{{14, clock}, {16, date}, {18, date}, {22, clock}, {24, date}} {
					if got := binary.LittleEndian.Uint16(e[field.at:]); got != field.want {
						t.Errorf("entry %q at depth %d: field at byte %d = %#x, want %#x", name, depth, field.at, got, field.want)
					}
				}
				start := uint32(binary.LittleEndian.Uint16(e[26:])) | uint32(binary.LittleEndian.Uint16(e[20:]))<<16
				if name == ".." && depth == 1 && start != 0 {
					t.Errorf("'..' of a top-level directory points at cluster %d, want 0 (the root)", start)
				}
				if e[11]&0x10 != 0 && name != "." && name != ".." {
					scan(start, depth+1)
				}
			}
		}
	}
	scan(binary.LittleEndian.Uint32(img[44:48]), 0)
	// 5 files, the label, 7 directories with "." and ".." each.
	if entries != 5+1+7*3 {
		t.Errorf("scanned %d directory entries, want %d", entries, 5+1+7*3)
	}
}

func newMemFrom(b []byte) *memBackend { return &memBackend{b: b} }

func TestEmptyFileHasNoClusterAndFSInfoIsExact(t *testing.T) {
	img := build(t, testFiles())
	g := geometryFor(int64(len(img)))
	fat := img[32*512 : (32+g.sectorsPerFAT)*512]
	fat2 := img[(32+g.sectorsPerFAT)*512 : (32+2*g.sectorsPerFAT)*512]
	if !bytes.Equal(fat, fat2) {
		t.Error("the two FAT copies differ")
	}
	var free uint32
	for c := int64(2); c <= g.clusters+1; c++ {
		if binary.LittleEndian.Uint32(fat[4*c:])&0x0FFFFFFF == 0 {
			free++
		}
	}
	if got := binary.LittleEndian.Uint32(img[512+488:]); got != free {
		t.Errorf("FSInfo free count = %d, the FAT has %d free clusters", got, free)
	}
	fs, err := fat32.Read(newMemFrom(img), int64(len(img)), 0, 512)
	if err != nil {
		t.Fatal(err)
	}
	fh, err := fs.OpenFile("/empty", 0)
	if err != nil {
		t.Fatal(err)
	}
	type chainer interface{ GetClusterChain() ([]uint32, error) }
	if chain, err := fh.(chainer).GetClusterChain(); err == nil {
		t.Errorf("the empty file owns clusters %v, want none (start cluster 0)", chain)
	}
}

func TestWriteOverwritesTheWholeRegion(t *testing.T) {
	files := testFiles()
	size := MinSize(files)
	want, err := Build(size, files, "ESP", 7, testMtime)
	if err != nil {
		t.Fatal(err)
	}
	const offset = 1 << 20
	disk := &memBackend{b: bytes.Repeat([]byte{0xA5}, int(size)+2*offset)}
	if err := Write(disk, offset, size, files, "ESP", 7, testMtime); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(disk.b[offset:offset+size], want) {
		t.Error("the region differs from Build's image (stale bytes leaked through?)")
	}
	if disk.b[offset-1] != 0xA5 || disk.b[offset+size] != 0xA5 {
		t.Error("Write touched bytes outside its region")
	}
}

func TestMinSize(t *testing.T) {
	small := LoaderFiles("EFI/BOOT/BOOTX64.EFI", []byte("u"), []byte("b"), nil)
	if got := MinSize(small); got != 33<<20 {
		t.Errorf("MinSize of tiny files = %d, want 33 MiB (65525 clusters of 512 bytes + FATs)", got)
	}
	if g := geometryFor(MinSize(small)); g.clusters < minFAT32Clusters {
		t.Errorf("33 MiB gives %d clusters", g.clusters)
	}
	big := []File{{Path: "big", Data: make([]byte, 80<<20)}, {Path: "d/x", Data: []byte("x")}}
	size := MinSize(big)
	if _, err := Build(size, big, "", 0, testMtime); err != nil {
		t.Fatalf("Build(MinSize) = %v", err)
	}
	if _, err := Build(size-1<<20, big, "", 0, testMtime); err == nil || !strings.Contains(err.Error(), "esp.MinSize") {
		t.Errorf("Build one MiB below MinSize: err = %v, want a too-small error", err)
	}
	if _, err := Build(32<<20, small, "", 0, testMtime); err == nil || !strings.Contains(err.Error(), "FAT32 needs 65525") {
		t.Errorf("Build(32 MiB): err = %v, want the FAT32 minimum error", err)
	}
}

func TestBuildRejects(t *testing.T) {
	ok := []File{{Path: "a", Data: []byte("x")}}
	for name, tc := range map[string]struct {
		files []File
		label string
		want  string
	}{
		"absolute":        {[]File{{Path: "/EFI/x"}}, "", "relative and clean"},
		"dotdot":          {[]File{{Path: "a/../b"}}, "", "relative and clean"},
		"empty path":      {[]File{{Path: ""}}, "", "relative and clean"},
		"trailing dot":    {[]File{{Path: "a."}}, "", "trailing dots"},
		"bad char":        {[]File{{Path: "a:b"}}, "", "does not allow"},
		"case duplicate":  {[]File{{Path: "EFI/x"}, {Path: "efi/X"}}, "", "given twice"},
		"file and dir":    {[]File{{Path: "a"}, {Path: "a/b"}}, "", "both a file and a directory"},
		"lowercase label": {ok, "esp", "volume label"},
		"long label":      {ok, "ABCDEFGHIJKL", "longer than 11"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Build(64<<20, tc.files, tc.label, 0, testMtime)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestLoaderFiles(t *testing.T) {
	files := LoaderFiles("EFI/BOOT/BOOTX64.EFI", []byte("U"), []byte("B"), nil)
	got := map[string]string{}
	for _, f := range files {
		got[f.Path] = string(f.Data)
	}
	want := map[string]string{
		"EFI/BOOT/BOOTX64.EFI": "B",
		"loader/loader.conf":   "timeout 0\ndefault drover.efi\neditor no\n",
		"EFI/Linux/drover.efi": "U",
	}
	if len(got) != len(want) {
		t.Fatalf("got %d files, want %d", len(got), len(want))
	}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s = %q, want %q", p, got[p], w)
		}
	}
}

func TestFatTimeClamps(t *testing.T) {
	d, c := fatTime(time.Unix(0, 0))
	if d != 1<<5|1 || c != 0 {
		t.Errorf("1970 → date %#x time %#x, want 1980-01-01 00:00:00", d, c)
	}
	d, c = fatTime(time.Date(2024, 2, 29, 23, 59, 59, 0, time.FixedZone("x", 3600)))
	if wantD, wantC := uint16(44<<9|2<<5|29), uint16(22<<11|59<<5|29); d != wantD || c != wantC {
		t.Errorf("2024-02-29T23:59:59+01:00 → %#x %#x, want %#x %#x (UTC, 2 s resolution)", d, c, wantD, wantC)
	}
}

func TestSizeWhereGoDiskfsFATFormulaDividesExactly(t *testing.T) {
	files := []File{{Path: "EFI/BOOT/BOOTX64.EFI", Data: []byte("efi")}}
	for _, mb := range []int64{64, 129} {
		b, err := Build(mb<<20, files, "ESP", 1, time.Unix(1764000000, 0))
		if err != nil {
			t.Fatalf("%d MiB: %v", mb, err)
		}
		if int64(len(b)) != mb<<20 {
			t.Errorf("%d MiB: image is %d bytes", mb, len(b))
		}
	}
}

func TestLoaderFilesWithKeys(t *testing.T) {
	files := LoaderFiles("EFI/BOOT/BOOTX64.EFI", []byte("U"), []byte("B"), map[string][]byte{"db.auth": []byte("D"), "PK.auth": []byte("P")})
	got := map[string]string{}
	for _, f := range files {
		got[f.Path] = string(f.Data)
	}
	if got["loader/loader.conf"] != "timeout 0\ndefault drover.efi\neditor no\nsecure-boot-enroll if-safe\n" {
		t.Errorf("loader.conf = %q", got["loader/loader.conf"])
	}
	if got["loader/keys/auto/db.auth"] != "D" || got["loader/keys/auto/PK.auth"] != "P" || len(got) != 5 {
		t.Errorf("files %v", got)
	}
}
