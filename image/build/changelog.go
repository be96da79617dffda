package build

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"maps"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"pault.ag/go/debian/changelog"
	"pault.ag/go/debian/version"

	"github.com/drover-os/drover/image/debian"
)

// What a new version fixes (`drover diff`): the build records the recent
// entries of each source package's Debian changelog, read while the .debs
// are unpacked (deb.Options.Aside) because the image leaves /usr/share/doc
// out, and the CVE and GHSA IDs the Go components' release notes name
// (releasenotes.go).

const (
	// Entries dated within changelogYears before the build's epoch are
	// kept, and at least changelogMinEntries per source: enough to cover
	// the previous build of a node, which is days or months old.
	changelogYears      = 2
	changelogMinEntries = 3
	// changelogMaxText bounds an entry's text: the kernel's entries list
	// every upstream commit (1.7 MB for two years), and their CVE IDs are
	// what a reviewer needs, which are kept in full.
	changelogMaxText = 2048
	// maxChangelogRead bounds what is decompressed of one changelog: a
	// small gzip member can expand without bound.
	maxChangelogRead = 32 << 20
)

var (
	cveRE  = regexp.MustCompile(`CVE-\d{4}-\d{4,}`)
	ghsaRE = regexp.MustCompile(`GHSA(-[0-9a-z]{4}){3}`)
)

// changelogFiles collects the changelogs of /usr/share/doc/*/ while
// packages are unpacked; it is the build's deb.Aside.
type changelogFiles struct {
	mu    sync.Mutex
	files map[string]map[string][]byte // package → path → gzip data
}

func newChangelogFiles() *changelogFiles {
	return &changelogFiles{files: map[string]map[string][]byte{}}
}

// Want takes /usr/share/doc/<dir>/changelog.Debian.gz, the binNMU
// changelog.Debian.<arch>.gz and changelog.gz (the Debian changelog of a
// native package, else the upstream one).
func (c *changelogFiles) Want(p string) bool {
	dir, name := path.Split(p)
	if path.Dir(strings.TrimSuffix(dir, "/")) != "/usr/share/doc" {
		return false
	}
	return name == "changelog.gz" || strings.HasPrefix(name, "changelog.Debian.") && strings.HasSuffix(name, ".gz")
}

func (c *changelogFiles) Put(pkg, p string, data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.files[pkg] == nil {
		c.files[pkg] = map[string][]byte{}
	}
	c.files[pkg][p] = data
}

// recordChangelogs fills the manifest's Changelogs.
func (b *builder) recordChangelogs(ctx context.Context) error {
	since := b.epoch.AddDate(-changelogYears, 0, 0)
	cl := &Changelogs{Since: since, MinEntries: changelogMinEntries, MaxText: changelogMaxText}
	cl.Debian = debianChangelogs(b.man.Packages, b.changelogs.files, since)
	b.changelogs.files = nil // read: the image and its outputs need the memory more
	var err error
	if cl.Go, err = b.releaseNotes(ctx); err != nil {
		return err
	}
	b.man.Changelogs = cl
	entries, cves := 0, map[string]bool{}
	for _, s := range cl.Debian {
		entries += len(s.Entries)
		for _, e := range s.Entries {
			for _, id := range e.CVEs {
				cves[id] = true
			}
		}
		if s.Problem != "" {
			b.logf("build: changelog of %s: %s", s.Source, s.Problem)
		}
	}
	b.logf("build: changelogs of %d source packages since %s: %d entries naming %d CVEs", len(cl.Debian), since.Format(time.DateOnly), entries, len(cves))
	return nil
}

// debianChangelogs reads one changelog per source package of pkgs from the
// files their .debs carry (package → path → gzip data), keeping the
// entries dated since since (and at least changelogMinEntries).
func debianChangelogs(pkgs []Package, files map[string]map[string][]byte, since time.Time) []SourceChangelog {
	bySource := map[string][]Package{}
	for _, p := range pkgs {
		src := p.Source
		if src == "" {
			src = p.Name
		}
		bySource[src] = append(bySource[src], p)
	}
	out := make([]SourceChangelog, 0, len(bySource))
	for _, src := range slices.Sorted(maps.Keys(bySource)) {
		out = append(out, sourceChangelog(src, bySource[src], files, since))
	}
	return out
}

func sourceChangelog(src string, bins []Package, files map[string]map[string][]byte, since time.Time) SourceChangelog {
	sc := SourceChangelog{Source: src, Entries: []ChangelogEntry{}}
	// The binary of the newest upload first: during a transition the
	// arch: all packages of a source can lag behind the others.
	bins = slices.Clone(bins)
	sort.SliceStable(bins, func(i, j int) bool {
		if c := debian.CompareVersions(bins[i].SourceVersion, bins[j].SourceVersion); c != 0 {
			return c > 0
		}
		return bins[i].Name < bins[j].Name
	})
	pkg, file := pickChangelog(bins, files)
	if file == "" {
		var names []string
		for _, p := range bins {
			names = append(names, p.Name)
		}
		sc.Problem = "no changelog.Debian.gz in " + strings.Join(names, ", ")
	} else {
		sc.Package, sc.File = pkg, file
		entries, more, err := parseChangelog(files[pkg][file], since)
		sc.Entries, sc.More = append(sc.Entries, entries...), more
		if err != nil {
			sc.Problem = fmt.Sprintf("%s of %s: %v", file, pkg, err)
		}
	}
	// binNMUs rebuild a binary without a source upload; their entry is in
	// changelog.Debian.<arch>.gz of each rebuilt package.
	have := map[string]bool{}
	for _, e := range sc.Entries {
		have[e.Version] = true
	}
	for _, p := range bins {
		for _, f := range slices.Sorted(maps.Keys(files[p.Name])) {
			if !isBinNMUChangelog(f) {
				continue
			}
			entries, _, _ := parseChangelog(files[p.Name][f], time.Time{})
			for _, e := range entries {
				if !have[e.Version] {
					have[e.Version] = true
					sc.Entries = append(sc.Entries, e)
				}
			}
		}
	}
	sort.SliceStable(sc.Entries, func(i, j int) bool { return debian.CompareVersions(sc.Entries[i].Version, sc.Entries[j].Version) > 0 })
	return sc
}

// pickChangelog finds the changelog.Debian.gz of the first of bins that
// ships one (in any doc directory: kmod's is libkmod2's), or for a native
// source the changelog.gz, which is then the Debian changelog.
func pickChangelog(bins []Package, files map[string]map[string][]byte) (pkg, file string) {
	for _, name := range []string{"changelog.Debian.gz", "changelog.gz"} {
		if name == "changelog.gz" && !isNative(bins[0].SourceVersion) {
			break
		}
		for _, p := range bins {
			for _, f := range slices.Sorted(maps.Keys(files[p.Name])) {
				if path.Base(f) == name {
					return p.Name, f
				}
			}
		}
	}
	return "", ""
}

func isBinNMUChangelog(p string) bool {
	name := path.Base(p)
	return name != "changelog.Debian.gz" && strings.HasPrefix(name, "changelog.Debian.") && strings.HasSuffix(name, ".gz")
}

func isNative(v string) bool {
	pv, err := version.Parse(v)
	return err == nil && pv.IsNative()
}

// parseChangelog reads the entries of a gzip-compressed Debian changelog,
// newest first, stopping at the first entry dated before since once
// changelogMinEntries are read. more says the changelog goes on: older
// entries were left out, or what follows could not be parsed (Debian cuts
// old entries, ending the file with a note that is no entry).
func parseChangelog(gz []byte, since time.Time) (entries []ChangelogEntry, more bool, err error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, false, fmt.Errorf("decompressing: %w", err)
	}
	lr := &io.LimitedReader{R: zr, N: maxChangelogRead}
	br := bufio.NewReader(lr)
	for {
		e, err := changelog.ParseOne(br)
		switch {
		case err == io.EOF && len(entries) == 0:
			return nil, false, fmt.Errorf("no complete entry")
		case err == io.EOF:
			return entries, lr.N == 0, nil
		case err != nil && len(entries) == 0:
			return nil, false, fmt.Errorf("parsing the first entry: %w", err)
		case err != nil:
			return entries, true, nil
		case len(entries) >= changelogMinEntries && e.When.Before(since):
			return entries, true, nil
		}
		entries = append(entries, newChangelogEntry(e))
	}
}

func newChangelogEntry(e *changelog.ChangelogEntry) ChangelogEntry {
	var lines []string
	for _, l := range strings.Split(e.Changelog, "\n") {
		lines = append(lines, strings.TrimPrefix(strings.TrimRight(l, " \t\r"), "  "))
	}
	for len(lines) > 0 && lines[0] == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	text, cut := cutLines(lines, changelogMaxText)
	return ChangelogEntry{Version: e.Version.String(), Date: e.When.UTC(), Distribution: e.Target, Urgency: e.Arguments["urgency"],
		CVEs: ids(cveRE, e.Changelog), Text: text, CutLines: cut}
}

// cutLines joins the lines that fit in max bytes and counts the others; a
// first line longer than max is cut itself.
func cutLines(lines []string, max int) (string, int) {
	var b strings.Builder
	for i, l := range lines {
		if b.Len()+len(l)+1 > max {
			if i == 0 {
				l = l[:max]
				for !utf8.ValidString(l) {
					l = l[:len(l)-1]
				}
				return l, len(lines) - 1
			}
			return strings.TrimSuffix(b.String(), "\n"), len(lines) - i
		}
		b.WriteString(l + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n"), 0
}

// ids are the distinct matches of re in text, sorted by CompareIDs; nil
// when none.
func ids(re *regexp.Regexp, text string) []string {
	found := re.FindAllString(text, -1)
	if len(found) == 0 {
		return nil
	}
	slices.SortFunc(found, CompareIDs)
	return slices.Compact(found)
}

// CompareIDs orders CVE and GHSA IDs: by year, then by number
// (CVE-2026-9999 before CVE-2026-10000).
func CompareIDs(a, b string) int {
	if len(a) != len(b) && len(a) > 9 && len(b) > 9 && a[:9] == b[:9] { // same "CVE-YYYY-"
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}
