package gomod

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
)

// Build compiles l for goos/goarch in a temp module recreated from l.GoMod
// and l.Sum. Only module zips pinned by go.sum are fetched. The binary is
// reproducible: -trimpath, -buildvcs=false, CGO_ENABLED=0 and a fixed
// environment make two builds with the same toolchain bit-identical.
//
// The binary lives in a temp directory under env.WorkDir; call
// Binary.Cleanup when done with it.
func Build(ctx context.Context, env Env, l *Locked, goos, goarch string) (*Binary, error) {
	if err := l.validate(); err != nil {
		return nil, err
	}
	if !osArchRE.MatchString(goos) || !osArchRE.MatchString(goarch) {
		return nil, fmt.Errorf("building Go component %s: GOOS/GOARCH %q/%q are not valid", l.Name, goos, goarch)
	}
	g, err := env.prepare(ctx)
	if err != nil {
		return nil, fmt.Errorf("building Go component %s: %w", l.Name, err)
	}
	return g.build(ctx, env.workDir(), l, goos, goarch)
}

func (g *goCmd) build(ctx context.Context, workDir string, l *Locked, goos, goarch string) (b *Binary, err error) {
	what := fmt.Sprintf("building Go component %s (%s@%s) for %s/%s", l.Name, l.Module, l.Version, goos, goarch)
	tmp, err := os.MkdirTemp(workDir, "drover-gomod-build-"+l.Name+"-")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	dir := filepath.Join(tmp, "mod")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	goMod, goSum := []byte(l.GoMod), []byte(strings.Join(l.Sum, "\n")+"\n")
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), goMod, 0o644); err != nil {
		return nil, fmt.Errorf("%s: writing go.mod: %w", what, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), goSum, 0o644); err != nil {
		return nil, fmt.Errorf("%s: writing go.sum: %w", what, err)
	}

	out := filepath.Join(tmp, l.Name)
	args := []string{"build", "-mod=mod", "-trimpath", "-buildvcs=false"}
	if l.Test {
		args[0] = "test"
		args = append(args, "-c")
	}
	if len(l.Tags) > 0 {
		args = append(args, "-tags", strings.Join(l.Tags, ","))
	}
	if len(l.Ldflags) > 0 {
		args = append(args, "-ldflags", strings.Join(l.Ldflags, " "))
	}
	args = append(args, "-o", out, l.Package)
	if _, err := g.run(ctx, dir, []string{"GOOS=" + goos, "GOARCH=" + goarch}, args...); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}

	// -mod=mod lets the go command fix go.mod/go.sum instead of failing; a
	// change means the lock is not what was built, so it is an error.
	for name, want := range map[string][]byte{"go.mod": goMod, "go.sum": goSum} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("%s: re-reading %s: %w", what, name, err)
		}
		if !bytes.Equal(got, want) {
			return nil, fmt.Errorf("%s: the go command changed %s (%s); the lock is incomplete or stale: run `drover lock` again",
				what, name, lineDiff(string(want), string(got)))
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("%s: removing temp module: %w", what, err)
	}
	b, err = readBinary(out)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	b.tmpDir = tmp
	return b, nil
}

// lineDiff summarises how two texts differ, line by line, for an error.
func lineDiff(want, got string) string {
	in := func(text string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(text, "\n") {
			m[l] = true
		}
		return m
	}
	w, g := in(want), in(got)
	var parts []string
	for _, l := range sumLines(got) {
		if !w[l] {
			parts = append(parts, "+"+l)
		}
	}
	for _, l := range sumLines(want) {
		if !g[l] {
			parts = append(parts, "-"+l)
		}
	}
	if len(parts) > 6 {
		parts = append(parts[:6], fmt.Sprintf("… %d more", len(parts)-6))
	}
	if len(parts) == 0 {
		return "reformatted"
	}
	return strings.Join(parts, "; ")
}

// readBinary hashes a built Go binary and reads its embedded build info.
func readBinary(path string) (*Binary, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading binary: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	size, err := io.Copy(h, f)
	if err != nil {
		return nil, fmt.Errorf("hashing %s: %w", path, err)
	}
	bi, err := buildinfo.Read(f)
	if err != nil {
		return nil, fmt.Errorf("reading build info of %s: %w", path, err)
	}
	b := &Binary{Path: path, SHA256: hex.EncodeToString(h.Sum(nil)), Size: size, BuildInfo: bi,
		GoVersion: bi.GoVersion, Module: bi.Main.Path, Version: bi.Main.Version, Deps: DepList(bi)}
	return b, nil
}

// DepList lists the modules linked into a binary as "path@version h1:…",
// after replacement: the module whose code is in the binary.
func DepList(bi *debug.BuildInfo) []string {
	var out []string
	for _, d := range bi.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		out = append(out, fmt.Sprintf("%s@%s %s", d.Path, d.Version, d.Sum))
	}
	return out
}

// validate checks a Locked value, typically read back from a lock file,
// before it is built.
func (l *Locked) validate() error {
	if l == nil {
		return fmt.Errorf("building Go component: no lock given")
	}
	if err := l.Component.validate(); err != nil {
		return err
	}
	if !strings.HasPrefix(l.GoMod, "module "+moduleBase+l.Name+"\n") || !strings.HasSuffix(l.GoMod, "\n") {
		return fmt.Errorf("Go component %s: locked go.mod does not declare module %s%s; the lock is damaged: run `drover lock` again",
			l.Name, moduleBase, l.Name)
	}
	if len(l.Sum) == 0 {
		return fmt.Errorf("Go component %s: lock has no go.sum lines; the lock is damaged: run `drover lock` again", l.Name)
	}
	return nil
}

// CacheKey names the binary Build would produce from l for goos/goarch with
// toolchain goVersion: it covers the module, version, package, replaces,
// ldflags, tags, the locked go.mod and go.sum, the target and the
// toolchain. It is one line: a readable prefix and the sha256 of all inputs.
func CacheKey(l *Locked, goos, goarch, goVersion string) string {
	var reps []string
	for _, r := range sortedReplaces(l.Replace) {
		reps = append(reps, r.String())
	}
	// Format 2: builds pin GOEXPERIMENT and the GO<arch> levels (goenv.go),
	// which the build info records, so format 1 binaries differ.
	// Ldflags and tags keep their order: -tags is recorded in the build info,
	// so a different order is a different binary.
	in := struct {
		Format                         int
		Name, Module, Version, Package string
		Replace, Ldflags, Tags         []string
		GoMod                          string
		Sum                            []string
		GOOS, GOARCH, Toolchain        string
		// Test is left out when false, so the keys of every main-package
		// build stay what they were.
		Test bool `json:",omitempty"`
	}{2, l.Name, l.Module, l.Version, l.Package, reps, l.Ldflags, l.Tags, l.GoMod, l.Sum, goos, goarch, goVersion, l.Test}
	data, _ := json.Marshal(in) // strings and slices of strings: cannot fail
	sum := sha256.Sum256(data)
	return fmt.Sprintf("gomod %s %s@%s %s %s/%s %s %s", l.Name, l.Module, l.Version, l.Package, goos, goarch, goVersion,
		hex.EncodeToString(sum[:]))
}

// BlobStore is the content-addressed store BuildCached keeps binaries in
// (image/cache.Cache satisfies it).
type BlobStore interface {
	// Lookup returns the sha256 linked to key, if any.
	Lookup(key string) (sha string, ok bool, err error)
	// Link records that key names the blob sha.
	Link(key, sha string) error
	// Put stores r's content, which must hash to sha.
	Put(sha string, r io.Reader) (string, error)
	// Path is where the blob sha lives.
	Path(sha string) string
}

// BuildCached returns the binary for l from store when its CacheKey is
// linked there, and otherwise builds it, stores it and links the key. The
// returned binary's Path is in the store; cached tells whether the build was
// skipped. A cached blob is re-hashed and its build info read, so a damaged
// entry is rebuilt rather than trusted.
func BuildCached(ctx context.Context, env Env, store BlobStore, l *Locked, goos, goarch string) (b *Binary, cached bool, err error) {
	if err := l.validate(); err != nil {
		return nil, false, err
	}
	if !osArchRE.MatchString(goos) || !osArchRE.MatchString(goarch) {
		return nil, false, fmt.Errorf("building Go component %s: GOOS/GOARCH %q/%q are not valid", l.Name, goos, goarch)
	}
	g, err := env.prepare(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("building Go component %s: %w", l.Name, err)
	}
	key := CacheKey(l, goos, goarch, g.version)
	sha, ok, err := store.Lookup(key)
	if err != nil {
		return nil, false, fmt.Errorf("building Go component %s: looking up %q in the cache: %w", l.Name, key, err)
	}
	if ok {
		b, err := readBinary(store.Path(sha))
		if err == nil && b.SHA256 == sha {
			fmt.Fprintf(g.log, "gomod: %s for %s/%s: cached %s\n", l.Name, goos, goarch, sha)
			return b, true, nil
		}
		fmt.Fprintf(g.log, "gomod: %s: cached blob %s is unusable (%v), rebuilding\n", l.Name, sha, err)
	}
	built, err := g.build(ctx, env.workDir(), l, goos, goarch)
	if err != nil {
		return nil, false, err
	}
	defer built.Cleanup()
	if err := storeBinary(store, key, built); err != nil {
		return nil, false, fmt.Errorf("building Go component %s: %w", l.Name, err)
	}
	stored := *built
	stored.Path, stored.tmpDir = store.Path(built.SHA256), ""
	return &stored, false, nil
}

func storeBinary(store BlobStore, key string, b *Binary) error {
	f, err := os.Open(b.Path)
	if err != nil {
		return fmt.Errorf("storing %s in the cache: %w", b.Path, err)
	}
	defer f.Close()
	if _, err := store.Put(b.SHA256, f); err != nil {
		return fmt.Errorf("storing %s in the cache: %w", b.Path, err)
	}
	if err := store.Link(key, b.SHA256); err != nil {
		return fmt.Errorf("linking cache key %q: %w", key, err)
	}
	return nil
}
