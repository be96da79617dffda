// Package outdated compares a lock with what the archive and the Go module
// proxy publish now (`drover outdated`): the pipeline's "is a rebuild
// due?" question. Check is pure: it takes the lock, the packages the
// recipe's suites' signed indexes list now, and the versions the module
// proxy lists, and says which pins have newer releases (security updates
// marked) and which lock lines disagree with the signed indexes.
package outdated

import (
	"fmt"
	"sort"

	"github.com/drover-os/drover/image/debian"
	"github.com/drover-os/drover/image/gomod"
	"github.com/drover-os/drover/image/lock"
	"github.com/drover-os/drover/image/lockcheck"
)

// Report is what Check found.
type Report struct {
	Packages []Package `json:"packages"` // Debian packages with a newer version, by name
	Go       []Go      `json:"go"`       // Go components with a newer patch release, by name
	// Gone lists locked packages that no suite lists any more ("name
	// version"): not an update, but the lock can no longer be fetched
	// from a fresh mirror.
	Gone []string `json:"gone"`
	// Mismatches are lock lines that disagree with the signed index that
	// lists the same package version: the lock was edited, or the archive
	// replaced a file under a published version.
	Mismatches []Mismatch `json:"mismatches"`
}

// Package is one Debian package with a newer version in the suites.
type Package struct {
	Name      string `json:"name"`
	Arch      string `json:"arch"`
	Locked    string `json:"locked"`
	LockSuite string `json:"lockedSuite"`
	Newer     string `json:"newer"`
	Suite     string `json:"suite"`
	// Security is true when the newer version comes from a -security
	// suite: a published security fix the image lacks.
	Security bool   `json:"security"`
	Source   string `json:"source,omitempty"` // source package of the newer version
}

// Go is one Go component with newer patch releases of its minor.
type Go struct {
	Name    string   `json:"name"`
	Module  string   `json:"module"`
	Locked  string   `json:"locked"`
	Newer   string   `json:"newer"`   // the newest patch release
	Between []string `json:"between"` // every patch release after Locked, oldest first
}

// Mismatch is one lock line the signed index contradicts.
type Mismatch struct {
	Line    int    `json:"line"`
	Package string `json:"package"` // "name version arch"
	Field   string `json:"field"`   // sha256, size or path
	Locked  string `json:"locked"`
	Index   string `json:"index"`
	Suite   string `json:"suite"` // the suite whose index says so
}

// Detail says what disagrees, without the line.
func (m Mismatch) Detail() string {
	return fmt.Sprintf("deb %s: %s %s, but the signed %s index says %s", m.Package, m.Field, m.Locked, m.Suite, m.Index)
}

// Outdated reports whether anything has a newer release; with
// securityOnly, only Debian security updates count.
func (r *Report) Outdated(securityOnly bool) bool {
	for _, p := range r.Packages {
		if p.Security || !securityOnly {
			return true
		}
	}
	return !securityOnly && len(r.Go) > 0
}

// Security counts the packages with a security update.
func (r *Report) Security() int {
	n := 0
	for _, p := range r.Packages {
		if p.Security {
			n++
		}
	}
	return n
}

// Check compares the lock's pins with pkgs, every package the recipe's
// suites list now (each with its Suite set), and goVersions, the module
// proxy's versions of each locked Go module (by module path).
func Check(l *lock.Lock, pkgs []debian.Package, goVersions map[string][]string) *Report {
	type key struct{ name, arch string }
	byName := map[key][]debian.Package{}
	exact := map[string][]debian.Package{} // "name version arch" -> every suite's entry
	for _, p := range pkgs {
		byName[key{p.Name, p.Architecture}] = append(byName[key{p.Name, p.Architecture}], p)
		id := p.Name + " " + p.Version + " " + p.Architecture
		exact[id] = append(exact[id], p)
	}
	r := &Report{Packages: []Package{}, Go: []Go{}, Gone: []string{}, Mismatches: []Mismatch{}}
	for _, d := range l.Debs {
		id := d.Name + " " + d.Version + " " + d.Arch
		// A version of a package is one file archive-wide: whichever
		// suite lists it (the release after a point release takes in
		// the security suite's), its hash is the one the lock pins.
		for _, p := range exact[id] {
			for _, c := range lockcheck.Compare(d, p) {
				r.Mismatches = append(r.Mismatches, Mismatch{Line: d.Line, Package: id, Field: c.Field, Locked: c.Locked, Index: c.Index, Suite: p.Suite})
			}
		}
		cands := byName[key{d.Name, d.Arch}]
		if len(cands) == 0 {
			r.Gone = append(r.Gone, d.Name+" "+d.Version)
			continue
		}
		best := cands[0]
		for _, c := range cands[1:] {
			// Of equal versions the earlier suite's, as the resolver.
			if debian.CompareVersions(c.Version, best.Version) > 0 {
				best = c
			}
		}
		if debian.CompareVersions(best.Version, d.Version) <= 0 {
			continue
		}
		src, _ := best.SourcePackage()
		r.Packages = append(r.Packages, Package{Name: d.Name, Arch: d.Arch, Locked: d.Version, LockSuite: d.Suite,
			Newer: best.Version, Suite: best.Suite, Security: debian.IsSecuritySuite(best.Suite), Source: src})
	}
	for _, g := range l.Go {
		if up := gomod.PatchUpdates(g.Version, goVersions[g.Module]); len(up) > 0 {
			r.Go = append(r.Go, Go{Name: g.Name, Module: g.Module, Locked: g.Version, Newer: up[len(up)-1], Between: up})
		}
	}
	sort.Slice(r.Packages, func(i, j int) bool { return r.Packages[i].Name < r.Packages[j].Name })
	sort.Slice(r.Go, func(i, j int) bool { return r.Go[i].Name < r.Go[j].Name })
	sort.Slice(r.Mismatches, func(i, j int) bool { return r.Mismatches[i].Line < r.Mismatches[j].Line })
	sort.Strings(r.Gone)
	return r
}

// GoModules are the distinct modules of the lock's Go components, whose
// versions Check needs.
func GoModules(l *lock.Lock) []string {
	seen := map[string]bool{}
	var out []string
	for _, g := range l.Go {
		if !seen[g.Module] {
			seen[g.Module] = true
			out = append(out, g.Module)
		}
	}
	sort.Strings(out)
	return out
}
