// Package gomod locks and builds the Go components of a node image (kubelet,
// containerd, …) from the Go module proxy with the local Go toolchain.
//
// Lock resolves a component (module@version, main package, replaces) in a
// throwaway module and records the exact go.mod and go.sum it needs. Build
// recreates that module byte for byte and runs a reproducible `go build`
// (-trimpath, CGO_ENABLED=0, no VCS stamping); it fails if the go command
// wanted to change go.mod or go.sum, because that means the lock no longer
// describes what is built. CacheKey and BuildCached let a content-addressed
// store skip rebuilding a binary whose inputs have not changed.
package gomod

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime/debug"
	"strings"
)

// moduleBase is the path prefix of the throwaway modules; .invalid can never
// resolve, so the go command can never fetch or confuse it with a real one.
const moduleBase = "drover.invalid/build/"

// Component is one Go program of an image, as the recipe names it.
type Component struct {
	Name    string // component name; also the last element of the temp module path
	Module  string // module that holds the main package, e.g. k8s.io/kubernetes
	Version string // exact module version, e.g. v1.36.3
	Package string // main package, e.g. k8s.io/kubernetes/cmd/kubelet
	Replace []Replace
	Ldflags []string // joined with spaces into one -ldflags value
	Tags    []string // joined with commas into one -tags value
	// Test builds Package's test binary (`go test -c`) instead of a main
	// package: Kubernetes' e2e suite is a test binary (test/e2e's
	// e2e_test.go), and its test-only imports are locked with `go get -t`.
	Test bool
}

// Replace is one go.mod replace directive: Old (optionally only at
// OldVersion) => New at Version. New must be a module, not a directory:
// a directory replace would make the build depend on the builder's disk.
type Replace struct {
	Old        string
	OldVersion string // empty: every version of Old
	New        string
	Version    string
}

// String renders r as in go.mod and in recipes: "old [version] => new version".
func (r Replace) String() string {
	old := r.Old
	if r.OldVersion != "" {
		old += " " + r.OldVersion
	}
	return old + " => " + r.New + " " + r.Version
}

// ParseReplace reads "old [version] => new version", the recipe syntax.
func ParseReplace(s string) (Replace, error) {
	oldPart, newPart, ok := strings.Cut(s, "=>")
	o, n := strings.Fields(oldPart), strings.Fields(newPart)
	if !ok || len(o) < 1 || len(o) > 2 || len(n) != 2 {
		return Replace{}, fmt.Errorf("parsing replace %q: write it as in go.mod: 'old => new version'", s)
	}
	r := Replace{Old: o[0], New: n[0], Version: n[1]}
	if len(o) == 2 {
		r.OldVersion = o[1]
	}
	return r, nil
}

// Env is how this package runs the go command.
type Env struct {
	// Go is the go binary; empty means "go" found on PATH.
	Go string
	// WorkDir holds the temp modules and build outputs; empty means
	// os.TempDir().
	WorkDir string
	// Log receives the commands run and the go command's progress output;
	// nil discards it.
	Log io.Writer
	// Environ is the environment the go settings (GOPROXY, GOPATH,
	// GOMODCACHE, GOCACHE, …) are inherited from; nil means os.Environ().
	Environ []string
	// Toolchain, when set (go1.X.Y), is the only toolchain every command
	// runs: the go command is run with GOTOOLCHAIN=<Toolchain>, which
	// fetches that release from the module proxy when the installed go is
	// another, and prepare refuses to go on if another one answers. Empty
	// means the installed go as it is (GOTOOLCHAIN=local), for locking.
	Toolchain string
}

// Locked is a component resolved to an exact module graph.
type Locked struct {
	Component
	// GoMod is the temp module's go.mod, normalised to one directive per
	// line with no blank lines and no indentation, so that it survives a
	// line-oriented lock file unchanged.
	GoMod string
	// Sum holds the go.sum lines the build needs, sorted.
	Sum []string
	// GoVersion is the toolchain that made the lock, e.g. go1.26.8.
	GoVersion string
}

// GoModLines splits GoMod into its lines (the form a lock file stores).
func (l *Locked) GoModLines() []string {
	return strings.Split(strings.TrimSuffix(l.GoMod, "\n"), "\n")
}

// GoModFromLines is the inverse of GoModLines.
func GoModFromLines(lines []string) string {
	return strings.Join(lines, "\n") + "\n"
}

// Binary is a built Go program.
type Binary struct {
	Path      string
	SHA256    string // lowercase hex
	Size      int64
	BuildInfo *debug.BuildInfo
	GoVersion string // toolchain that built it, from the build info
	Module    string // module of the main package, from the build info
	Version   string // its version
	// Deps lists the linked dependency modules as "path@version h1:…",
	// after replacement (the module whose code is in the binary).
	Deps []string
	// Source is the checkout a BuildLocal binary was compiled from, with its
	// commit and dirty flag; nil for a locked component.
	Source *Source

	tmpDir string // owned temp directory, removed by Cleanup
}

// Cleanup removes the temp directory Build created for the binary. A binary
// served from a BlobStore has none and is left alone.
func (b *Binary) Cleanup() error {
	if b == nil || b.tmpDir == "" {
		return nil
	}
	err := os.RemoveAll(b.tmpDir)
	b.tmpDir = ""
	if err != nil {
		return fmt.Errorf("removing build directory of %s: %w", b.Path, err)
	}
	return nil
}

var (
	nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	// semverRE accepts exact versions only (releases, pre-releases and
	// pseudo-versions): a query like "latest" or a branch would not pin.
	semverRE = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+incompatible)?$`)
	pathRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._~/+-]*$`)
	tagRE    = regexp.MustCompile(`^[A-Za-z0-9_.]+$`)
	osArchRE = regexp.MustCompile(`^[a-z0-9]+$`)
)

// validate checks c before anything touches the network, so that a typo is
// reported as such and not as a confusing go command failure.
func (c *Component) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("Go component %q: %s; fix the recipe", c.Name, fmt.Sprintf(format, args...))
	}
	switch {
	case !nameRE.MatchString(c.Name):
		return bad("name must be letters, digits, '.', '_' or '-'")
	case !pathRE.MatchString(c.Module):
		return bad("module %q is not a module path", c.Module)
	case !semverRE.MatchString(c.Version):
		return bad("version %q is not an exact module version like v1.2.3", c.Version)
	case c.Package != c.Module && !strings.HasPrefix(c.Package, c.Module+"/"):
		return bad("package %q is not inside module %s", c.Package, c.Module)
	case !pathRE.MatchString(c.Package):
		return bad("package %q is not a package path", c.Package)
	}
	seen := map[string]bool{}
	for _, r := range c.Replace {
		switch {
		case !pathRE.MatchString(r.Old) || (r.OldVersion != "" && !semverRE.MatchString(r.OldVersion)):
			return bad("replace %q: old side is not a module path [version]", r)
		case strings.HasPrefix(r.New, ".") || strings.HasPrefix(r.New, "/"):
			return bad("replace %q: a directory replace is not reproducible; pin a module version", r)
		case !pathRE.MatchString(r.New) || !semverRE.MatchString(r.Version):
			return bad("replace %q: new side must be 'module vX.Y.Z'", r)
		case seen[r.Old+" "+r.OldVersion]:
			return bad("replace %q: %s is replaced twice", r, r.Old)
		}
		seen[r.Old+" "+r.OldVersion] = true
	}
	for _, t := range c.Tags {
		if !tagRE.MatchString(t) {
			return bad("build tag %q must be letters, digits, '_' or '.'", t)
		}
	}
	for _, f := range c.Ldflags {
		if strings.ContainsAny(f, "\n\r") {
			return bad("ldflags entry %q contains a newline", f)
		}
	}
	return nil
}
