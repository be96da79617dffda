package build

import (
	"context"
	"fmt"
	"os"

	"github.com/drover-os/drover/image/gomod"
)

// DroverModule is the module drover-agent and drover-init are built from.
const DroverModule = "github.com/drover-os/drover"

// InitPath is drover-init's path in the initrd (its /init links to it),
// and its name in the manifest, the SBOMs and the provenance.
const InitPath = "/usr/lib/drover/drover-init"

// ownBinary is drover-agent or drover-init, built or given.
type ownBinary struct {
	pkg, dst string // package in DroverModule, path in the image
	data     []byte
	// initrd: the binary is in the initrd only, at dst with /init a
	// symlink to it. drover-init runs before the root is mounted and
	// never from it, so the root does not carry a copy (3 MiB).
	initrd bool
}

// goEnv is the go command environment with the lock's toolchain: every Go
// binary of the image is built by exactly that toolchain, whatever go is
// installed or GOTOOLCHAIN the caller exported.
//
// The first call records the toolchain's facts (where it came from, the
// go binary's sha256) for the provenance.
func (b *builder) goEnv(ctx context.Context) (gomod.Env, error) {
	env := b.o.Sources.Go
	if b.p.Lock.Toolchain == "" {
		return env, fmt.Errorf("lock %s names no Go toolchain (it predates drover pinning one): run `drover lock %s`", b.p.Recipe.LockPath(), b.p.Recipe.Path)
	}
	env.Toolchain = b.p.Lock.Toolchain
	return env, b.recordToolchain(ctx, env)
}

// droverBinaries builds drover-agent and drover-init from the checkout
// (Options.Source) with the lock's toolchain, or reads the binaries given
// with --agent/--init, which the manifest records as an override.
func (b *builder) droverBinaries(ctx context.Context) error {
	bins := []*ownBinary{{pkg: "./cmd/drover-agent", dst: "/usr/bin/drover-agent"}, {pkg: "./cmd/drover-init", dst: InitPath, initrd: true}}
	given := []string{b.o.AgentBin, b.o.InitBin}
	if (given[0] == "") != (given[1] == "") {
		return fmt.Errorf("--agent and --init override drover's own binaries together: pass both, or neither to build them from the checkout")
	}
	for i, ob := range bins {
		var how OwnSource
		if given[i] != "" {
			data, err := os.ReadFile(given[i])
			if err != nil {
				return fmt.Errorf("drover's own binary %s: %w (pass an existing file, or neither --agent nor --init to build them from the checkout)", ob.dst, err)
			}
			ob.data, how = data, OwnSource{Built: "override", From: given[i]}
		} else {
			if b.o.Source == nil {
				return fmt.Errorf("no checkout of %s to build %s from: run drover from its checkout, or pass --agent and --init", DroverModule, ob.dst)
			}
			var err error
			if ob.data, how, err = b.buildOwn(ctx, ob.pkg, ob.dst, b.arch.GOARCH); err != nil {
				return err
			}
		}
		b.man.addOwn(ob.dst, ob.data, how)
		if ob.initrd {
			b.man.Own[len(b.man.Own)-1].In = "initrd"
		}
	}
	b.own = bins
	return nil
}

// ownSource is what os-release says about drover's own binaries: the
// checkout's module@commit, +dirty when any of them is.
func (b *builder) ownSource() string {
	var src *gomod.Source
	for _, o := range b.man.Own {
		if o.Built == "override" {
			return "override"
		}
		if o.Source != nil && (src == nil || o.Source.Dirty()) {
			src = o.Source
		}
	}
	if src == nil {
		return ""
	}
	return src.String()
}

// ownStore is where drover's own binaries built from the checkout are kept
// by their inputs (gomod.BuildLocal): the build's cache, or none.
func (b *builder) ownStore() gomod.BlobStore {
	if b.o.Sources.Cache == nil {
		return nil
	}
	return b.o.Sources.Cache
}

// buildOwn builds pkg of the checkout for goarch with the lock's toolchain
// (kept in the cache by its inputs) and returns its bytes and how it was
// built; dst names it in errors and the log.
func (b *builder) buildOwn(ctx context.Context, pkg, dst, goarch string) ([]byte, OwnSource, error) {
	if b.o.Source == nil {
		return nil, OwnSource{}, fmt.Errorf("no checkout of %s to build %s (%s) from: run drover from its checkout", DroverModule, dst, pkg)
	}
	env, err := b.goEnv(ctx)
	if err != nil {
		return nil, OwnSource{}, err
	}
	bin, err := gomod.BuildLocal(ctx, env, b.ownStore(), b.o.Source, pkg, "linux", goarch, b.tmp)
	if err != nil {
		return nil, OwnSource{}, err
	}
	data, err := os.ReadFile(bin.Path)
	os.Remove(bin.Path) // the image holds it; it is not an output
	if err != nil {
		return nil, OwnSource{}, err
	}
	b.logf("build: %s built from %s with %s (sha256 %s)", dst, bin.Source, bin.GoVersion, bin.SHA256[:12])
	// The source state is the binary's: its commit, and dirty when a file
	// it is compiled from is not that commit's.
	return data, OwnSource{Built: "source", Source: bin.Source}, nil
}
