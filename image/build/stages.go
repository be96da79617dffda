package build

import (
	"context"
	"fmt"
	"strings"

	"github.com/drover-os/drover/image/esp"
	"github.com/drover-os/drover/image/sources"
	"github.com/drover-os/drover/internal/bytesize"
)

// stage is one step of a build. The list below is the only one: Build runs
// and times the stages in this order under their names (the log's
// "build: NAME done in", Result.Timings), and --plan prints each one's
// name and plan line (NewPlan), so the two cannot disagree. The image is
// written one artifact per stage, from the root file system to the disk.
type stage struct {
	name string
	// plan says what the stage will do, from the recipe and lock alone.
	plan func(p *Plan) string
	run  func(b *builder, ctx context.Context) error
	// only, when set, runs the stage for some builds only (its plan line
	// says which).
	only func(o Options) bool
}

var stages = []stage{
	{name: "fetch", plan: func(p *Plan) string {
		var debBytes int64
		for _, d := range p.Lock.Debs {
			debBytes += d.Size
		}
		var imageBytes int64
		for _, im := range p.Lock.Images {
			imageBytes += im.Size
		}
		return fmt.Sprintf("%d packages (%s), %d URL components and %d cached images (%s) into the verified cache, once every deb line is in the signed Packages index of the InRelease the lock pins for its suite",
			len(p.Lock.Debs), bytesize.Format(debBytes), len(p.Lock.URLs), len(p.Lock.Images), bytesize.Format(imageBytes))
	}, run: func(b *builder, ctx context.Context) (err error) {
		if b.fetched, err = sources.Fetch(ctx, b.p.Recipe, b.p.Lock, b.o.Sources); err != nil {
			return err
		}
		b.man.Inputs = recipeInputs(b.p.Recipe, b.fetched.Keyrings)
		return b.describeRecipeTree(ctx)
	}},
	{name: "assemble", plan: func(p *Plan) string {
		excluded, _ := excludedDebs(p.Recipe, p.Lock) // NewPlan checked it
		return fmt.Sprintf("stream %d data.tar into the in-memory tree (%d excluded packages into a tree of their own)", len(p.Lock.Debs)-len(excluded), len(excluded))
	}, run: func(b *builder, _ context.Context) error { return b.assemble(b.fetched) }},
	{name: "cni plugins", plan: cniStep, run: func(b *builder, _ context.Context) error { return b.chooseCNIPlugins() }},
	{name: "package facts", plan: func(*Plan) string {
		return "each package's source package, the image's packages it depends on and its copyright file's licenses (manifest, SBOMs)"
	}, run: func(b *builder, _ context.Context) error { return b.packageFacts(b.fetched) }},
	{name: "go components", plan: func(p *Plan) string {
		if len(p.Lock.Go) == 0 {
			return "none"
		}
		var builds []string
		for _, g := range p.Lock.Go {
			builds = append(builds, fmt.Sprintf("go build %s (%s@%s, %d modules pinned)", g.Package, g.Module, g.Version, len(g.Sum)))
		}
		return strings.Join(builds, "; ") + "; CGO_ENABLED=0 -trimpath, the lock's toolchain, cached by their inputs"
	}, run: func(b *builder, ctx context.Context) error { return b.goComponents(ctx) }},
	{name: "drover binaries", plan: func(*Plan) string {
		return "drover-agent and drover-init built from this checkout with the lock's toolchain (or --agent/--init)"
	}, run: func(b *builder, ctx context.Context) error { return b.droverBinaries(ctx) }},
	{name: "credential providers", plan: func(p *Plan) string {
		if len(p.Recipe.CredentialProviders) == 0 {
			return "none (no credentialProviders)"
		}
		return "the kubelet image credential providers " + strings.Join(p.Recipe.CredentialProviders, ", ") + " built from this checkout with the lock's toolchain"
	}, run: func(b *builder, ctx context.Context) error { return b.credentialProviderBinaries(ctx) }},
	{name: "sandbox image", plan: func(p *Plan) string {
		if p.Recipe.Sandbox.Digest == "" {
			return "none (no sandbox.digest)"
		}
		return "the pod sandbox image from cmd/drover-pause, its index digest " + p.Recipe.Sandbox.Digest + " or the build fails"
	}, run: func(b *builder, ctx context.Context) error { return b.sandboxImage(ctx) }},
	{name: "cached images", plan: func(p *Plan) string {
		if len(p.Recipe.Images) == 0 {
			return "none (no images)"
		}
		var root, disk int
		for _, im := range p.Recipe.Images {
			if im.Location == "disk" {
				disk++
			} else {
				root++
			}
		}
		return fmt.Sprintf("%d workload images from the verified cache as an OCI layout in the root (%s), %d on the cache disk image %s", root, "/usr/lib/drover/image-cache", disk, DiskImageFile(p.Recipe.Name))
	}, run: func(b *builder, _ context.Context) error { return b.cachedImages() }},
	{name: "release check", plan: func(*Plan) string {
		return "with --release only: refuse a builder or drover binary from an unknown or modified source, before anything is written"
	}, run: func(b *builder, _ context.Context) error { return b.man.checkRelease() },
		only: func(o Options) bool { return o.Release }},
	{name: "add files", plan: func(*Plan) string {
		return "URL components, recipe files, drover-agent and its units, drover-init"
	}, run: func(b *builder, _ context.Context) error { return b.addFiles(b.fetched) }},
	{name: "remove paths", plan: removeStep, run: func(b *builder, _ context.Context) error { return b.removePaths() }},
	{name: "finalize", plan: func(p *Plan) string {
		return "kmod-index (modules.dep/alias/symbols(.bin) from the modules' .modinfo), " + stepNames(p.Finalize)
	}, run: func(b *builder, _ context.Context) error { return b.finalize() }},
	{name: "needs", plan: func(*Plan) string {
		return "no ELF interpreter or DT_NEEDED library, #! interpreter, enabled unit's Exec*=/PAMName= or PAM module is only in a left-out path"
	}, run: func(b *builder, _ context.Context) error { return b.checkNeeds() }},
	{name: "changelogs", plan: func(*Plan) string {
		return "each package's latest changelog entries, from the .debs, into the manifest"
	}, run: func(b *builder, ctx context.Context) error { return b.recordChangelogs(ctx) }},
	{name: "rootfs", plan: func(p *Plan) string {
		return rootfsStep(p.Recipe.Image.RootFS) + ", every timestamp " + epochString(p.Lock.Epoch)
	}, run: func(b *builder, _ context.Context) error { return b.writeRoot() }},
	{name: "verity", plan: func(*Plan) string {
		return "sha256 hash tree, 4096-byte blocks, salt derived from content"
	}, run: func(b *builder, _ context.Context) error { return b.writeVerity() }},
	{name: "initrd", plan: func(*Plan) string {
		return "drover-init + modules " + strings.Join(InitrdModules, " ") + " (those not built in)"
	}, run: func(b *builder, _ context.Context) error { return b.writeInitrd() }},
	{name: "uki", plan: func(p *Plan) string {
		return "systemd-stub + .osrel .cmdline .uname .initrd .linux, cmdline " + KernelCmdline(p.Recipe.Cmdline, "<root hash>") +
			fmt.Sprintf("; SBAT entry %s,%d appended to the stub's .sbat; systemd-boot", SBATComponent, p.Recipe.SecureBoot.SBATGeneration)
	}, run: func(b *builder, _ context.Context) error { return b.writeUKI() }},
	{name: "esp", plan: func(p *Plan) string {
		return "FAT32 " + p.Recipe.Image.ESPSize + ": systemd-boot, loader.conf (timeout 0), the UKI as " + esp.UKIPath + " (Boot Loader Specification type #2)"
	}, run: func(b *builder, _ context.Context) error { return b.writeESP() }},
	{name: "disk", plan: func(*Plan) string {
		return "GPT esp + root + root-verity (DPS types, UUIDs from the root hash); var is created on first boot"
	}, run: func(b *builder, _ context.Context) error { return b.writeDisk() }},
	{name: "formats", plan: func(p *Plan) string {
		return strings.Join(p.Recipe.Image.Formats, ", ") + " from the raw disk"
	}, run: func(b *builder, _ context.Context) error { return b.formats(&b.art.disk) }},
	{name: "manifest", plan: func(*Plan) string {
		return "the manifest, SPDX and CycloneDX SBOMs and the provenance statement (DSSE-signed with --sign-key)"
	}, run: func(b *builder, _ context.Context) error { return b.writeManifest(&b.art.disk) }},
}
