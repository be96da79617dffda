package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-os/drover/image/build"
	"github.com/drover-os/drover/image/esp"
	"github.com/drover-os/drover/image/gpt"
	"github.com/drover-os/drover/image/pe/petest"
	"github.com/drover-os/drover/image/uki"
	"github.com/drover-os/drover/image/verity"
)

// publishImage writes a small image drover verify accepts (GPT, an ESP with
// a UKI whose command line holds the root hash, a dm-verity root) and its
// manifest into a new directory, made with the project's own writers as
// image/verify's tests do. It returns the image's path.
func publishImage(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	rnd := func(seed uint64, n int) []byte {
		r := rand.New(rand.NewPCG(seed, seed))
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	root := rnd(1, 64*4096)
	digest, err := verity.ContentDigest(bytes.NewReader(root), int64(len(root)))
	if err != nil {
		t.Fatal(err)
	}
	hf, err := os.Create(filepath.Join(dir, "hash"))
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(hf.Name())
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
	cmdline := "console=ttyS0,115200 drover.roothash=" + rootHash
	kernel, initrd, loader := rnd(2, 64<<10), rnd(3, 32<<10), rnd(4, 16<<10)
	efi, err := uki.Build(petest.Stub(9000, 120), uki.Parts{OSRelease: []byte("ID=debian\n"), Cmdline: cmdline,
		Uname: "6.12.0-test", Initrd: initrd, Linux: kernel})
	if err != nil {
		t.Fatal(err)
	}
	files := esp.LoaderFiles("EFI/BOOT/BOOTX64.EFI", efi, loader, nil)
	espSize := esp.MinSize(files)
	espImg, err := esp.Build(espSize, files, "ESP", 0x1234abcd, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	rootU, verityU := verity.PartitionUUIDs(vr.RootHash)
	rootPart, _ := gpt.Root(gpt.ArchX86_64, verity.FormatGUID(rootU), int64(len(root)))
	verityPart, _ := gpt.RootVerity(gpt.ArchX86_64, verity.FormatGUID(verityU), vr.HashSize)
	layout, err := gpt.Plan([]gpt.Part{gpt.ESP("0a254412-45ad-43f5-adc4-bf9d03ae00cf", espSize), rootPart, verityPart}, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, pubImageRaw)
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
	for i, c := range [][]byte{espImg, root, tree} {
		if _, err := f.WriteAt(c, layout.Parts[i].Offset); err != nil {
			t.Fatal(err)
		}
	}
	m := &build.Manifest{Schema: manifestSchema, Name: "ecs-node", Version: "20260102.030405", BuildID: pubBuildID, Arch: "amd64",
		RootHash: rootHash, Cmdline: cmdline, DiskSize: layout.DiskSize}
	for _, p := range layout.Parts {
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
	m.Images = []build.ImageFile{{Format: "raw", File: pubImageRaw, Size: int64(len(whole)), SHA256: sum(whole)}}
	if err := os.WriteFile(filepath.Join(dir, "ecs-node.manifest.json"), m.JSON(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// callLog counts the emulator's requests by action ("ecs ImportImage",
// "oss PUT"), from its one line per request.
type callLog struct {
	mu    sync.Mutex
	lines []string
	// on, when set, sees each line as it is logged (under the log's lock).
	on func(line string)
}

func (l *callLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range strings.Split(strings.TrimSpace(string(p)), "\n") {
		l.lines = append(l.lines, line)
		if l.on != nil {
			l.on(line)
		}
	}
	return len(p), nil
}

// count is how many requests started with prefix ("ecs ImportImage 200").
func (l *callLog) count(prefix string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.lines {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

func (l *callLog) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}
