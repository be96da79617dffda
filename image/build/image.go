package build

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/drover-os/drover/agent/boot"
	"github.com/drover-os/drover/image/erofsz"
	"github.com/drover-os/drover/image/esp"
	"github.com/drover-os/drover/image/finalize"
	"github.com/drover-os/drover/image/gpt"
	"github.com/drover-os/drover/image/initrd"
	"github.com/drover-os/drover/image/kmod"
	"github.com/drover-os/drover/image/recipe"
	"github.com/drover-os/drover/image/rootfs"
	"github.com/drover-os/drover/image/tree"
	"github.com/drover-os/drover/image/uki"
	"github.com/drover-os/drover/image/verity"
	"github.com/drover-os/drover/internal/bytesize"
)

// diskResult is what the image stage produced.
type diskResult struct {
	RawPath  string
	Size     int64
	RootHash string
	Cmdline  string
	Layout   *gpt.Layout
	RootSize int64
	HashSize int64
	ESPSize  int64
	Initrd   []string // modules in the initrd, in load order
}

func (b *builder) takeBootFiles(kver string) error {
	k := b.tree.Get("/boot/vmlinuz-" + kver)
	if k == nil {
		return fmt.Errorf("kernel image /boot/vmlinuz-%s not in the tree: check the recipe's kernel package", kver)
	}
	var boot [2][]byte
	for i, p := range []string{b.arch.SystemdBoot(), b.arch.Stub()} {
		n := b.tree.Get(p)
		if n == nil || n.Kind != tree.Regular {
			return fmt.Errorf("%s not in the tree: add systemd-boot-efi to the recipe's packages and run drover lock", p)
		}
		if err := uki.CheckMachine(n.Data, b.arch.PE); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		boot[i] = n.Data
	}
	b.kernel, b.systemdBoot, b.stub = k.Data, boot[0], boot[1]
	return nil
}

// NoCredentialImport turns off systemd's import of system credentials at
// PID 1's start (systemd >= 254): from SMBIOS Type 11
// io.systemd.credential[.binary]: strings and QEMU fw_cfg
// opt/io.systemd.credentials/, which whoever runs the hypervisor sets
// without touching the signed command line (tmpfiles.extra, sysctl.extra,
// network.* would configure the node), from systemd.set_credential= words,
// and from the initrd's /.extra/credentials/ (systemd-stub's unsigned
// *.cred files of the ESP). drover passes nothing through credentials:
// the user-data is the agent's own (ECS metadata, fw_cfg opt/drover/).
const NoCredentialImport = "systemd.import_credentials=no"

// KernelCmdline is the UKI's .cmdline: the recipe's words, then drover's
// own. NoCredentialImport comes after the recipe's (the last
// systemd.import_credentials= counts) and drover.roothash= last.
func KernelCmdline(recipeWords []string, rootHash string) string {
	return strings.Join(append(slices.Clone(recipeWords), NoCredentialImport, "drover.roothash="+rootHash), " ")
}

// image writes erofs, verity, initrd, ESP and the GPT disk.
func (b *builder) image(ctx context.Context) (*diskResult, error) {
	r := b.p.Recipe
	res := &diskResult{}

	// Root filesystem: erofs, UUID derived from the inputs.
	rootPath := filepath.Join(b.tmp, "root.erofs")
	rf, err := os.Create(rootPath)
	if err != nil {
		return nil, err
	}
	defer rf.Close()
	uuid := derive16("erofs-uuid", b.buildID())
	compression, err := erofsz.ParseAlgorithm(r.Image.RootFS.Compression)
	if err != nil {
		return nil, fmt.Errorf("image.rootfs.compression: %w", err)
	}
	extent, err := recipe.ParseSize(r.Image.RootFS.ExtentSize)
	if err != nil {
		return nil, fmt.Errorf("image.rootfs.extentSize: %w", err)
	}
	start := time.Now()
	st, err := rootfs.Write(rf, b.tree, b.epoch, rootfs.Options{UUID: uuid, Label: "root",
		Compression: compression, ExtentSize: int(extent), Cache: keyed{b.o.Sources.Cache}})
	if err != nil {
		return nil, err
	}
	res.RootSize = st.Size
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

	// dm-verity over the erofs image.
	digest, err := verity.ContentDigest(rf, st.Size)
	if err != nil {
		return nil, err
	}
	vp := verity.DeriveParams(digest)
	hashPath := filepath.Join(b.tmp, "root.verity")
	hf, err := os.Create(hashPath)
	if err != nil {
		return nil, err
	}
	defer hf.Close()
	vr, err := verity.Write(rf, st.Size, hf, vp)
	if err != nil {
		return nil, err
	}
	res.HashSize = vr.HashSize
	res.RootHash = hex.EncodeToString(vr.RootHash)
	rootUUID, verityUUID := verity.PartitionUUIDs(vr.RootHash)

	// initrd: drover-init, its config and the modules it loads.
	order, err := b.modules.LoadOrder(InitrdModules)
	if err != nil {
		return nil, fmt.Errorf("initrd modules: %w", err)
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
		return nil, err
	}
	initFile := b.tree.Get("/usr/lib/drover/drover-init")
	files := []initrd.File{
		{Path: "/init", Mode: 0o755, Data: initFile.Data},
		{Path: "/etc/drover-init.json", Mode: 0o644, Data: cfgJSON},
		{Path: "/dev", Dir: true, Mode: 0o755}, {Path: "/proc", Dir: true, Mode: 0o555}, {Path: "/sys", Dir: true, Mode: 0o555},
		{Path: "/run", Dir: true, Mode: 0o755}, {Path: "/sysroot", Dir: true, Mode: 0o755},
	}
	for _, m := range order {
		n := b.tree.Get("/usr/lib/modules/" + b.man.Kernel + "/" + m)
		if n == nil {
			return nil, fmt.Errorf("initrd module %s not in the tree", m)
		}
		files = append(files, initrd.File{Path: "/lib/modules/" + b.man.Kernel + "/" + m, Mode: 0o644, Data: n.Data})
	}
	var ird bytes.Buffer
	if err := initrd.Write(&ird, files, b.epoch); err != nil {
		return nil, err
	}

	// ESP with systemd-boot and one UKI whose .cmdline carries the root hash.
	espFiles, err := b.bootFiles(res.Cmdline, ird.Bytes())
	if err != nil {
		return nil, err
	}
	espSize, err := recipe.ParseSize(r.Image.ESPSize)
	if err != nil {
		// Validate checks it; a recipe built without Validate must not
		// get a minimum-size ESP silently instead.
		return nil, fmt.Errorf("%s: image.espSize: %w", r.Path, err)
	}
	if min := esp.MinSize(espFiles); espSize < min {
		espSize = (min + 1<<20 - 1) &^ (1<<20 - 1)
	}
	res.ESPSize = espSize
	volID := derive16("esp-volume-id", res.RootHash)
	espVol := binary.LittleEndian.Uint32(volID[:4])
	espImg, err := esp.Build(espSize, espFiles, "ESP", espVol, b.epoch)
	if err != nil {
		return nil, err
	}
	if b.man.ESP, err = espManifest(espFiles, b.o.SecureBoot); err != nil {
		return nil, err
	}

	// GPT disk.
	arch := gpt.Arch(b.arch.DPS)
	rootPart, ok := gpt.Root(arch, verity.FormatGUID(rootUUID), st.Size)
	verityPart, ok2 := gpt.RootVerity(arch, verity.FormatGUID(verityUUID), vr.HashSize)
	if !ok || !ok2 {
		return nil, fmt.Errorf("no DPS partition types for arch %s", r.Arch)
	}
	parts := []gpt.Part{gpt.ESP(guid(derive16("esp-part", res.RootHash)), espSize), rootPart, verityPart}
	diskSize := int64(0)
	if r.Image.Size != "" {
		diskSize, _ = recipe.ParseSize(r.Image.Size)
	}
	layout, err := gpt.Plan(parts, diskSize, 1<<20)
	if err != nil {
		return nil, fmt.Errorf("disk layout (image.size %s): %w", r.Image.Size, err)
	}
	res.Layout = layout
	res.Size = layout.DiskSize
	res.RawPath = filepath.Join(b.tmp, r.Name+".raw")
	disk, err := os.Create(res.RawPath)
	if err != nil {
		return nil, err
	}
	defer disk.Close()
	if err := disk.Truncate(layout.DiskSize); err != nil {
		return nil, err
	}
	if err := gpt.Write(disk, layout, guid(derive16("disk-guid", res.RootHash))); err != nil {
		return nil, err
	}
	if _, err := disk.WriteAt(espImg, layout.Parts[0].Offset); err != nil {
		return nil, err
	}
	if err := copyAt(disk, layout.Parts[1].Offset, rf, st.Size); err != nil {
		return nil, err
	}
	if err := copyAt(disk, layout.Parts[2].Offset, hf, vr.HashSize); err != nil {
		return nil, err
	}
	if err := disk.Sync(); err != nil {
		return nil, err
	}
	return res, nil
}

// derive16 makes a deterministic 16-byte value (UUIDs, volume ids) from the
// build's content, tagged by purpose, with RFC 4122 version 4 bits so tools
// that check them are content.
func derive16(purpose, seed string) [16]byte {
	s := sha256.Sum256([]byte("drover " + purpose + "\x00" + seed))
	var u [16]byte
	copy(u[:], s[:16])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

func guid(u [16]byte) string { return verity.FormatGUID(u) }

func copyAt(dst *os.File, off int64, src *os.File, n int64) error {
	buf := make([]byte, 4<<20)
	for done := int64(0); done < n; {
		k := int64(len(buf))
		if n-done < k {
			k = n - done
		}
		if _, err := src.ReadAt(buf[:k], done); err != nil {
			return err
		}
		if _, err := dst.WriteAt(buf[:k], off+done); err != nil {
			return err
		}
		done += k
	}
	return nil
}

// kmodStep builds the module index the kernel package's postinst (depmod)
// would have, and keeps it for choosing the initrd's modules.
type kmodStep struct {
	kver  string
	index **kmod.Index
	cache kmod.Cache // the modules' parsed contents, by content
}

func (kmodStep) String() string { return "kmod-index" }
func (kmodStep) Why() string {
	return "depmod would run in the kernel's postinst; modprobe and kernel auto-loading need modules.dep/alias"
}

func (s kmodStep) Run(t *tree.Tree, env *finalize.Env) error {
	base := "/usr/lib/modules/" + s.kver + "/"
	files := map[string][]byte{}
	for _, p := range t.Paths() {
		if strings.HasPrefix(p, base) && (strings.Contains(p, ".ko")) && t.Get(p).Kind == tree.Regular {
			files[strings.TrimPrefix(p, base)] = t.Get(p).Data
		}
	}
	var builtin, builtinInfo []byte
	if n := t.Get(base + "modules.builtin"); n != nil {
		builtin = n.Data
	}
	if n := t.Get(base + "modules.builtin.modinfo"); n != nil {
		builtinInfo = n.Data
	}
	idx, err := kmod.BuildCached(files, builtin, builtinInfo, 2, s.cache)
	if err != nil {
		return err
	}
	for name, data := range idx.Files() {
		if err := t.Set(&tree.Node{Path: base + name, Kind: tree.Regular, Mode: 0o644, Data: data, Owner: "drover"}); err != nil {
			return err
		}
	}
	*s.index = idx
	return nil
}
