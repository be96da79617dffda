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

	"github.com/drover-os/drover/image/finalize"
	"github.com/drover-os/drover/image/lock"
	"github.com/drover-os/drover/image/recipe"
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
	if _, err := excludedDebs(r, l); err != nil {
		return nil, err
	}
	p := &Plan{Recipe: r, Lock: l, OutDir: outDir, Finalize: finalize.Steps()}
	for _, s := range stages {
		p.Steps = append(p.Steps, s.name+": "+s.plan(p))
	}
	for _, f := range r.Image.Formats {
		p.Outputs = append(p.Outputs, r.Name+"."+f)
	}
	p.Outputs = append(p.Outputs, r.Name+".manifest.json", r.Name+".spdx.json", r.Name+".provenance.json")
	return p, nil
}

// cniStep says which of the packages' CNI plugins the build keeps.
func cniStep(p *Plan) string {
	r := p.Recipe
	plugins, named := r.CNIPlugins()
	from := "the default"
	if named {
		from = "cni.plugins"
	}
	list := strings.Join(plugins, " ")
	if len(plugins) == 0 {
		list = "none"
	}
	return fmt.Sprintf("of the plugins packages install in %s, if any, ship %s (%s); leave out the rest", recipe.CNIDir, list, from)
}

// removeStep counts the recipe's remove entries for the image's
// architecture.
func removeStep(p *Plan) string {
	r := p.Recipe
	n := 0
	for _, rm := range r.Remove {
		if rm.Applies(r.Arch) {
			n++
		}
	}
	s := fmt.Sprintf("%d recipe globs (each must match)", n)
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
