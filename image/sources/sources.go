// Package sources turns a recipe into a lock (resolve) and a lock into
// verified local files (fetch). It is the glue between the recipe, the
// Debian client, the Go component builder, the URL fetcher and the cache;
// each of those does its own checking.
package sources

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/drover-os/drover/image/ociimages"

	"github.com/drover-os/drover/image/cache"
	"github.com/drover-os/drover/image/debian"
	"github.com/drover-os/drover/image/fetch"
	"github.com/drover-os/drover/image/gomod"
	"github.com/drover-os/drover/image/lock"
	"github.com/drover-os/drover/image/recipe"
	"github.com/drover-os/drover/internal/bytesize"
)

// Options says where inputs come from and where progress goes.
type Options struct {
	Mirror string // archive root; resolved by the CLI from --mirror, DROVER_MIRROR or apt
	// SecurityMirror is the security archive's root, where the -security
	// suites are (--security-mirror, DROVER_SECURITY_MIRROR or apt);
	// SecurityMirrorErr says why there is none, for when a recipe needs it.
	SecurityMirror    string
	SecurityMirrorErr error
	Keyring           string // --keyring; else the recipe's, else the keys in recipes/keys (see TrustRoot)
	Cache             *cache.Cache
	HTTP              *http.Client
	Log               io.Writer
	Progress          bool // progress bars (a TTY)
	Parallel          int
	Go                gomod.Env
	// Toolchain is the Go toolchain to lock (drover lock --toolchain);
	// empty keeps the previous lock's, else takes the installed go's.
	Toolchain string
	// Refresh re-resolves every package from the signed archive even when
	// the recipe inputs and the Releases are the lock's (drover lock
	// --refresh): the shortcut keeps forged lines too.
	Refresh bool
	// AllowOlderRelease accepts a fresh Release dated before the one the
	// lock records for its suite (--allow-older-release); refused otherwise.
	AllowOlderRelease bool
	// RegistryMirrors say where the build host fetches the recipe's
	// cached images from (--registry-mirror, DROVER_REGISTRY_MIRRORS); a
	// host without one is asked itself.
	RegistryMirrors ociimages.Mirrors
}

func (o *Options) images() ociimages.Options {
	return ociimages.Options{Cache: o.Cache, Mirrors: o.RegistryMirrors, Log: o.Log}
}

func (o *Options) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format+"\n", args...)
	}
}

func (o *Options) fetcher() *fetch.Fetcher {
	return &fetch.Fetcher{Cache: o.Cache, HTTP: o.HTTP, Parallel: o.Parallel, Log: o.Log, Progress: o.Progress}
}

// oneFetcher adapts the fetcher to the Debian client's single-file Store.
type oneFetcher struct{ f *fetch.Fetcher }

func (s oneFetcher) Fetch(ctx context.Context, name, url, sha256 string, size int64) (string, error) {
	return s.f.FetchOne(ctx, name, url, sha256, size)
}

// Result is what a lock run found: the lock and the explanation of it.
type Result struct {
	Lock      *lock.Lock
	Unchanged bool // the previous lock still holds: same inputs, same signed Release
	Why       map[string]string
	Choices   []debian.Choice
	Suites    []*Suite // every suite's verified Release, in the recipe's order
}

// Archive is the root of the repository that carries suite: the security
// archive for a -security suite, the main mirror for the others.
func (o *Options) Archive(suite string) (string, error) {
	if !debian.IsSecuritySuite(suite) {
		if o.Mirror == "" {
			return "", fmt.Errorf("no Debian mirror for suite %s: pass --mirror, set %s or configure apt", suite, debian.MirrorEnv)
		}
		return o.Mirror, nil
	}
	if o.SecurityMirror == "" {
		if o.SecurityMirrorErr != nil {
			return "", fmt.Errorf("suite %s: %w", suite, o.SecurityMirrorErr)
		}
		return "", fmt.Errorf("no Debian security archive for suite %s: pass --security-mirror or set %s", suite, debian.SecurityMirrorEnv)
	}
	return o.SecurityMirror, nil
}

// Suite is one verified suite of a recipe: its signed Release, the trust
// root that verified it and the client of its archive.
type Suite struct {
	Name    string
	Release *debian.Release
	Trust   *TrustRoot
	Client  *debian.Client
}

// Locked is the lock's record of the suite.
func (s *Suite) Locked() lock.Suite {
	return lock.Suite{Name: s.Name, Date: s.Release.Date.UTC(), InRelease: s.Release.SHA256, Signer: s.Release.SignedBy, Trust: s.Trust.Source}
}

// Releases fetches and verifies the InRelease of every suite of the recipe,
// in the recipe's order, each against its own trust root, before anything
// else is fetched.
func Releases(ctx context.Context, r *recipe.Recipe, o Options) ([]*Suite, error) {
	var out []*Suite
	for _, name := range r.Debian.Suites {
		tr, err := o.TrustRoot(r, name)
		if err != nil {
			return nil, err
		}
		client, err := o.client(r, name, tr)
		if err != nil {
			return nil, err
		}
		rel, err := client.Release(ctx, name)
		if err != nil {
			return nil, err
		}
		if err := o.keepRelease(rel); err != nil {
			return nil, err
		}
		out = append(out, &Suite{Name: name, Release: rel, Trust: tr, Client: client})
	}
	return out, nil
}

// client is the Debian client of suite's archive, verifying with tr and
// fetching through the cache.
func (o *Options) client(r *recipe.Recipe, suite string, tr *TrustRoot) (*debian.Client, error) {
	root, err := o.Archive(suite)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.Path, err)
	}
	return &debian.Client{
		Mirror: root, HTTP: o.HTTP, Keyring: tr.Keys, KeyringPath: tr.Name,
		Store: oneFetcher{o.fetcher()}, IndexDir: filepath.Join(o.Cache.Dir(), "index"), Log: o.Log,
	}, nil
}

// Index merges the Packages indexes of every suite for the recipe's
// components and architecture, in the recipe's order: the resolver takes a
// package's highest version among them, and of equal versions the one of
// the earlier suite (the release before its updates), as apt does when the
// suites have the same priority.
func Index(ctx context.Context, r *recipe.Recipe, suites []*Suite) (*debian.Index, error) {
	var all []debian.Package
	var names []string
	for _, s := range suites {
		idx, err := s.Client.Index(ctx, s.Release, r.Debian.Components, r.Arch)
		if err != nil {
			return nil, err
		}
		all = append(all, idx.Packages...)
		names = append(names, s.Name)
	}
	return debian.NewIndex(strings.Join(names, ", "), r.Debian.Components, all), nil
}

// sameSuites reports whether prev pinned exactly these signed Releases,
// verified against the same trust roots.
func sameSuites(prev []lock.Suite, suites []*Suite) bool {
	if len(prev) != len(suites) {
		return false
	}
	for _, s := range suites {
		i := slices.IndexFunc(prev, func(p lock.Suite) bool { return p.Name == s.Name })
		want := s.Locked()
		if i < 0 || !prev[i].Date.Equal(want.Date) || prev[i].InRelease != want.InRelease || prev[i].Signer != want.Signer || prev[i].Trust != want.Trust {
			return false
		}
	}
	return true
}

// Lock resolves the recipe. prev is the existing lock, or nil. The signed
// InRelease of every suite is fetched and verified before anything else;
// when they and the recipe inputs are unchanged the previous lock is
// returned as is, so re-locking is cheap and changes nothing.
func Lock(ctx context.Context, r *recipe.Recipe, prev *lock.Lock, o Options) (*Result, error) {
	suites, err := Releases(ctx, r, o)
	if err != nil {
		return nil, err
	}
	if err := CheckReleaseDates(prev, suites, o); err != nil {
		return nil, err
	}
	inputs := r.InputsDigest()
	toolchain, err := lockToolchain(ctx, prev, o)
	if err != nil {
		return nil, err
	}
	o.Go.Toolchain = toolchain
	if !o.Refresh && prev != nil && prev.Inputs == inputs && sameSuites(prev.Suites, suites) && prev.Toolchain == toolchain {
		o.logf("lock: %s unchanged (same recipe inputs, same signed Releases of %s)", r.LockPath(), releaseDates(suites))
		return &Result{Lock: prev, Unchanged: true, Suites: suites}, nil
	}
	idx, err := Index(ctx, r, suites)
	if err != nil {
		return nil, err
	}
	closure, err := debian.Resolve(idx, r.Arch, r.Roots())
	if err != nil {
		return nil, fmt.Errorf("resolving %s: %w", r.Path, err)
	}
	l := &lock.Lock{Inputs: inputs, Toolchain: toolchain}
	for _, s := range suites {
		l.Suites = append(l.Suites, s.Locked())
	}
	for _, p := range closure.Packages {
		l.Debs = append(l.Debs, lock.Deb{Name: p.Name, Version: p.Version, Arch: p.Architecture, Size: p.Size, SHA256: p.SHA256, Suite: p.Suite, Path: p.Filename})
	}
	o.logf("lock: %d packages in the closure of %d requested (%s to download)", len(l.Debs), len(r.Roots()), bytesize.Format(closure.TotalSize()))
	if l.Go, err = lockGo(ctx, r, prev, o); err != nil {
		return nil, err
	}
	if l.URLs, err = lockURLs(ctx, r, o); err != nil {
		return nil, err
	}
	if l.Images, err = ociimages.Lock(ctx, r, o.images()); err != nil {
		return nil, err
	}
	l.Epoch = epoch(r, prev, l, suites)
	return &Result{Lock: l, Why: closure.Why, Choices: closure.Choices, Suites: suites}, nil
}

func releaseDates(suites []*Suite) string {
	var parts []string
	for _, s := range suites {
		parts = append(parts, s.Name+" "+s.Release.Date.UTC().Format("2006-01-02 15:04"))
	}
	return strings.Join(parts, ", ")
}

// epoch is the timestamp stamped on every file in the image: the recipe's
// if it sets one; else the previous lock's when the locked content did not
// change (so a newer Release alone does not change the image); else the
// newest of the signed Releases' dates.
func epoch(r *recipe.Recipe, prev, l *lock.Lock, suites []*Suite) int64 {
	if r.Epoch != 0 {
		return r.Epoch
	}
	if prev != nil && sameContent(prev, l) {
		return prev.Epoch
	}
	var newest int64
	for _, s := range suites {
		newest = max(newest, s.Release.Date.Unix())
	}
	return newest
}

func sameContent(a, b *lock.Lock) bool {
	strip := func(l *lock.Lock) string {
		c := *l
		c.Suites, c.Epoch, c.Inputs = nil, 0, ""
		return string(c.Format(""))
	}
	return strip(a) == strip(b)
}

// lockToolchain picks the Go toolchain the lock pins: the one asked for,
// else the previous lock's (a re-lock does not silently change the
// compiler), else the installed go's.
func lockToolchain(ctx context.Context, prev *lock.Lock, o Options) (string, error) {
	switch {
	case o.Toolchain != "":
		if !strings.HasPrefix(o.Toolchain, "go1.") {
			return "", fmt.Errorf("--toolchain %q: want a Go release such as go1.27.3", o.Toolchain)
		}
		return o.Toolchain, nil
	case prev != nil && prev.Toolchain != "":
		return prev.Toolchain, nil
	}
	v, err := gomod.GoVersion(ctx, o.Go)
	if err != nil {
		return "", fmt.Errorf("choosing the Go toolchain to lock: %w (or pass --toolchain go1.X.Y)", err)
	}
	o.logf("lock: pinning the installed Go toolchain %s (drover lock --toolchain go1.X.Y pins another)", v)
	return v, nil
}

// lockGo pins each Go component's module graph. A component whose module,
// version, package and replaces equal the previous lock's keeps its pins:
// resolving kubernetes' module graph again costs minutes and gives the
// same answer.
func lockGo(ctx context.Context, r *recipe.Recipe, prev *lock.Lock, o Options) ([]lock.Go, error) {
	var out []lock.Go
	for _, g := range r.Go {
		if g.Release == "kubernetes" {
			// Derived here, not in the recipe: the staging modules differ
			// between minors, and the module's go.mod says which they are.
			reps, err := gomod.KubernetesReplaces(ctx, o.Go, g.Version)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: go component %s: deriving the staging replaces of release: kubernetes: %w", g.From, g.Line, g.Name, err)
			}
			g.Replace = nil
			for _, rep := range reps {
				g.Replace = append(g.Replace, rep.String())
			}
		}
		if p := prevGo(prev, g); p != nil && p.Toolchain == o.Go.Toolchain {
			out = append(out, *p)
			continue
		}
		o.logf("lock: resolving Go component %s (%s@%s)", g.Name, g.Module, g.Version)
		c, err := Component(g)
		if err != nil {
			return nil, fmt.Errorf("%s: go component %s: %w", r.Path, g.Name, err)
		}
		locked, err := gomod.Lock(ctx, o.Go, c)
		if err != nil {
			return nil, fmt.Errorf("%s: go component %s: %w", r.Path, g.Name, err)
		}
		out = append(out, lock.Go{
			Name: g.Name, Module: g.Module, Version: g.Version, Package: g.Package, Toolchain: locked.GoVersion,
			GoMod: nonEmptyLines(locked.GoMod), Sum: locked.Sum,
		})
	}
	return out, nil
}

func prevGo(prev *lock.Lock, g recipe.GoComponent) *lock.Go {
	if prev == nil {
		return nil
	}
	for i, p := range prev.Go {
		if p.Name == g.Name && p.Module == g.Module && p.Version == g.Version && p.Package == g.Package && sameReplaces(p.GoMod, g.Replace) {
			return &prev.Go[i]
		}
	}
	return nil
}

func sameReplaces(gomodLines, replaces []string) bool {
	var have []string
	for _, l := range gomodLines {
		if r, ok := strings.CutPrefix(l, "replace "); ok {
			have = append(have, strings.Join(strings.Fields(r), " "))
		}
	}
	want := make([]string, 0, len(replaces))
	for _, r := range replaces {
		want = append(want, strings.Join(strings.Fields(r), " "))
	}
	sort.Strings(have)
	sort.Strings(want)
	return strings.Join(have, "\n") == strings.Join(want, "\n")
}

// Component converts a recipe Go component for the builder. A component
// with a release preset gets the release's version ldflags ahead of its
// own; release: kubernetes's replaces are derived when locking (lockGo),
// and the build takes them from the lock (LockedComponent).
func Component(g recipe.GoComponent) (gomod.Component, error) {
	c := gomod.Component{Name: g.Name, Module: g.Module, Version: g.Version, Package: g.Package, Ldflags: g.Ldflags, Tags: g.Tags}
	if g.Release != "" {
		ld, err := gomod.ReleaseLdflags(g.Release, g.Version)
		if err != nil {
			return c, err
		}
		c.Ldflags = append(ld, g.Ldflags...)
	}
	for _, line := range g.Replace {
		old, rest, _ := strings.Cut(line, "=>")
		of := strings.Fields(old)
		nf := strings.Fields(rest)
		if len(of) == 0 || len(nf) != 2 {
			return c, fmt.Errorf("replace %q: want 'old => new version'", line)
		}
		c.Replace = append(c.Replace, gomod.Replace{Old: of[0], New: nf[0], Version: nf[1]})
	}
	return c, nil
}

// Locked is what the builder builds for recipe component g as lock entry
// lg pins it: a release: kubernetes component's replaces are the lock's
// go.mod replace lines, the ones lockGo derived.
func Locked(g recipe.GoComponent, lg lock.Go) (*gomod.Locked, error) {
	if g.Release == "kubernetes" {
		g.Replace = nil
		for _, l := range lg.GoMod {
			if r, ok := strings.CutPrefix(l, "replace "); ok {
				g.Replace = append(g.Replace, r)
			}
		}
	}
	c, err := Component(g)
	if err != nil {
		return nil, fmt.Errorf("%s:%d: go component %s: %w", g.From, g.Line, g.Name, err)
	}
	return &gomod.Locked{Component: c, GoMod: gomod.GoModFromLines(lg.GoMod), Sum: lg.Sum, GoVersion: lg.Toolchain}, nil
}

func nonEmptyLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// lockURLs fetches every URL component into the cache, which checks it
// against the recipe's sha256: a 404 or a mismatch fails the lock.
func lockURLs(ctx context.Context, r *recipe.Recipe, o Options) ([]lock.URL, error) {
	var out []lock.URL
	for _, u := range r.URLs {
		path, err := o.fetcher().FetchOne(ctx, u.Name, u.URL, u.SHA256, 0)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: url component %s: %w", u.From, u.Line, u.Name, err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("url component %s: %w", u.Name, err)
		}
		out = append(out, lock.URL{Name: u.Name, SHA256: u.SHA256, Size: fi.Size(), URL: u.URL})
	}
	return out, nil
}
