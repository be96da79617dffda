package verify

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/image/build"
	"github.com/drover-os/drover/image/esp"
	"github.com/drover-os/drover/image/gpt"
	"github.com/drover-os/drover/image/pe/petest"
	"github.com/drover-os/drover/image/uki"
	"github.com/drover-os/drover/image/verity"
)

// fixture is a small image made with the project's own writers (GPT, ESP,
// verity) around a root partition of random data, and a manifest that
// matches it.
type fixture struct {
	path   string
	m      *build.Manifest
	layout *gpt.Layout
	esp    []byte // the ESP as written
	kernel []byte // the fake kernel, to find it inside the ESP
}

type options struct {
	entryRootHash string // root hash to write into the loader entry; "" = the real one
	extraPart     bool   // add a var partition the manifest does not list
	rootPadding   int64  // bytes of root partition beyond the verity data
}

func random(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func newFixture(t *testing.T, o options) *fixture {
	t.Helper()
	dir := t.TempDir()
	// Root: 512 blocks of random data (two levels of hash tree).
	root := random(1, 512*4096)
	digest, err := verity.ContentDigest(bytes.NewReader(root), int64(len(root)))
	if err != nil {
		t.Fatal(err)
	}
	hf, err := os.Create(filepath.Join(dir, "hash"))
	if err != nil {
		t.Fatal(err)
	}
	defer hf.Close()
	vr, err := verity.Write(bytes.NewReader(root), int64(len(root)), hf, verity.DeriveParams(digest))
	if err != nil {
		t.Fatal(err)
	}
	tree := make([]byte, vr.HashSize)
	if _, err := hf.ReadAt(tree, 0); err != nil {
		t.Fatal(err)
	}
	rootHash := hex.EncodeToString(vr.RootHash)

	// ESP: systemd-boot layout with fake binaries.
	kernel, initrd, loader := random(2, 300<<10), random(3, 100<<10), random(4, 50<<10)
	cmdline := "console=ttyS0,115200 drover.roothash=" + rootHash
	entryHash := rootHash
	if o.entryRootHash != "" {
		entryHash = o.entryRootHash
	}
	image, err := uki.Build(petest.Stub(9000, 120), uki.Parts{OSRelease: []byte("ID=debian\n"), Cmdline: "console=ttyS0,115200 drover.roothash=" + entryHash,
		Uname: "6.12.0-test", Initrd: initrd, Linux: kernel})
	if err != nil {
		t.Fatal(err)
	}
	files := esp.LoaderFiles("EFI/BOOT/BOOTX64.EFI", image, loader, nil)
	espSize := esp.MinSize(files)
	mtime := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	espImg, err := esp.Build(espSize, files, "ESP", 0x1234abcd, mtime)
	if err != nil {
		t.Fatal(err)
	}

	rootU, verityU := verity.PartitionUUIDs(vr.RootHash)
	rootPart, _ := gpt.Root(gpt.ArchX86_64, verity.FormatGUID(rootU), int64(len(root))+o.rootPadding)
	verityPart, _ := gpt.RootVerity(gpt.ArchX86_64, verity.FormatGUID(verityU), vr.HashSize)
	parts := []gpt.Part{gpt.ESP("0a254412-45ad-43f5-adc4-bf9d03ae00cf", espSize), rootPart, verityPart}
	if o.extraPart {
		parts = append(parts, gpt.Var("11111111-2222-4333-8444-555555555555", 1<<20))
	}
	layout, err := gpt.Plan(parts, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "test.raw")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(layout.DiskSize); err != nil {
		t.Fatal(err)
	}
	if err := gpt.Write(f, layout, "5a6b7c8d-1111-4222-8333-444455556666"); err != nil {
		t.Fatal(err)
	}
	contents := [][]byte{espImg, root, tree}
	for i, c := range contents {
		if _, err := f.WriteAt(c, layout.Parts[i].Offset); err != nil {
			t.Fatal(err)
		}
	}
	if o.rootPadding > 0 {
		// Padding written with non-zero bytes, as a copy tool might leave.
		f.WriteAt(random(5, int(o.rootPadding)), layout.Parts[1].Offset+int64(len(root)))
	}

	m := &build.Manifest{Schema: "drover.dev/manifest/v1", Name: "test", RootHash: rootHash, Cmdline: cmdline, DiskSize: layout.DiskSize}
	for _, p := range layout.Parts[:3] {
		data := make([]byte, p.Length)
		if _, err := f.ReadAt(data, p.Offset); err != nil {
			t.Fatal(err)
		}
		m.Partitions = append(m.Partitions, build.Partition{Index: p.Index, Name: p.Name, Type: gpt.TypeName(p.Type), UUID: p.UUID,
			Offset: p.Offset, Size: p.Length, SHA256: sum(data)})
	}
	for _, ef := range files {
		m.ESP = append(m.ESP, build.ESPFile{Path: ef.Path, Size: len(ef.Data), SHA256: sum(ef.Data)})
	}
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m.Images = []build.ImageFile{{Format: "raw", File: "test.raw", Size: int64(len(whole)), SHA256: sum(whole)}}
	return &fixture{path: path, m: m, layout: layout, esp: espImg, kernel: kernel}
}

// flip inverts one bit of the byte at off in the image.
func (fx *fixture) flip(t *testing.T, off int64) {
	t.Helper()
	f, err := os.OpenFile(fx.path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x01
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func parts(ps []Problem) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range ps {
		if !seen[p.Part] {
			seen[p.Part] = true
			out = append(out, p.Part)
		}
	}
	sort.Strings(out)
	return out
}

func report(ps []Problem) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString("  " + p.String() + "\n")
	}
	return b.String()
}

// mentions requires a problem in part whose message contains every one of
// the fragments.
func mentions(t *testing.T, ps []Problem, part string, fragments ...string) {
	t.Helper()
	for _, p := range ps {
		if p.Part != part {
			continue
		}
		ok := true
		for _, f := range fragments {
			ok = ok && strings.Contains(p.Message, f)
		}
		if ok {
			return
		}
	}
	t.Errorf("no %s problem mentions %q; got:\n%s", part, fragments, report(ps))
}

func TestFreshImageVerifies(t *testing.T) {
	fx := newFixture(t, options{})
	if ps := Verify(fx.path, fx.m); len(ps) != 0 {
		t.Fatalf("fresh image has problems:\n%s", report(ps))
	}
}

func TestFlippedByteInESP(t *testing.T) {
	fx := newFixture(t, options{})
	// Flip a byte inside the kernel file, found in the ESP by its content.
	at := bytes.Index(fx.esp, fx.kernel[:4096])
	if at < 0 {
		t.Fatal("kernel data not found contiguous in the ESP")
	}
	fx.flip(t, fx.layout.Parts[0].Offset+int64(at)+100)
	ps := Verify(fx.path, fx.m)
	if got, want := parts(ps), []string{"esp", "image"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("problems in %v, want %v:\n%s", got, want, report(ps))
	}
	mentions(t, ps, "esp", "sha256 of the partition")
	mentions(t, ps, "esp", esp.UKIPath, "the file was modified")
	t.Logf("reported:\n%s", report(ps))
}

func TestFlippedByteInRoot(t *testing.T) {
	fx := newFixture(t, options{})
	fx.flip(t, fx.layout.Parts[1].Offset+100*4096+17)
	ps := Verify(fx.path, fx.m)
	if got, want := parts(ps), []string{"image", "root"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("problems in %v, want %v:\n%s", got, want, report(ps))
	}
	mentions(t, ps, "root", "dm-verity: data block 100 (partition offset 409600")
	t.Logf("reported:\n%s", report(ps))
}

func TestFlippedByteInVerity(t *testing.T) {
	fx := newFixture(t, options{})
	// Block 0 is the superblock, block 1 the top level, block 2 level 0.
	fx.flip(t, fx.layout.Parts[2].Offset+2*4096+40)
	ps := Verify(fx.path, fx.m)
	if got, want := parts(ps), []string{"image", "root-verity"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("problems in %v, want %v:\n%s", got, want, report(ps))
	}
	mentions(t, ps, "root-verity", "hash block 0 of level 0 (partition offset 8192")
	t.Logf("reported:\n%s", report(ps))
}

func TestFlippedSaltNamesTheTopBlock(t *testing.T) {
	fx := newFixture(t, options{})
	fx.flip(t, fx.layout.Parts[2].Offset+88) // first salt byte of the superblock
	ps := Verify(fx.path, fx.m)
	mentions(t, ps, "root-verity", "top hash block", "not the root hash")
}

func TestDamagedGPT(t *testing.T) {
	fx := newFixture(t, options{})
	fx.flip(t, 512+60) // primary header, inside its CRC-protected fields
	ps := Verify(fx.path, fx.m)
	if got, want := parts(ps), []string{"gpt", "image"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("problems in %v, want %v:\n%s", got, want, report(ps))
	}
}

func TestGPTEntryDiffersFromManifest(t *testing.T) {
	fx := newFixture(t, options{})
	fx.m.Partitions[1].UUID = "00000000-0000-4000-8000-000000000000"
	ps := Verify(fx.path, fx.m)
	mentions(t, ps, "gpt", "entry 2 (root): uuid is", "the manifest says 00000000-")
}

func TestExtraPartitionIsReported(t *testing.T) {
	fx := newFixture(t, options{extraPart: true})
	fx.m.Images = nil // the fixture's digest covers the extra partition too
	ps := Verify(fx.path, fx.m)
	if got, want := parts(ps), []string{"gpt"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("problems in %v, want %v:\n%s", got, want, report(ps))
	}
	mentions(t, ps, "gpt", "entry 4 (var, type var) is not in the manifest")
}

func TestLoaderEntryWithAnotherRootHash(t *testing.T) {
	other := strings.Repeat("ab", 32)
	fx := newFixture(t, options{entryRootHash: other})
	// The manifest's ESP digests match the files; only the entry's root hash
	// disagrees with the manifest's.
	ps := Verify(fx.path, fx.m)
	if got, want := parts(ps), []string{"esp"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("problems in %v, want %v:\n%s", got, want, report(ps))
	}
	mentions(t, ps, "esp", esp.UKIPath, "lacks drover.roothash="+fx.m.RootHash)
}

func TestRootPaddingDiffers(t *testing.T) {
	fx := newFixture(t, options{rootPadding: 8192})
	// The manifest was taken from the image as written; change the padding
	// afterwards: the tree still verifies, the partition digest does not.
	fx.flip(t, fx.layout.Parts[1].Offset+512*4096+5)
	ps := Verify(fx.path, fx.m)
	mentions(t, ps, "root", "sha256 of the partition")
	mentions(t, ps, "root", "the hash tree verifies", "1048576 bytes after the 2097152 it covers")
}

func TestTruncatedImage(t *testing.T) {
	fx := newFixture(t, options{})
	if err := os.Truncate(fx.path, fx.layout.Parts[2].Offset); err != nil {
		t.Fatal(err)
	}
	ps := Verify(fx.path, fx.m)
	mentions(t, ps, "image", "the disk is")
	mentions(t, ps, "root-verity", "past the end")
	mentions(t, ps, "gpt")
}

func TestQCOW2IsRefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.qcow2")
	os.WriteFile(p, append([]byte("QFI\xfb"), make([]byte, 508)...), 0o644)
	ps := Verify(p, &build.Manifest{})
	if len(ps) != 1 || !strings.Contains(ps[0].Message, "qemu-img convert -O raw x.qcow2") {
		t.Fatalf("got:\n%s", report(ps))
	}
}

func TestFixedVHDVerifies(t *testing.T) {
	fx := newFixture(t, options{})
	f, err := os.OpenFile(fx.path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	footer := append([]byte("conectix"), make([]byte, 504)...)
	f.Write(footer)
	f.Close()
	whole, _ := os.ReadFile(fx.path)
	fx.m.Images = append(fx.m.Images, build.ImageFile{Format: "vhd", File: "test.vhd", Size: int64(len(whole)), SHA256: sum(whole)})
	if ps := Verify(fx.path, fx.m); len(ps) != 0 {
		t.Fatalf("fixed VHD has problems:\n%s", report(ps))
	}
}

func TestMissingImage(t *testing.T) {
	ps := Verify(filepath.Join(t.TempDir(), "nope.raw"), &build.Manifest{})
	if len(ps) != 1 || ps[0].Part != PartImage {
		t.Fatalf("got:\n%s", report(ps))
	}
}

func TestDamagedFAT(t *testing.T) {
	fx := newFixture(t, options{})
	// The first FAT starts after the 32 reserved sectors; the second copy no
	// longer matches it.
	fx.flip(t, fx.layout.Parts[0].Offset+32*512+8)
	ps := Verify(fx.path, fx.m)
	if got, want := parts(ps), []string{"esp", "image"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("problems in %v, want %v:\n%s", got, want, report(ps))
	}
	mentions(t, ps, "esp", "reading the FAT32 file system")
}

func TestManifestWithoutRootPartition(t *testing.T) {
	fx := newFixture(t, options{})
	fx.m.Partitions = append(fx.m.Partitions[:1], fx.m.Partitions[2])
	ps := Verify(fx.path, fx.m)
	mentions(t, ps, PartManifest, `no "root" partition`)
	mentions(t, ps, PartGPT, "entry 2 (root, type root-x86-64) is not in the manifest")
}
