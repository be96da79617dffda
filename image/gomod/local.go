package gomod

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Source is a checkout of a Go module that binaries are built from (drover's
// own drover-agent and drover-init), as the manifest records it. FindSource
// only locates it; BuildLocal says what a binary was compiled from.
type Source struct {
	Dir    string `json:"-"`
	Module string `json:"module"`
	// Commit is the checked-out git commit (HEAD); empty when Dir is not a
	// git checkout (a source tarball, a copy) or git could not read it.
	Commit string `json:"commit,omitempty"`
	// State is StateDirty when a file the binary is compiled from (source,
	// embedded file, go.mod, go.sum) is not byte for byte the one in
	// Commit's tree, whatever git's index, configuration or environment say
	// (srcstate.go); StateClean when every one is; StateUnknown when there
	// is no commit to compare with. Never clean by default.
	State SourceState `json:"state"`
}

// SourceState is what is known about a tree's files against its commit.
type SourceState string

// The source states. A manifest written before drover recorded the state
// has none (""), which reads as StateUnknown.
const (
	StateClean   SourceState = "clean"
	StateDirty   SourceState = "dirty"
	StateUnknown SourceState = "unknown"
)

// Known returns s, or StateUnknown for an empty or unrecognised value.
func (s SourceState) Known() SourceState {
	switch s {
	case StateClean, StateDirty:
		return s
	}
	return StateUnknown
}

// Dirty reports whether a compiled file is known to differ from Commit's.
func (s *Source) Dirty() bool { return s.State == StateDirty }

// String is the form os-release and messages use: module@commit, with
// +dirty for a modified checkout, and unknown-commit when there is none.
func (s *Source) String() string {
	v := s.Commit
	if v == "" {
		v = "unknown-commit"
	}
	if s.Dirty() {
		v += "+dirty"
	}
	return s.Module + "@" + v
}

// FindSource looks for the root of module at or above each of dirs in turn.
func FindSource(module string, dirs ...string) (*Source, error) {
	for _, start := range dirs {
		abs, err := filepath.Abs(start)
		if err != nil {
			continue
		}
		for d := abs; ; d = filepath.Dir(d) {
			data, err := os.ReadFile(filepath.Join(d, "go.mod"))
			if err == nil && modulePath(data) == module {
				return &Source{Dir: d, Module: module}, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return nil, fmt.Errorf("no checkout of %s at or above %s: run drover from its checkout, or pass --agent and --init", module, strings.Join(dirs, ", "))
}

// modulePath reads the module directive of a go.mod.
func modulePath(gomod []byte) string {
	for _, line := range strings.Split(string(gomod), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// BuildLocal builds package pkg (e.g. ./cmd/drover-agent) of the checkout
// src with env's toolchain and fixed environment and drover's reproducible
// flags (-trimpath, -buildvcs=false, -ldflags=-s -w, CGO_ENABLED=0, the
// checkout's go.sum read-only), into workDir. The same checkout and
// toolchain give the same bytes on any machine. The binary's Source is the
// checkout's commit, dirty when a file it is compiled from is not the
// commit's; the differences are logged.
//
// With a store, the binary is kept there under LocalKey, and a build whose
// key is linked takes the stored binary instead of running go build: the
// go command re-links a program on every build, which was most of a warm
// image build's time (about a second per binary on 2 cores).
func BuildLocal(ctx context.Context, env Env, store BlobStore, src *Source, pkg, goos, goarch, workDir string) (*Binary, error) {
	what := fmt.Sprintf("building %s from %s", pkg, src.Dir)
	g, err := env.prepare(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	vars := []string{"GOOS=" + goos, "GOARCH=" + goarch}
	files, err := g.compiledFiles(ctx, src.Dir, vars, pkg)
	if err != nil {
		return nil, fmt.Errorf("%s: listing the files it is compiled from: %w", what, err)
	}
	state, diff, err := sourceStateOf(ctx, src, files)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	for _, d := range diff {
		fmt.Fprintf(g.log, "gomod: %s is dirty: %s\n", pkg, d)
	}
	args := []string{"build", "-mod=readonly", "-trimpath", "-buildvcs=false", "-ldflags=-s -w"}
	var key string
	if store != nil {
		if key, err = localKey(g, src, pkg, vars, args, files); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
	}
	out := filepath.Join(workDir, filepath.Base(pkg))
	if store != nil {
		if sha, ok, err := store.Lookup(key); err == nil && ok {
			// Copied out, as a build would leave it: the caller owns the
			// file (and removes it); the store's blob stays.
			b, err := copyBinary(store.Path(sha), out)
			if err == nil && b.SHA256 == sha && b.GoVersion == g.version {
				fmt.Fprintf(g.log, "gomod: %s for %s/%s: cached %s\n", pkg, goos, goarch, sha)
				b.Source = state
				return b, nil
			}
			os.Remove(out)
			fmt.Fprintf(g.log, "gomod: %s: cached blob %s is unusable (%v), rebuilding\n", pkg, sha, err)
		}
	}
	if _, err := g.run(ctx, src.Dir, vars, append(args, "-o", out, pkg)...); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	b, err := readBinary(out)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if b.GoVersion != g.version {
		return nil, fmt.Errorf("%s: the binary was built by %s, not %s", what, b.GoVersion, g.version)
	}
	b.Source = state
	if store != nil {
		// A store that fails only costs the next build its link.
		_ = storeBinary(store, key, b)
	}
	return b, nil
}

// localKey names everything a local build's bytes depend on: the toolchain
// and the go command's settings, GOOS/GOARCH, the
// flags, the package, and the path and content of every file compiled
// that does not come from the module cache (go.mod and go.sum among them,
// which pin the rest).
func localKey(g *goCmd, src *Source, pkg string, vars, args []string, files []string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "format 1\ntoolchain %s\npackage %s %s\n", g.version, src.Module, pkg)
	// The go command's own settings, not PATH, HOME or PWD, which do not
	// reach a CGO_ENABLED=0, -trimpath build and would only cost hits.
	var settings []string
	for _, kv := range g.base {
		if strings.HasPrefix(kv, "GO") || strings.HasPrefix(kv, "CGO_") {
			settings = append(settings, kv)
		}
	}
	for _, list := range [][]string{settings, vars, args} {
		fmt.Fprintf(h, "%q\n", list)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		rel, err := filepath.Rel(src.Dir, f)
		if err != nil {
			rel = f
		}
		fmt.Fprintf(h, "%s %x\n", rel, sha256.Sum256(data))
	}
	return fmt.Sprintf("gomod local %s %s %s %x", pkg, strings.Join(vars, " "), g.version, h.Sum(nil)), nil
}

// copyBinary copies the stored binary src to dst and reads it back there.
func copyBinary(src, dst string) (*Binary, error) {
	data, err := os.ReadFile(src)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		return nil, err
	}
	return readBinary(dst)
}
