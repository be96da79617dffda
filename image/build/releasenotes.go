package build

import (
	"bufio"
	"context"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"

	"golang.org/x/mod/semver"

	"github.com/drover-os/drover/image/gomod"
)

// maxReleaseNotes bounds what is read of one release notes file
// (Kubernetes' CHANGELOG-1.37.md is 370 KiB).
const maxReleaseNotes = 16 << 20

// releaseNotes reads, once per module version, the CVE and GHSA IDs the
// release notes of each Go component's module name. A module that cannot
// be read is recorded with the problem (the build has the binary; only the
// review loses the notes) and the error is logged.
func (b *builder) releaseNotes(ctx context.Context) ([]ReleaseNotes, error) {
	out := []ReleaseNotes{}
	if len(b.man.Go) == 0 {
		return out, nil
	}
	env, err := b.goEnv(ctx)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, g := range b.man.Go {
		if seen[g.Module+"@"+g.Version] {
			continue
		}
		seen[g.Module+"@"+g.Version] = true
		dir, err := gomod.ModuleDir(ctx, env, g.Module, g.Version)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			b.logf("build: release notes of %s@%s: %v", g.Module, g.Version, err)
			out = append(out, ReleaseNotes{Module: g.Module, Version: g.Version, Releases: []Release{},
				Problem: "the module could not be downloaded (see the build log)"})
			continue
		}
		rn := readReleaseNotes(os.DirFS(dir), g.Module, g.Version)
		if rn.Problem != "" {
			b.logf("build: release notes of %s@%s: %s", g.Module, g.Version, rn.Problem)
		} else {
			b.logf("build: release notes of %s@%s: %d releases in %s", g.Module, g.Version, len(rn.Releases), rn.File)
		}
		out = append(out, rn)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Module != out[j].Module {
			return out[i].Module < out[j].Module
		}
		return out[i].Version < out[j].Version
	})
	return out, nil
}

// A release's section in Kubernetes' CHANGELOG-<minor>.md.
var mdReleaseRE = regexp.MustCompile(`^# (v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?)\s*$`)

// readReleaseNotes reads the notes of a module's file tree at version:
// Kubernetes keeps one CHANGELOG/CHANGELOG-<minor>.md per minor release
// with a "# v1.37.1" section per release; containerd one
// releases/<version>.toml per release. Kubernetes adds a release's section
// after tagging it, so the module of v1.37.2 has notes up to v1.37.1.
func readReleaseNotes(fsys fs.FS, module, version string) ReleaseNotes {
	rn := ReleaseNotes{Module: module, Version: version, Releases: []Release{}}
	if minor := semver.MajorMinor(version); minor != "" {
		name := "CHANGELOG/CHANGELOG-" + strings.TrimPrefix(minor, "v") + ".md"
		if text, err := readNotes(fsys, name); err == nil {
			rn.File = name
			rn.Releases = markdownReleases(text)
			return rn
		}
	}
	tomls, _ := fs.Glob(fsys, "releases/v*.toml")
	for _, name := range tomls {
		v := strings.TrimSuffix(path.Base(name), ".toml")
		if !semver.IsValid(v) {
			continue
		}
		text, err := readNotes(fsys, name)
		if err != nil {
			continue
		}
		rn.File = "releases/"
		rn.Releases = append(rn.Releases, Release{Version: v, CVEs: ids(cveRE, text), GHSAs: ids(ghsaRE, text)})
	}
	if len(rn.Releases) == 0 {
		rn.Problem = "no release notes in the module"
		return rn
	}
	sort.Slice(rn.Releases, func(i, j int) bool { return SemverLess(rn.Releases[j].Version, rn.Releases[i].Version) })
	return rn
}

// markdownReleases splits a Kubernetes CHANGELOG into its releases, in
// the file's order (newest first).
func markdownReleases(text string) []Release {
	var out []Release
	var section strings.Builder
	flush := func() {
		if len(out) > 0 {
			out[len(out)-1].CVEs, out[len(out)-1].GHSAs = ids(cveRE, section.String()), ids(ghsaRE, section.String())
		}
		section.Reset()
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, maxReleaseNotes)
	for sc.Scan() {
		if m := mdReleaseRE.FindStringSubmatch(sc.Text()); m != nil {
			flush()
			out = append(out, Release{Version: m[1]})
			continue
		}
		section.WriteString(sc.Text() + "\n")
	}
	flush()
	if out == nil {
		out = []Release{}
	}
	return out
}

func readNotes(fsys fs.FS, name string) (string, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxReleaseNotes))
	return string(data), err
}

// SemverLess orders Go module versions ("v1.2.3"), pre-releases before
// their release; versions that are not semver compare as strings.
func SemverLess(a, b string) bool {
	if !semver.IsValid(a) || !semver.IsValid(b) {
		return a < b
	}
	return semver.Compare(a, b) < 0
}
