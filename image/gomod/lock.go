package gomod

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Lock resolves c through the Go module proxy: in a temp module that
// declares c's replaces it runs `go get <package>@<version>` and returns the
// resulting go.mod (normalised) and go.sum. The result depends only on c,
// the proxy's immutable content and the toolchain's minor version, so two
// runs give identical values.
func Lock(ctx context.Context, env Env, c Component) (*Locked, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	g, err := env.prepare(ctx)
	if err != nil {
		return nil, fmt.Errorf("locking Go component %s: %w", c.Name, err)
	}
	lang, err := langVersion(g.version)
	if err != nil {
		return nil, fmt.Errorf("locking Go component %s: %w", c.Name, err)
	}
	dir, err := os.MkdirTemp(env.workDir(), "drover-gomod-lock-"+c.Name+"-")
	if err != nil {
		return nil, fmt.Errorf("locking Go component %s: creating temp module: %w", c.Name, err)
	}
	defer os.RemoveAll(dir)

	initial := goModFile{Module: moduleBase + c.Name, Go: lang, Replace: c.Replace}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(initial.render()), 0o644); err != nil {
		return nil, fmt.Errorf("locking Go component %s: writing go.mod: %w", c.Name, err)
	}
	get := []string{"get", c.Package + "@" + c.Version}
	if c.Test {
		get = []string{"get", "-t", c.Package + "@" + c.Version}
	}
	if _, err := g.run(ctx, dir, nil, get...); err != nil {
		return nil, g.explainGetError(ctx, env, c, err)
	}

	mod, err := g.readGoMod(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("locking Go component %s: %w", c.Name, err)
	}
	goMod := mod.render()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(goMod), 0o644); err != nil {
		return nil, fmt.Errorf("locking Go component %s: writing normalised go.mod: %w", c.Name, err)
	}
	if err := g.checkMainPackage(ctx, dir, c); err != nil {
		return nil, fmt.Errorf("locking Go component %s: %w", c.Name, err)
	}
	sum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if err != nil {
		return nil, fmt.Errorf("locking Go component %s: reading go.sum: %w", c.Name, err)
	}
	// The lock keeps its own copies: a caller editing its Component later
	// must not change what was locked.
	c.Replace, c.Ldflags, c.Tags = slices.Clone(c.Replace), slices.Clone(c.Ldflags), slices.Clone(c.Tags)
	return &Locked{Component: c, GoMod: goMod, Sum: sumLines(string(sum)), GoVersion: g.version}, nil
}

// checkMainPackage confirms, with -mod=readonly so that nothing may be
// added, that the normalised go.mod and go.sum are complete for c.Package,
// that it is a main package, and that it comes from c.Module at c.Version
// (a package path can also match a nested module).
func (g *goCmd) checkMainPackage(ctx context.Context, dir string, c Component) error {
	list := []string{"list", "-mod=readonly", "-json=Name,Module", c.Package}
	if c.Test {
		// -test also loads the test-only imports, so a go.sum missing
		// one of them fails here and not in the build.
		list = []string{"list", "-mod=readonly", "-test", "-deps", "-json=ImportPath,Name,Module,TestGoFiles,XTestGoFiles", c.Package}
	}
	out, err := g.run(ctx, dir, nil, list...)
	if err != nil {
		return fmt.Errorf("checking %s against the locked go.mod and go.sum: %w", c.Package, err)
	}
	if c.Test {
		out, err = listedPackageJSON(out, c.Package)
		if err != nil {
			return err
		}
	}
	var p struct {
		Name                      string
		Module                    *struct{ Path, Version string }
		TestGoFiles, XTestGoFiles []string
	}
	if err := json.Unmarshal(out, &p); err != nil {
		return fmt.Errorf("reading `go list` output for %s: %w", c.Package, err)
	}
	if p.Module == nil || p.Module.Path != c.Module || p.Module.Version != c.Version {
		got := "no module"
		if p.Module != nil {
			got = p.Module.Path + "@" + p.Module.Version
		}
		return fmt.Errorf("package %s resolves to %s, not %s@%s; set module to the module that contains the package", c.Package, got, c.Module, c.Version)
	}
	if c.Test {
		if len(p.TestGoFiles)+len(p.XTestGoFiles) == 0 {
			return fmt.Errorf("package %s has no _test.go files, so it has no test binary; name the package whose tests are the suite", c.Package)
		}
		return nil
	}
	if p.Name != "main" {
		return fmt.Errorf("package %s is package %s, not a main package; name the command's package (…/cmd/<name>)", c.Package, p.Name)
	}
	return nil
}

// sumLines splits go.sum text into sorted, distinct, non-empty lines.
func sumLines(text string) []string {
	seen := map[string]bool{}
	var out []string
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	sort.Strings(out)
	return out
}

// MissingReplacesError reports modules a component's dependency graph
// requires at a placeholder version v0.0.0 that only the component module's
// own replaces (ignored in a dependency) resolve. Suggested holds the
// replace lines to add, when they can be derived.
type MissingReplacesError struct {
	Component string
	Module    string // the component's module@version
	Missing   []string
	Suggested []Replace
	Err       error
}

func (e *MissingReplacesError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "locking Go component %s: %s depends on %s at v0.0.0, a placeholder that %s's own go.mod replaces "+
		"with local directories, which Go ignores in a dependency; ",
		e.Component, e.Module, strings.Join(e.Missing, ", "), strings.SplitN(e.Module, "@", 2)[0])
	if len(e.Suggested) == 0 {
		b.WriteString("add a replace for each pinning it to a released version, as 'module => module vX.Y.Z'")
		return b.String()
	}
	b.WriteString("add these lines to the component's replace list in the recipe:")
	for _, r := range e.Suggested {
		fmt.Fprintf(&b, "\n  - %s", r)
	}
	return b.String()
}

func (e *MissingReplacesError) Unwrap() error { return e.Err }

var (
	placeholderRE = regexp.MustCompile(`(?m)([A-Za-z0-9][A-Za-z0-9._~/+-]*)@v0\.0\.0: `)
	notServedRE   = regexp.MustCompile(`(?i)404 not found|403 forbidden|410 gone|400 bad request|not available|unknown revision|invalid version|no matching versions|no such file or directory`)
)

// explainGetError turns the go get failures a recipe author can fix into
// errors that say how; anything else is passed on with the go output.
func (g *goCmd) explainGetError(ctx context.Context, env Env, c Component, err error) error {
	var ce *cmdError
	if !errors.As(err, &ce) {
		return fmt.Errorf("locking Go component %s: %w", c.Name, err)
	}
	if ms := placeholderRE.FindAllStringSubmatch(ce.stderr, -1); len(ms) > 0 {
		missing := map[string]bool{}
		for _, m := range ms {
			missing[m[1]] = true
		}
		e := &MissingReplacesError{Component: c.Name, Module: c.Module + "@" + c.Version, Err: err}
		for m := range missing {
			e.Missing = append(e.Missing, m)
		}
		sort.Strings(e.Missing)
		if text, gmErr := ModuleGoMod(ctx, env, c.Module, c.Version); gmErr == nil {
			have := map[string]bool{}
			for _, r := range c.Replace {
				have[r.Old] = true
			}
			for _, r := range StagingReplaces(text, c.Version) {
				if !have[r.Old] {
					e.Suggested = append(e.Suggested, r)
				}
			}
		} else {
			fmt.Fprintf(g.log, "gomod: cannot suggest replaces: %v\n", gmErr)
		}
		return e
	}
	if strings.Contains(ce.stderr, "does not contain package "+c.Package) {
		return fmt.Errorf("locking Go component %s: %s@%s has no package %s; check the package path: %w",
			c.Name, c.Module, c.Version, c.Package, err)
	}
	if strings.Contains(ce.stderr, "@"+c.Version+": ") && notServedRE.MatchString(ce.stderr) {
		return fmt.Errorf("locking Go component %s: %s@%s is not served by the Go module proxy; "+
			"check the version with `go list -m -versions %s`: %w", c.Name, c.Package, c.Version, c.Module, err)
	}
	return fmt.Errorf("locking Go component %s: %w", c.Name, err)
}

// ModuleGoMod returns the go.mod text of module@version as the module proxy
// serves it (k8s.io/kubernetes's, for StagingReplaces). It fetches only the
// go.mod, not the module zip.
func ModuleGoMod(ctx context.Context, env Env, module, version string) (string, error) {
	out, err := queryModule(ctx, env, module, version, "list", "-m", "-json=Path,Version,GoMod", module+"@"+version)
	if err != nil {
		return "", fmt.Errorf("fetching go.mod of %s@%s: %w", module, version, err)
	}
	var m struct{ GoMod string }
	if err := json.Unmarshal(out, &m); err != nil || m.GoMod == "" {
		return "", fmt.Errorf("fetching go.mod of %s@%s: `go list -m` named no go.mod file (%v)", module, version, err)
	}
	text, err := os.ReadFile(m.GoMod)
	if err != nil {
		return "", fmt.Errorf("fetching go.mod of %s@%s: %w", module, version, err)
	}
	return string(text), nil
}

// ModuleDir returns the directory of module@version in the module cache,
// downloading the module when it is not there (`go mod download` checks a
// fresh download against the checksum database, as a build does). The build reads the release notes
// a module carries (Kubernetes' CHANGELOG/, containerd's releases/) from it.
func ModuleDir(ctx context.Context, env Env, module, version string) (string, error) {
	out, err := queryModule(ctx, env, module, version, "mod", "download", "-json", module+"@"+version)
	if err != nil {
		return "", fmt.Errorf("downloading %s@%s: %w", module, version, err)
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		return "", fmt.Errorf("downloading %s@%s: `go mod download` named no directory (%v%s)", module, version, err, m.Error)
	}
	return m.Dir, nil
}

// queryModule runs a go command about module@version in an empty module of
// its own (inEmptyModule) and returns its output.
func queryModule(ctx context.Context, env Env, module, version string, args ...string) ([]byte, error) {
	if !pathRE.MatchString(module) || !semverRE.MatchString(version) {
		return nil, fmt.Errorf("want a module path and an exact version")
	}
	return inEmptyModule(ctx, env, args...)
}

// inEmptyModule runs a go command in an empty module of its own, so that a
// go.mod above the work dir (and its replaces) cannot take part in a query
// about another module, and returns its output.
func inEmptyModule(ctx context.Context, env Env, args ...string) ([]byte, error) {
	g, err := env.prepare(ctx)
	if err != nil {
		return nil, err
	}
	lang, err := langVersion(g.version)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(env.workDir(), "drover-gomod-list-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	empty := goModFile{Module: moduleBase + "list", Go: lang}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(empty.render()), 0o644); err != nil {
		return nil, err
	}
	return g.run(ctx, dir, nil, args...)
}

// listedPackageJSON picks pkg's own object out of `go list -deps -json`
// output (a stream of objects, one per package; -deps loaded the test
// imports, pkg is the one whose ImportPath is pkg).
func listedPackageJSON(out []byte, pkg string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("reading `go list -deps` output: %s is not in it (%v)", pkg, err)
		}
		var p struct{ ImportPath string }
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, fmt.Errorf("reading `go list -deps` output: %w", err)
		}
		if p.ImportPath == pkg {
			return raw, nil
		}
	}
}
