package build

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/drover-os/drover/agent/units"
	"github.com/drover-os/drover/image/arch"
	"github.com/drover-os/drover/image/authenticode"
	"github.com/drover-os/drover/image/deb"
	"github.com/drover-os/drover/image/finalize"
	"github.com/drover-os/drover/image/gomod"
	"github.com/drover-os/drover/image/kmod"
	"github.com/drover-os/drover/image/sources"
	"github.com/drover-os/drover/image/tree"
	"github.com/drover-os/drover/internal/bytesize"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

// Options are the build's inputs besides the plan.
type Options struct {
	Sources sources.Options
	// Source is the checkout drover-agent and drover-init are built from
	// with the lock's toolchain. AgentBin and InitBin, when both set,
	// override that with given binaries (recorded as such in the manifest).
	Source            *gomod.Source
	AgentBin, InitBin string
	// PauseBins override the sandbox image's pause program, built from
	// Source otherwise: goarch → binary file, one per oci.Arches, for a
	// caller that has them built (the build's own tests, which have no
	// toolchain to build with); the manifest records the override.
	PauseBins map[string]string
	// ProviderBins override the recipe's credential providers, built
	// from Source otherwise: name (recipe credentialProviders) → binary
	// file, for the same callers as PauseBins.
	ProviderBins map[string]string
	Version      string // builder version, for the manifest
	// BuilderSource is what is known of the source the builder itself was
	// compiled from (never clean by default).
	BuilderSource gomod.SourceState
	// Release refuses, before any output is written, a build whose
	// builder or own binaries are not from a known, clean commit.
	Release bool
	Log     io.Writer
	// Signer, when set, signs the provenance statement into a DSSE
	// envelope (<name>.provenance.dsse.json); see image/attest.
	Signer dsse.Signer
	// SecureBoot, when set, signs systemd-boot and the UKI; unsigned
	// images are the default.
	SecureBoot *authenticode.Signer
	// SecureBootEnroll puts the signer's certificate on the ESP as PK, KEK
	// and db for systemd-boot to enrol in firmware that is in setup mode.
	SecureBootEnroll bool
}

// Result describes a finished build.
type Result struct {
	Manifest *Manifest
	Outputs  []string // paths
	Timings  []Timing
}

// Timing is how long a build stage took.
type Timing struct {
	Stage string
	Took  time.Duration
}

type builder struct {
	p       *Plan
	o       Options
	epoch   time.Time
	tree    *tree.Tree
	man     *Manifest
	timings []Timing
	tmp     string
	// taken from the tree for the ESP and initrd
	kernel, systemdBoot, stub []byte
	arch                      arch.Arch // the recipe's
	modules                   *kmod.Index
	// leftOut maps each path of an excluded package or a remove entry to
	// what left it out, for the needs check.
	leftOut map[string]string
	own     []*ownBinary // drover-agent, drover-init, the credential providers
	// changelogs are the packages' changelogs, read while unpacking
	// though the image leaves them out.
	changelogs *changelogFiles
	fetched    *sources.Fetched // the fetch stage's
	art        artifacts        // the image's, stage by stage
}

func (b *builder) logf(format string, args ...any) {
	if b.o.Log != nil {
		fmt.Fprintf(b.o.Log, format+"\n", args...)
	}
}

func (b *builder) stage(name string, fn func() error) error {
	start := time.Now()
	b.logf("build: %s …", name)
	if err := fn(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	took := time.Since(start)
	b.timings = append(b.timings, Timing{name, took})
	b.logf("build: %s done in %s", name, took.Round(time.Millisecond))
	return nil
}

// Build runs the plan. Outputs are written into a temporary directory
// inside OutDir and renamed into place at the end.
func Build(ctx context.Context, p *Plan, o Options) (*Result, error) {
	if err := os.MkdirAll(p.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating output directory: %w", err)
	}
	tmp, err := os.MkdirTemp(p.OutDir, ".drover-build-")
	if err != nil {
		return nil, fmt.Errorf("creating work directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	a, err := arch.Lookup(p.Recipe.Arch)
	if err != nil {
		return nil, fmt.Errorf("recipe %s: %w", p.Recipe.Path, err)
	}
	b := &builder{p: p, o: o, epoch: time.Unix(p.Lock.Epoch, 0).UTC(), tree: tree.New(), tmp: tmp, arch: a, changelogs: newChangelogFiles()}
	b.tree.Prefer = p.Recipe.Prefer
	b.man = newManifest(p, o.Version)
	b.man.BuilderSource = o.BuilderSource.Known()

	defer b.art.close()
	for _, s := range stages {
		if s.only != nil && !s.only(o) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := b.stage(s.name, func() error { return s.run(b, ctx) }); err != nil {
			return nil, err
		}
	}
	outs, err := b.publish()
	if err != nil {
		return nil, err
	}
	return &Result{Manifest: b.man, Outputs: outs, Timings: b.timings}, nil
}

// assemble streams every .deb but the excluded ones into the tree, in lock
// (name) order; the excluded ones go to a tree of their own.
func (b *builder) assemble(f *sources.Fetched) error {
	excluded, err := excludedDebs(b.p.Recipe, b.p.Lock)
	if err != nil {
		return err
	}
	kept := map[string]string{}
	order := make([]string, 0, len(f.Debs))
	for name, p := range f.Debs {
		if _, ok := excluded[name]; !ok {
			kept[name] = p
			order = append(order, name)
		}
	}
	sort.Strings(order)
	opt := deb.Options{Skip: skipDuringExtract, Unpacked: unpacked{b.o.Sources.Cache}, Aside: b.changelogs}
	if err := deb.ExtractAll(kept, order, b.tree, opt, 4); err != nil {
		return err
	}
	b.logf("build: %d packages assembled: %d paths, %s", len(order), b.tree.Len(), bytesize.Format(b.tree.Size()))
	return b.assembleExcluded(f, excluded)
}

// skipDuringExtract drops what the strip step would remove anyway, so it
// never takes memory. Copyright files are kept; changelogs are set aside
// for the manifest (changelogFiles).
func skipDuringExtract(p string) bool {
	for _, pre := range []string{"/usr/share/man/", "/usr/share/info/", "/usr/share/locale/", "/usr/share/lintian/"} {
		if strings.HasPrefix(p, pre) {
			return true
		}
	}
	return strings.HasPrefix(p, "/usr/share/doc/") && !strings.HasSuffix(p, "/copyright") && strings.Count(p, "/") > 4
}

// goComponents builds each locked Go component (cached) and installs it.
func (b *builder) goComponents(ctx context.Context) error {
	for _, lg := range b.p.Lock.Go {
		rg := b.p.Recipe.GoComponent(lg.Name)
		if rg == nil {
			return fmt.Errorf("go component %s is in the lock but not the recipe: run drover lock", lg.Name)
		}
		locked, err := sources.Locked(*rg, lg)
		if err != nil {
			return err
		}
		env, err := b.goEnv(ctx)
		if err != nil {
			return err
		}
		bin, cached, err := gomod.BuildCached(ctx, env, b.o.Sources.Cache, locked, "linux", b.arch.GOARCH)
		if err != nil {
			return fmt.Errorf("go component %s: %w", lg.Name, err)
		}
		data, err := os.ReadFile(bin.Path)
		if err != nil {
			return err
		}
		how := "built"
		if cached {
			how = "cached"
		}
		b.logf("build: go component %s %s (%s, sha256 %s)", lg.Name, how, bytesize.Format(bin.Size), bin.SHA256[:12])
		if err := b.tree.Set(&tree.Node{Path: rg.Install, Kind: tree.Regular, Mode: 0o755, Data: data, Owner: "go:" + lg.Name}); err != nil {
			return err
		}
		b.man.addGo(lg, bin, rg.Install)
	}
	return nil
}

// addFiles installs URL components, the recipe's files and drover's own
// binaries and units.
func (b *builder) addFiles(f *sources.Fetched) error {
	for _, u := range b.p.Recipe.URLs {
		data, err := urlContent(f.URLs[u.Name], u.Member)
		if err != nil {
			return fmt.Errorf("url component %s: %w", u.Name, err)
		}
		if err := b.tree.Set(&tree.Node{Path: u.Install, Kind: tree.Regular, Mode: u.Mode, Data: data, Owner: "url:" + u.Name}); err != nil {
			return err
		}
	}
	for _, rf := range b.p.Recipe.Files {
		data := []byte(rf.Content)
		if rf.Source != "" {
			var err error
			if data, err = os.ReadFile(filepath.Join(b.p.Recipe.Dir, rf.Source)); err != nil {
				return fmt.Errorf("%s:%d: file %s: %w", rf.From, rf.Line, rf.Path, err)
			}
			b.man.Inputs = addInput(b.man.Inputs, InputFile{Name: inputName(b.p.Recipe, filepath.Join(b.p.Recipe.Dir, rf.Source)), Role: "file", SHA256: sha(data)})
		}
		if err := b.tree.Set(&tree.Node{Path: rf.Path, Kind: tree.Regular, Mode: rf.Mode, Data: data, Owner: "recipe"}); err != nil {
			return err
		}
	}
	for _, own := range b.own {
		if own.initrd {
			continue
		}
		if err := b.tree.Set(&tree.Node{Path: own.dst, Kind: tree.Regular, Mode: 0o755, Data: own.data, Owner: "drover"}); err != nil {
			return err
		}
	}
	ents, err := units.FS.ReadDir(".")
	if err != nil {
		return err
	}
	for _, e := range ents {
		data, _ := units.FS.ReadFile(e.Name())
		if err := b.tree.Set(&tree.Node{Path: units.Dir + "/" + e.Name(), Kind: tree.Regular, Mode: 0o644, Data: data, Owner: "drover"}); err != nil {
			return err
		}
	}
	return nil
}

func (b *builder) finalize() error {
	kver, err := kernelVersion(b.tree)
	if err != nil {
		return err
	}
	b.man.Kernel = kver
	steps := append([]finalize.Step{kmodStep{kver: kver, index: &b.modules, cache: keyed{b.o.Sources.Cache}}}, finalize.Steps()...)
	// The kernel and systemd-boot must be taken, and the kernel's config
	// read, before strip empties /boot.
	if err := b.takeBootFiles(kver); err != nil {
		return err
	}
	if err := kernelReads(b.tree.Get("/boot/config-"+kver), kver, b.p.Recipe.Image.RootFS.Compression); err != nil {
		return err
	}
	env := &finalize.Env{Name: b.p.Recipe.Name, Version: b.epoch.Format("20060102.150405"), BuildID: b.buildID(), Source: b.ownSource(),
		Epoch: b.epoch, Kernel: kver, Arch: b.p.Recipe.Arch, Enable: b.p.Recipe.Units.Enable, Disable: b.p.Recipe.Units.Disable, Mask: b.p.Recipe.Units.Mask, Log: b.o.Log}
	return finalize.Run(b.tree, env, steps)
}

// buildID names the inputs: lock and recipe digests and drover's own
// binaries (built from the checkout, so not in the lock).
func (b *builder) buildID() string {
	h := sha256.New()
	h.Write(b.p.Lock.Format(""))
	h.Write(b.p.Recipe.Raw)
	for _, s := range b.p.Recipe.Sources[min(1, len(b.p.Recipe.Sources)):] {
		h.Write(s.Raw) // an overlay's bases
	}
	for _, o := range b.man.Own {
		h.Write([]byte(o.Path + " " + o.SHA256 + "\n"))
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func kernelVersion(t *tree.Tree) (string, error) {
	var found []string
	for _, p := range t.Glob("/usr/lib/modules/*") {
		if t.Get(p).Kind == tree.Dir {
			found = append(found, filepath.Base(p))
		}
	}
	if len(found) != 1 {
		return "", fmt.Errorf("want exactly one kernel in /usr/lib/modules, found %v: check the recipe's kernel", found)
	}
	return found[0], nil
}
