package gomod

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Source is a checkout of a Go module that binaries are built from (drover's
// own drover-agent and drover-init), as the manifest records it.
type Source struct {
	Dir    string `json:"-"`
	Module string `json:"module"`
	// Commit is the checked-out git commit; empty when Dir is not a git
	// checkout (a source tarball), which Dirty then cannot be judged for.
	Commit string `json:"commit,omitempty"`
	// Dirty is set when the checkout differs from Commit: modified, staged
	// or untracked (not ignored) files.
	Dirty bool `json:"dirty"`
}

// String is the form os-release and messages use: module@commit, with
// +dirty for a modified checkout.
func (s *Source) String() string {
	v := s.Commit
	if v == "" {
		v = "unknown-commit"
	}
	if s.Dirty {
		v += "+dirty"
	}
	return s.Module + "@" + v
}

// FindSource looks for the root of module at or above each of dirs in turn
// and describes it.
func FindSource(module string, dirs ...string) (*Source, error) {
	for _, start := range dirs {
		abs, err := filepath.Abs(start)
		if err != nil {
			continue
		}
		for d := abs; ; d = filepath.Dir(d) {
			data, err := os.ReadFile(filepath.Join(d, "go.mod"))
			if err == nil && modulePath(data) == module {
				return describeSource(d, module)
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

func describeSource(dir, module string) (*Source, error) {
	s := &Source{Dir: dir, Module: module}
	git := func(args ...string) (string, error) {
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
		return string(bytes.TrimSpace(out)), err
	}
	commit, err := git("rev-parse", "--verify", "HEAD")
	if err != nil {
		return s, nil // not a git checkout: the binaries' sha256 still names them
	}
	status, err := git("status", "--porcelain")
	if err != nil {
		return nil, fmt.Errorf("asking git whether %s is modified: %w", dir, err)
	}
	s.Commit, s.Dirty = commit, status != ""
	return s, nil
}

// BuildLocal builds package pkg (e.g. ./cmd/drover-agent) of the checkout
// src with env's toolchain and fixed environment and drover's reproducible
// flags (-trimpath, -buildvcs=false, -ldflags=-s -w, CGO_ENABLED=0, the
// checkout's go.sum read-only), into workDir. The same checkout and
// toolchain give the same bytes on any machine.
func BuildLocal(ctx context.Context, env Env, src *Source, pkg, goos, goarch, workDir string) (*Binary, error) {
	what := fmt.Sprintf("building %s from %s", pkg, src.Dir)
	g, err := env.prepare(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out := filepath.Join(workDir, filepath.Base(pkg))
	args := []string{"build", "-mod=readonly", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", out, pkg}
	if _, err := g.run(ctx, src.Dir, []string{"GOOS=" + goos, "GOARCH=" + goarch}, args...); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	b, err := readBinary(out)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if b.GoVersion != g.version {
		return nil, fmt.Errorf("%s: the binary was built by %s, not %s", what, b.GoVersion, g.version)
	}
	return b, nil
}
