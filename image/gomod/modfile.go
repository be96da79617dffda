package gomod

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"golang.org/x/mod/modfile"
)

// goModFile is the part of a go.mod this package writes: a temp module has
// no other directives.
type goModFile struct {
	Module    string
	Go        string
	Toolchain string
	Require   []require
	Replace   []Replace
}

type require struct {
	Path, Version string
	Indirect      bool
}

// render writes f in the normalised form: one directive per line, sorted,
// no blocks, no blank lines, no comments other than "// indirect". The go
// command accepts it as is (it rewrites go.mod only when its meaning
// changes), and a line-oriented lock file can store it without loss.
func (f *goModFile) render() string {
	var b strings.Builder
	fmt.Fprintf(&b, "module %s\n", f.Module)
	fmt.Fprintf(&b, "go %s\n", f.Go)
	if f.Toolchain != "" {
		fmt.Fprintf(&b, "toolchain %s\n", f.Toolchain)
	}
	reqs := append([]require(nil), f.Require...)
	sort.Slice(reqs, func(i, j int) bool {
		if reqs[i].Path != reqs[j].Path {
			return reqs[i].Path < reqs[j].Path
		}
		return reqs[i].Version < reqs[j].Version
	})
	for _, r := range reqs {
		fmt.Fprintf(&b, "require %s %s", r.Path, r.Version)
		if r.Indirect {
			b.WriteString(" // indirect")
		}
		b.WriteString("\n")
	}
	for _, r := range sortedReplaces(f.Replace) {
		fmt.Fprintf(&b, "replace %s\n", r)
	}
	return b.String()
}

func sortedReplaces(rs []Replace) []Replace {
	out := append([]Replace(nil), rs...)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Old != out[j].Old {
			return out[i].Old < out[j].Old
		}
		return out[i].OldVersion < out[j].OldVersion
	})
	return out
}

// editJSON is the output of `go mod edit -json`.
type editJSON struct {
	Module    struct{ Path string }
	Go        string
	Toolchain string
	Require   []struct {
		Path, Version string
		Indirect      bool
	}
	Replace []struct {
		Old, New struct{ Path, Version string }
	}
	Exclude []json.RawMessage
	Retract []json.RawMessage
	Tool    []json.RawMessage
	Ignore  []json.RawMessage
	Godebug []json.RawMessage
}

// parseEditJSON turns `go mod edit -json` output into a goModFile. It refuses
// directives a temp module never has rather than silently dropping them.
func parseEditJSON(data []byte) (*goModFile, error) {
	var e editJSON
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, fmt.Errorf("reading `go mod edit -json` output: %w", err)
	}
	if n := len(e.Exclude) + len(e.Retract) + len(e.Tool) + len(e.Ignore) + len(e.Godebug); n > 0 {
		return nil, fmt.Errorf("go.mod of %s has %d exclude/retract/tool/ignore/godebug directives, which drover never writes", e.Module.Path, n)
	}
	f := &goModFile{Module: e.Module.Path, Go: e.Go, Toolchain: e.Toolchain}
	for _, r := range e.Require {
		f.Require = append(f.Require, require{r.Path, r.Version, r.Indirect})
	}
	for _, r := range e.Replace {
		f.Replace = append(f.Replace, Replace{Old: r.Old.Path, OldVersion: r.Old.Version, New: r.New.Path, Version: r.New.Version})
	}
	return f, nil
}

// readGoMod parses the go.mod in dir with the go command itself, so this
// package needs no go.mod parser of its own for files the go command wrote.
func (g *goCmd) readGoMod(ctx context.Context, dir string) (*goModFile, error) {
	out, err := g.run(ctx, dir, nil, "mod", "edit", "-json")
	if err != nil {
		return nil, fmt.Errorf("reading go.mod in %s: %w", dir, err)
	}
	return parseEditJSON(out)
}

// StagingReplaces reads the go.mod text of a module that keeps some of its
// modules in a ./staging directory (k8s.io/kubernetes) and returns the
// replaces a dependent build needs: every "X => ./staging/…" becomes
// "X => X v0.<minor>.<patch>", the version the staging modules are
// published at for release version (v1.36.3 → v0.36.3; a v0.x version is
// kept). A version that is not vMAJOR.MINOR.PATCH is used as is. The
// result is sorted by module path.
func StagingReplaces(goModText string, version string) []Replace {
	stagingVersion := version
	if semverRE.MatchString(version) {
		_, rest, _ := strings.Cut(version, ".")
		stagingVersion = "v0." + rest
	}
	var out []Replace
	seen := map[string]bool{}
	for _, d := range replaceDirectives(goModText) {
		if !strings.HasPrefix(d.newPath, "./staging/") || seen[d.oldPath] {
			continue
		}
		seen[d.oldPath] = true
		out = append(out, Replace{Old: d.oldPath, New: d.oldPath, Version: stagingVersion})
	}
	return sortedReplaces(out)
}

type replaceDirective struct{ oldPath, newPath string }

// replaceDirectives finds the replace directives of go.mod text, both the
// "replace a => b" and the "replace ( … )" forms. It is deliberately small:
// it reads files written by the go command, where paths are unquoted.
func replaceDirectives(text string) []replaceDirective {
	var out []replaceDirective
	inBlock := false
	for _, line := range strings.Split(text, "\n") {
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
			continue
		case inBlock && f[0] == ")":
			inBlock = false
			continue
		case !inBlock && f[0] == "replace" && len(f) == 2 && f[1] == "(":
			inBlock = true
			continue
		case !inBlock && f[0] == "replace":
			f = f[1:]
		case !inBlock:
			continue
		}
		// f is now "old [version] => new [version]".
		arrow := -1
		for i, w := range f {
			if w == "=>" {
				arrow = i
			}
		}
		if arrow < 1 || arrow > 2 || arrow == len(f)-1 {
			continue
		}
		out = append(out, replaceDirective{oldPath: f[0], newPath: f[arrow+1]})
	}
	return out
}

// RequiredVersion is the version of module that goModText requires (a
// go.mod as the go command writes it), read with x/mod's parser: e.g. the
// ginkgo version a Kubernetes release builds its e2e suite with.
func RequiredVersion(goModText, module string) (string, error) {
	f, err := modfile.ParseLax("go.mod", []byte(goModText), nil)
	if err != nil {
		return "", err
	}
	for _, r := range f.Require {
		if r.Mod.Path == module {
			return r.Mod.Version, nil
		}
	}
	return "", fmt.Errorf("go.mod requires no %s", module)
}
