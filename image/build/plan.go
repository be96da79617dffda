// Package build turns a recipe and its lock into a bootable disk image: it
// plans the build as a printable value (`drover build --plan`), then runs
// it: fetch, Go components, assemble, finalize, erofs, verity, initrd, ESP,
// GPT, output formats, manifest. Outputs appear in the output directory only
// when every step succeeded.
package build

import (
	"fmt"
	"strings"
	"time"

	"github.com/drover-os/drover/image/esp"
	"github.com/drover-os/drover/image/finalize"
	"github.com/drover-os/drover/image/lock"
	"github.com/drover-os/drover/image/recipe"
	"github.com/drover-os/drover/internal/bytesize"
)

// InitrdModules are the kernel modules drover-init loads, by name: block
// devices (virtio-blk, virtio-scsi, NVMe), device-mapper + verity, and the
// filesystems it mounts, and efivarfs, through which it reads whether
// Secure Boot was on. Modules the kernel has built in are skipped.
//
// crypto-sha256 is the alias of the CPU's SHA-256 implementations
// (sha256_ssse3 on amd64: SHA-NI, AVX2, AVX, SSSE3; sha2_ce on arm64). It
// is loaded before dm_verity's target is created: dm-verity picks the best
// implementation registered at that moment, and without it every block the
// node reads is hashed by sha256-generic for the whole uptime (the kernel
// says which: "device-mapper: verity: sha256 using shash ...").
//
// virtio_net is not needed to mount anything: it is every ECS family's ENI
// driver, and loaded here the interface exists before systemd starts. Left
// to udev, it is loaded from the coldplug queue behind every other
// device's module (CPU crypto, ACPI, storage), so DHCP, and with it the
// agent's metadata fetch, waited seconds for it under emulation.
var InitrdModules = []string{
	"virtio_pci", "virtio_blk", "virtio_scsi", "sd_mod", "nvme", "virtio_net",
	"crypto-sha256", "dm_mod", "dm_verity", "erofs", "overlay", "ext4", "crc32c_generic", "efivarfs",
}

// InitrdReadAhead are the files drover-init starts reading before it
// hands over to systemd (boot.Config.ReadAhead): the agent's binary, so
// the first service the node runs does not fault it in page by page
// through dm-verity while systemd's early units compete for the CPU.
var InitrdReadAhead = []string{"/usr/bin/drover-agent"}

// Plan is what a build will do, computed from the recipe and lock alone.
type Plan struct {
	Recipe   *recipe.Recipe
	Lock     *lock.Lock
	OutDir   string
	Outputs  []string
	Steps    []string
	Finalize []finalize.Step
}

// NewPlan checks the lock against the recipe and lists the steps.
func NewPlan(r *recipe.Recipe, l *lock.Lock, outDir string) (*Plan, error) {
	if err := l.CheckFresh(r.Path, r.InputsDigest()); err != nil {
		return nil, err
	}
	excluded, err := excludedDebs(r, l)
	if err != nil {
		return nil, err
	}
	p := &Plan{Recipe: r, Lock: l, OutDir: outDir, Finalize: finalize.Steps()}
	var debBytes int64
	for _, d := range l.Debs {
		debBytes += d.Size
	}
	p.Steps = []string{
		fmt.Sprintf("fetch %d packages (%s) and %d URL components into the verified cache, once every deb line is in the signed Packages index of the InRelease the lock pins for its suite", len(l.Debs), bytesize.Format(debBytes), len(l.URLs)),
	}
	for _, g := range l.Go {
		p.Steps = append(p.Steps, fmt.Sprintf("go build %s (%s@%s, %d modules pinned) CGO_ENABLED=0 -trimpath", g.Package, g.Module, g.Version, len(g.Sum)))
	}
	p.Steps = append(p.Steps,
		fmt.Sprintf("assemble: stream %d data.tar into the in-memory tree (%d excluded packages into a tree of their own)", len(l.Debs)-len(excluded), len(excluded)),
		cniStep(r),
		"add: Go components, URL components, recipe files, drover-agent and its units, drover-init",
		removeStep(r),
		"finalize: "+stepNames(p.Finalize),
		"needs: no ELF interpreter or DT_NEEDED library, #! interpreter, enabled unit's Exec*=/PAMName= or PAM module is only in a left-out path",
		"kmod-index: modules.dep/alias/symbols(.bin) from the modules' .modinfo",
		"rootfs: "+rootfsStep(r.Image.RootFS)+", every timestamp "+epochString(l.Epoch),
		"verity: sha256 hash tree, 4096-byte blocks, salt derived from content",
		"initrd: drover-init + modules "+strings.Join(InitrdModules, " ")+" (those not built in)",
		"uki: systemd-stub + .osrel .cmdline .uname .initrd .linux, cmdline "+KernelCmdline(r.Cmdline, "<root hash>")+
			fmt.Sprintf("; SBAT entry %s,%d appended to the stub's .sbat", SBATComponent, r.SecureBoot.SBATGeneration),
		"esp: FAT32 "+r.Image.ESPSize+": systemd-boot, loader.conf (timeout 0), the UKI as "+esp.UKIPath+" (Boot Loader Specification type #2)",
		"disk: GPT esp + root + root-verity (DPS types, UUIDs from the root hash); var is created on first boot",
	)
	for _, f := range r.Image.Formats {
		p.Outputs = append(p.Outputs, r.Name+"."+f)
	}
	p.Outputs = append(p.Outputs, r.Name+".manifest.json", r.Name+".spdx.json", r.Name+".provenance.json")
	return p, nil
}

// cniStep says which of the packages' CNI plugins the build keeps.
func cniStep(r *recipe.Recipe) string {
	plugins, named := r.CNIPlugins()
	from := "the default"
	if named {
		from = "cni.plugins"
	}
	list := strings.Join(plugins, " ")
	if len(plugins) == 0 {
		list = "none"
	}
	return fmt.Sprintf("cni: of the plugins packages install in %s, if any, ship %s (%s); leave out the rest", recipe.CNIDir, list, from)
}

// removeStep counts the recipe's remove entries for the image's
// architecture.
func removeStep(r *recipe.Recipe) string {
	n := 0
	for _, rm := range r.Remove {
		if rm.Applies(r.Arch) {
			n++
		}
	}
	s := fmt.Sprintf("remove: %d recipe globs (each must match)", n)
	if other := len(r.Remove) - n; other > 0 {
		s += fmt.Sprintf("; %d for another architecture skipped", other)
	}
	return s
}

// rootfsStep says how the root is written.
func rootfsStep(fs recipe.RootFS) string {
	if fs.Compression == "" || fs.Compression == "none" {
		return "erofs"
	}
	return fmt.Sprintf("erofs, regular files %s-compressed in %s extents (image/erofsz; kept in the cache by content)",
		fs.Compression, fs.ExtentSize)
}

func stepNames(steps []finalize.Step) string {
	names := make([]string, len(steps))
	for i, s := range steps {
		names[i] = s.String()
	}
	return strings.Join(names, ", ")
}

// String prints the plan for `drover build --plan`.
func (p *Plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "recipe  %s (sha256 %s)\n", p.Recipe.Path, p.Recipe.Digest())
	fmt.Fprintf(&b, "lock    %s (%d packages, %d Go components, %d URL components, epoch %s)\n",
		p.Recipe.LockPath(), len(p.Lock.Debs), len(p.Lock.Go), len(p.Lock.URLs), epochString(p.Lock.Epoch))
	b.WriteString("steps\n")
	for i, s := range p.Steps {
		fmt.Fprintf(&b, "  %2d. %s\n", i+1, s)
	}
	b.WriteString("finalize steps\n")
	for _, s := range p.Finalize {
		fmt.Fprintf(&b, "      %-13s %s\n", s.String(), s.Why())
	}
	b.WriteString("outputs\n")
	for _, o := range p.Outputs {
		fmt.Fprintf(&b, "      %s/%s\n", strings.TrimSuffix(p.OutDir, "/"), o)
	}
	return b.String()
}

func epochString(e int64) string {
	return time.Unix(e, 0).UTC().Format(time.RFC3339)
}
