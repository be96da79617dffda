package build

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/drover-os/drover/agent/boot"
	"github.com/drover-os/drover/image/erofsz"
	"github.com/drover-os/drover/image/esp"
	"github.com/drover-os/drover/image/gpt"
	"github.com/drover-os/drover/image/initrd"
	"github.com/drover-os/drover/image/recipe"
	"github.com/drover-os/drover/image/rootfs"
	"github.com/drover-os/drover/image/verity"
	"github.com/drover-os/drover/internal/bytesize"
)

// The image is written one artifact per stage (stages.go), each handing
// the next what it made through artifacts: the root file system, its hash
// tree, the initrd, the ESP's files with the UKI, the ESP, the disk. A
// stage's files live in the build's temporary directory, which Build
// removes whatever happens.
type artifacts struct {
	disk diskResult

	root      *os.File // root.erofs
	rootStats *rootfs.Stats
	hash      *os.File // root.verity
	verity    *verity.Result
	initrd    []byte
	espFiles  []esp.File
	espImage  []byte
}

// close closes the stage files still open.
func (a *artifacts) close() {
	for _, f := range []*os.File{a.root, a.hash} {
		if f != nil {
			f.Close()
		}
	}
}

// writeRoot writes the root file system: erofs, its UUID derived from the
// inputs, files compressed as the recipe says.
func (b *builder) writeRoot() error {
	r := b.p.Recipe
	compression, err := erofsz.ParseAlgorithm(r.Image.RootFS.Compression)
	if err != nil {
		return fmt.Errorf("image.rootfs.compression: %w", err)
	}
	extent, err := recipe.ParseSize(r.Image.RootFS.ExtentSize)
	if err != nil {
		return fmt.Errorf("image.rootfs.extentSize: %w", err)
	}
	if b.art.root, err = os.Create(filepath.Join(b.tmp, "root.erofs")); err != nil {
		return err
	}
	start := time.Now()
	st, err := rootfs.Write(b.art.root, b.tree, b.epoch, rootfs.Options{UUID: derive16("erofs-uuid", b.buildID()), Label: "root",
		Compression: compression, ExtentSize: int(extent), Cache: keyed{b.o.Sources.Cache}})
	if err != nil {
		return err
	}
	b.art.rootStats = st
	b.art.disk.RootSize = st.Size
	b.man.RootFS = RootFSInfo{Size: st.Size, Files: st.Files, Dirs: st.Dirs, Bytes: st.DataBytes,
		Compression: compression.String(), CompressedFiles: st.Compressed, CompressedBytes: st.CompressedBytes,
		CompressedDiskBytes: st.CompressedDisk}
	b.man.Files = manifestFiles(b.tree)
	b.man.Setuid = SetuidFiles(b.man.Files)
	took := time.Since(start).Round(time.Millisecond)
	if compression == erofsz.None {
		b.logf("build: rootfs %s, %d files (%s)", bytesize.Format(st.Size), st.Files, took)
	} else {
		b.logf("build: rootfs %s, %d files, %d of them %s-compressed (%s in %s); %d files' encodings from the cache (%s)", bytesize.Format(st.Size),
			st.Files, st.Compressed, compression, bytesize.Format(st.CompressedBytes), bytesize.Format(st.CompressedDisk), st.CacheHits, took)
	}
	return nil
}

// writeVerity writes the dm-verity hash tree of the root; the root hash
// names everything after it.
func (b *builder) writeVerity() error {
	size := b.art.rootStats.Size
	digest, err := verity.ContentDigest(b.art.root, size)
	if err != nil {
		return err
	}
	if b.art.hash, err = os.Create(filepath.Join(b.tmp, "root.verity")); err != nil {
		return err
	}
	vr, err := verity.Write(b.art.root, size, b.art.hash, verity.DeriveParams(digest))
	if err != nil {
		return err
	}
	b.art.verity = vr
	b.art.disk.HashSize = vr.HashSize
	b.art.disk.RootHash = hex.EncodeToString(vr.RootHash)
	return nil
}

// writeInitrd writes the initrd: drover-init, its configuration and the
// modules it loads.
func (b *builder) writeInitrd() error {
	r, vr, res := b.p.Recipe, b.art.verity, &b.art.disk
	rootUUID, verityUUID := verity.PartitionUUIDs(vr.RootHash)
	order, err := b.modules.LoadOrder(InitrdModules)
	if err != nil {
		return fmt.Errorf("initrd modules: %w", err)
	}
	res.Initrd = order
	// The UKI's .cmdline, also written into the initrd (which the UKI's
	// signature covers) for drover-init to compare /proc/cmdline with:
	// systemd-stub appends SMBIOS and add-on words to it even under
	// Secure Boot.
	res.Cmdline = KernelCmdline(r.Cmdline, res.RootHash)
	cfg := boot.Config{
		Kernel: b.man.Kernel, Modules: order, RootHash: res.RootHash,
		Verity: boot.VerityConfig{DataBlocks: vr.DataBlocks, DataBlockSize: vr.DataBlockSize, HashBlockSize: vr.HashBlockSize,
			HashStartBlock: 1, Salt: hex.EncodeToString(vr.Salt), Algorithm: "sha256"},
		RootPartUUID: verity.FormatGUID(rootUUID), VerityPartUUID: verity.FormatGUID(verityUUID),
		VarPartType: gpt.TypeVar, VarLabel: "var", Cmdline: res.Cmdline,
		// The UKI this initrd goes into is signed: drover-init then takes
		// no other command line, whatever it reads of Secure Boot.
		SignedUKI: b.o.SecureBoot != nil,
	}
	for _, p := range InitrdReadAhead {
		if n := b.tree.Get(p); n != nil {
			cfg.ReadAhead = append(cfg.ReadAhead, p)
		}
	}
	cfgJSON, err := cfg.Marshal()
	if err != nil {
		return err
	}
	var initBin []byte
	for _, o := range b.own {
		if o.initrd {
			initBin = o.data
		}
	}
	if initBin == nil {
		return fmt.Errorf("no drover-init to put into the initrd")
	}
	files := []initrd.File{
		{Path: InitPath, Mode: 0o755, Data: initBin}, {Path: "/init", Target: InitPath[1:]},
		{Path: "/etc/drover-init.json", Mode: 0o644, Data: cfgJSON},
		{Path: "/dev", Dir: true, Mode: 0o755}, {Path: "/proc", Dir: true, Mode: 0o555}, {Path: "/sys", Dir: true, Mode: 0o555},
		{Path: "/run", Dir: true, Mode: 0o755}, {Path: "/sysroot", Dir: true, Mode: 0o755},
	}
	for _, m := range order {
		n := b.tree.Get("/usr/lib/modules/" + b.man.Kernel + "/" + m)
		if n == nil {
			return fmt.Errorf("initrd module %s not in the tree", m)
		}
		files = append(files, initrd.File{Path: "/lib/modules/" + b.man.Kernel + "/" + m, Mode: 0o644, Data: n.Data})
	}
	var ird bytes.Buffer
	if err := initrd.Write(&ird, files, b.epoch); err != nil {
		return err
	}
	b.art.initrd = ird.Bytes()
	return nil
}

// writeUKI makes the ESP's files: systemd-boot, loader.conf and one UKI
// whose .cmdline carries the root hash, signed when the build signs.
func (b *builder) writeUKI() (err error) {
	b.art.espFiles, err = b.bootFiles(b.art.disk.Cmdline, b.art.initrd)
	return err
}

// writeESP makes the FAT32 ESP holding them.
func (b *builder) writeESP() error {
	r, res := b.p.Recipe, &b.art.disk
	espSize, err := recipe.ParseSize(r.Image.ESPSize)
	if err != nil {
		// Validate checks it; a recipe built without Validate must not
		// get a minimum-size ESP silently instead.
		return fmt.Errorf("%s: image.espSize: %w", r.Path, err)
	}
	if min := esp.MinSize(b.art.espFiles); espSize < min {
		espSize = (min + 1<<20 - 1) &^ (1<<20 - 1)
	}
	res.ESPSize = espSize
	volID := derive16("esp-volume-id", res.RootHash)
	if b.art.espImage, err = esp.Build(espSize, b.art.espFiles, "ESP", binary.LittleEndian.Uint32(volID[:4]), b.epoch); err != nil {
		return err
	}
	b.man.ESP, err = espManifest(b.art.espFiles, b.o.SecureBoot)
	return err
}

// writeDisk lays out the GPT disk (ESP, root, root-verity) and writes the
// raw image.
func (b *builder) writeDisk() error {
	r, res, vr := b.p.Recipe, &b.art.disk, b.art.verity
	rootUUID, verityUUID := verity.PartitionUUIDs(vr.RootHash)
	arch := gpt.Arch(b.arch.DPS)
	rootPart, ok := gpt.Root(arch, verity.FormatGUID(rootUUID), b.art.rootStats.Size)
	verityPart, ok2 := gpt.RootVerity(arch, verity.FormatGUID(verityUUID), vr.HashSize)
	if !ok || !ok2 {
		return fmt.Errorf("no DPS partition types for arch %s", r.Arch)
	}
	parts := []gpt.Part{gpt.ESP(guid(derive16("esp-part", res.RootHash)), res.ESPSize), rootPart, verityPart}
	diskSize := int64(0)
	if r.Image.Size != "" {
		var err error
		if diskSize, err = recipe.ParseSize(r.Image.Size); err != nil {
			// As with espSize: Validate checks it, a recipe built
			// without Validate must not get a fitted disk instead.
			return fmt.Errorf("%s: image.size: %w", r.Path, err)
		}
	}
	layout, err := gpt.Plan(parts, diskSize, 1<<20)
	if err != nil {
		return fmt.Errorf("disk layout (image.size %s): %w", r.Image.Size, err)
	}
	res.Layout = layout
	res.Size = layout.DiskSize
	res.RawPath = filepath.Join(b.tmp, r.Name+".raw")
	disk, err := os.Create(res.RawPath)
	if err != nil {
		return err
	}
	defer disk.Close()
	if err := disk.Truncate(layout.DiskSize); err != nil {
		return err
	}
	if err := gpt.Write(disk, layout, guid(derive16("disk-guid", res.RootHash))); err != nil {
		return err
	}
	if _, err := disk.WriteAt(b.art.espImage, layout.Parts[0].Offset); err != nil {
		return err
	}
	if err := copyAt(disk, layout.Parts[1].Offset, b.art.root, b.art.rootStats.Size); err != nil {
		return err
	}
	if err := copyAt(disk, layout.Parts[2].Offset, b.art.hash, vr.HashSize); err != nil {
		return err
	}
	return disk.Sync()
}
