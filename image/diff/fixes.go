package diff

import (
	"maps"
	"slices"
	"strings"

	"github.com/drover-os/drover/image/build"
	"github.com/drover-os/drover/image/debian"
)

// Kinds of Fix.
const (
	FixDebian = "debian"
	FixGo     = "go"
)

// Fix is what the new version of one changed Debian source package or Go
// module fixes, by its changelog or release notes.
type Fix struct {
	Kind string `json:"kind"` // FixDebian or FixGo
	// Name is the source package or the Go module; Packages its binary
	// packages or Go components that changed.
	Name      string   `json:"name"`
	Packages  []string `json:"packages"`
	Old       string   `json:"old"`
	New       string   `json:"new"`
	Security  bool     `json:"security,omitempty"` // a package of it is a newer version from a -security suite
	Downgrade bool     `json:"downgrade,omitempty"`
	// Recorded is false when the manifest holds no changelog or release
	// notes for it at all; Notes then say why.
	Recorded bool `json:"recorded"`
	// Entries (Debian) and Releases (Go) are those with
	// Old < version <= New, newest first; for a downgrade those with
	// New < version <= Old, whose fixes the image loses.
	Entries  []build.ChangelogEntry `json:"entries,omitempty"`
	Releases []build.Release        `json:"releases,omitempty"`
	CVEs     []string               `json:"cves"`  // named by Entries or Releases
	GHSAs    []string               `json:"ghsas"` // named by Releases
	// Notes say what the record cannot tell: entries before the recorded
	// ones, a release whose notes are not in its module, …
	Notes []string `json:"notes"`
}

// compareFixes finds, for every Debian source package and Go module whose
// version changed, the changelog entries or releases between the two
// versions, from the newer manifest (the older one for a downgrade).
// Images of two architectures are no upgrade of each other: nothing is
// reported then.
func compareFixes(old, new *build.Manifest) []Fix {
	out := []Fix{}
	if archOf(old) != archOf(new) {
		return out
	}
	out = append(out, debianFixes(old, new)...)
	return append(out, goFixes(old, new)...)
}

// debianBound is the version of a package's changelog that it was built
// from: its source version, or for a binNMU (1.47.2-3+b12) its own,
// whose entry is in changelog.Debian.<arch>.gz. Manifests written before
// the source was recorded have only the package's version.
func debianBound(p build.Package) string {
	if p.SourceVersion == "" || strings.HasPrefix(p.Version, p.SourceVersion+"+b") {
		return p.Version
	}
	return p.SourceVersion
}

// debianFixes compares source packages, not binary ones: a source's
// binaries share one changelog, and a new upload may rename them (a
// kernel's ABI, a library's soname), which the package list shows as one
// added and one removed.
func debianFixes(old, new *build.Manifest) []Fix {
	key := func(p build.Package) string { return p.Name }
	om, nm := byName(old.Packages, key), byName(new.Packages, key)
	// A manifest written before sources were recorded names none: the
	// other manifest's source of the same package is the best guess.
	sourceOf := func(p build.Package, other map[string]build.Package) string {
		switch {
		case p.Source != "":
			return p.Source
		case other[p.Name].Source != "":
			return other[p.Name].Source
		}
		return p.Name
	}
	type sides struct{ old, new []build.Package }
	bySource := map[string]*sides{}
	group := func(src string) *sides {
		if bySource[src] == nil {
			bySource[src] = &sides{}
		}
		return bySource[src]
	}
	for _, p := range old.Packages {
		g := group(sourceOf(p, nm))
		g.old = append(g.old, p)
	}
	for _, p := range new.Packages {
		g := group(sourceOf(p, om))
		g.new = append(g.new, p)
	}
	fixes := map[string]*Fix{}
	for src, g := range bySource {
		if len(g.old) == 0 || len(g.new) == 0 {
			continue // a source added or removed: no versions to compare
		}
		f := &Fix{Kind: FixDebian, Name: src, Old: maxBound(g.old), New: maxBound(g.new)}
		if f.Old == f.New {
			continue // the same upload on both sides
		}
		changed := map[string]bool{}
		for _, p := range g.old {
			if n, ok := nm[p.Name]; !ok || n.Version != p.Version {
				changed[p.Name] = true
			}
		}
		for _, p := range g.new {
			if o, ok := om[p.Name]; !ok || o.Version != p.Version {
				changed[p.Name] = true
				// A security update: a newer version from a -security suite.
				f.Security = f.Security || debian.IsSecuritySuite(p.Suite) && debian.CompareVersions(f.New, f.Old) > 0
			}
		}
		f.Packages = slices.Sorted(maps.Keys(changed))
		fixes[src] = f
	}
	out := []Fix{}
	for _, src := range slices.Sorted(maps.Keys(fixes)) {
		f := fixes[src]
		lo, hi, from := f.Old, f.New, new
		if f.Downgrade = debian.CompareVersions(f.New, f.Old) < 0; f.Downgrade {
			lo, hi, from = f.New, f.Old, old
		}
		f.Notes = []string{}
		sc := sourceChangelog(from, src)
		switch {
		case from.Changelogs == nil:
			f.Notes = append(f.Notes, "changelog not recorded: the "+side(from == new)+" manifest predates drover recording changelogs")
		case sc == nil:
			f.Notes = append(f.Notes, "changelog not recorded in the "+side(from == new)+" manifest")
		case sc.Problem != "" && len(sc.Entries) == 0:
			f.Notes = append(f.Notes, "changelog not recorded: "+sc.Problem)
		default:
			f.Recorded = true
			f.Entries, f.Notes = debianEntries(sc, lo, hi)
		}
		for _, e := range f.Entries {
			f.CVEs = append(f.CVEs, e.CVEs...)
		}
		f.CVEs, f.GHSAs = sortIDs(f.CVEs), []string{}
		out = append(out, *f)
	}
	return out
}

// maxBound is the newest debianBound of pkgs.
func maxBound(pkgs []build.Package) string {
	best := debianBound(pkgs[0])
	for _, p := range pkgs[1:] {
		if debian.CompareVersions(debianBound(p), best) > 0 {
			best = debianBound(p)
		}
	}
	return best
}

// debianEntries are the entries of sc with lo < version <= hi, and notes
// on what the record does not cover.
func debianEntries(sc *build.SourceChangelog, lo, hi string) ([]build.ChangelogEntry, []string) {
	entries, notes := []build.ChangelogEntry{}, []string{}
	for _, e := range sc.Entries {
		if debian.CompareVersions(e.Version, lo) > 0 && debian.CompareVersions(e.Version, hi) <= 0 {
			entries = append(entries, e)
		}
	}
	if len(sc.Entries) == 0 {
		return entries, notes
	}
	newest, oldest := sc.Entries[0], sc.Entries[len(sc.Entries)-1]
	if debian.CompareVersions(newest.Version, hi) < 0 {
		notes = append(notes, "the recorded changelog ends at "+newest.Version)
	}
	if sc.More && debian.CompareVersions(oldest.Version, lo) > 0 {
		notes = append(notes, "entries before "+oldest.Version+" ("+oldest.Date.Format("2006-01-02")+") were not recorded")
	}
	return entries, notes
}

func sourceChangelog(m *build.Manifest, src string) *build.SourceChangelog {
	if m.Changelogs == nil {
		return nil
	}
	for i := range m.Changelogs.Debian {
		if m.Changelogs.Debian[i].Source == src {
			return &m.Changelogs.Debian[i]
		}
	}
	return nil
}

func side(isNew bool) string {
	if isNew {
		return "new"
	}
	return "old"
}

// goFixes reports each Go module whose version changed once, with the
// components built from it.
func goFixes(old, new *build.Manifest) []Fix {
	key := func(g build.GoComponent) string { return g.Name }
	om, nm := byName(old.Go, key), byName(new.Go, key)
	fixes := map[string]*Fix{}
	var order []string
	for _, name := range unionKeys(om, nm) {
		o, inOld := om[name]
		n, inNew := nm[name]
		if !inOld || !inNew || o.Module != n.Module || o.Version == n.Version {
			continue
		}
		k := n.Module + " " + o.Version + " " + n.Version
		if fixes[k] == nil {
			fixes[k] = &Fix{Kind: FixGo, Name: n.Module, Old: o.Version, New: n.Version}
			order = append(order, k)
		}
		fixes[k].Packages = append(fixes[k].Packages, name)
	}
	slices.Sort(order)
	out := []Fix{}
	for _, k := range order {
		f := fixes[k]
		lo, hi, from := f.Old, f.New, new
		if f.Downgrade = build.SemverLess(f.New, f.Old); f.Downgrade {
			lo, hi, from = f.New, f.Old, old
		}
		f.Notes = []string{}
		rn := releaseNotes(from, f.Name, hi)
		switch {
		case from.Changelogs == nil:
			f.Notes = append(f.Notes, "release notes not recorded: the "+side(from == new)+" manifest predates drover recording them")
		case rn == nil:
			f.Notes = append(f.Notes, "release notes not recorded in the "+side(from == new)+" manifest")
		case rn.Problem != "":
			f.Notes = append(f.Notes, rn.Problem)
		default:
			f.Recorded = true
			f.Releases, f.Notes = goReleases(rn, lo, hi)
		}
		for _, r := range f.Releases {
			f.CVEs = append(f.CVEs, r.CVEs...)
			f.GHSAs = append(f.GHSAs, r.GHSAs...)
		}
		f.CVEs, f.GHSAs = sortIDs(f.CVEs), sortIDs(f.GHSAs)
		out = append(out, *f)
	}
	return out
}

// goReleases are the releases of rn with lo < version <= hi, and notes on
// what the module's notes do not cover.
func goReleases(rn *build.ReleaseNotes, lo, hi string) ([]build.Release, []string) {
	releases, notes := []build.Release{}, []string{}
	have, oldest := false, ""
	for _, r := range rn.Releases {
		if build.SemverLess(lo, r.Version) && !build.SemverLess(hi, r.Version) {
			releases = append(releases, r)
		}
		have = have || r.Version == hi
		if oldest == "" || build.SemverLess(r.Version, oldest) {
			oldest = r.Version
		}
	}
	if !have {
		notes = append(notes, hi+"'s own notes are not in its module")
	}
	if oldest != "" && build.SemverLess(lo, oldest) {
		notes = append(notes, "releases before "+oldest+" are not in "+rn.File)
	}
	return releases, notes
}

func releaseNotes(m *build.Manifest, module, version string) *build.ReleaseNotes {
	if m.Changelogs == nil {
		return nil
	}
	for i := range m.Changelogs.Go {
		if rn := &m.Changelogs.Go[i]; rn.Module == module && rn.Version == version {
			return rn
		}
	}
	return nil
}

// sortIDs sorts CVE or GHSA IDs once each; never nil.
func sortIDs(ids []string) []string {
	out := slices.Clone(ids)
	slices.SortFunc(out, build.CompareIDs)
	out = slices.Compact(out)
	if out == nil {
		out = []string{}
	}
	return out
}

// fixCounts counts, over the upgrades whose changelog is recorded, the
// distinct CVE and GHSA IDs and the packages (sources and modules) naming
// any; the downgrades, and the CVE IDs the entries they lose name; and the
// packages whose changelog is not recorded.
func (d *Diff) fixCounts() (cves, ghsas, fixed, downgrades, lostCVEs, unrecorded int) {
	seen, seenGHSA, lost := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, f := range d.Fixes {
		if f.Downgrade {
			downgrades++
		}
		switch {
		case !f.Recorded:
			unrecorded++
		case f.Downgrade:
			for _, id := range f.CVEs {
				lost[id] = true
			}
		case len(f.CVEs)+len(f.GHSAs) > 0:
			fixed++
			for _, id := range f.CVEs {
				seen[id] = true
			}
			for _, id := range f.GHSAs {
				seenGHSA[id] = true
			}
		}
	}
	return len(seen), len(seenGHSA), fixed, downgrades, len(lost), unrecorded
}
