package build

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/drover-os/drover/image/deb"
	"github.com/drover-os/drover/image/lock"
	"github.com/drover-os/drover/image/needs"
	"github.com/drover-os/drover/image/recipe"
	"github.com/drover-os/drover/image/sources"
	"github.com/drover-os/drover/image/tree"
)

// What the recipe leaves out of the image: packages of the closure it
// excludes and paths it removes. Both are recorded in the manifest, and
// both feed the needs check: nothing installed may need a left-out path.

// ExcludedPackage is a package of the lock that the image does not contain.
type ExcludedPackage struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Why     string `json:"why"`
	Paths   int    `json:"paths"` // files and symlinks it ships that no kept package does
	Bytes   int64  `json:"bytes"`
}

// RemovedPaths is one remove entry of the recipe and every path it deleted.
type RemovedPaths struct {
	Glob  string   `json:"glob"`
	Why   string   `json:"why"`
	Bytes int64    `json:"bytes"`
	Paths []string `json:"paths"`
}

// SetuidFile is a file of the root filesystem with the setuid or setgid
// bit: what a reviewer of the image's attack surface wants listed.
type SetuidFile struct {
	Path  string `json:"path"`
	Mode  string `json:"mode"`
	Owner string `json:"owner"` // uid:gid
	From  string `json:"from"`
}

// excludedDebs checks every exclude entry against the lock and returns
// the locked packages it names; an entry for a package the closure does
// not contain is stale.
func excludedDebs(r *recipe.Recipe, l *lock.Lock) (map[string]lock.Deb, error) {
	inLock := map[string]lock.Deb{}
	for _, d := range l.Debs {
		inLock[d.Name] = d
	}
	out := map[string]lock.Deb{}
	var errs []string
	for i, e := range r.Exclude {
		d, ok := inLock[e.Package]
		if !ok {
			errs = append(errs, fmt.Sprintf("%s:%d: exclude[%d]: %s is not in the closure of %s: remove the entry (nothing pulls the package in any more)",
				r.Path, e.Line, i, e.Package, r.LockPath()))
			continue
		}
		out[e.Package] = d
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return out, nil
}

// assembleExcluded reads the excluded packages into a tree of their own, so
// that the needs check knows what they would have supplied, and records
// them in the manifest.
func (b *builder) assembleExcluded(f *sources.Fetched, excluded map[string]lock.Deb) error {
	b.leftOut = map[string]string{}
	if len(excluded) == 0 {
		return nil
	}
	debs := map[string]string{}
	order := make([]string, 0, len(excluded))
	for name := range excluded {
		debs[name] = f.Debs[name]
		order = append(order, name)
	}
	sort.Strings(order)
	et := tree.New()
	if err := deb.ExtractAll(debs, order, et, deb.Options{Skip: skipDuringExtract, Unpacked: unpacked{b.o.Sources.Cache}}, 4); err != nil {
		return fmt.Errorf("reading excluded packages: %w", err)
	}
	entry := map[string]int{}
	for i, e := range b.p.Recipe.Exclude {
		entry[e.Package] = i
	}
	stats := map[string]*ExcludedPackage{}
	for _, e := range b.p.Recipe.Exclude {
		stats[e.Package] = &ExcludedPackage{Name: e.Package, Version: excluded[e.Package].Version, Why: e.Why}
	}
	et.Walk(func(n *tree.Node) error {
		if n.Kind == tree.Dir || b.tree.Get(n.Path) != nil {
			return nil // directories, and paths a kept package ships too
		}
		s := stats[n.Owner]
		if s == nil {
			return nil // "drover" and "implied" nodes of the empty tree
		}
		b.leftOut[n.Path] = fmt.Sprintf("excluded package %s (exclude[%d])", n.Owner, entry[n.Owner])
		s.Paths++
		s.Bytes += int64(len(n.Data))
		return nil
	})
	for _, e := range b.p.Recipe.Exclude {
		b.man.Excluded = append(b.man.Excluded, *stats[e.Package])
	}
	return nil
}

// removePaths applies the recipe's remove entries to the installed tree.
// An entry that matches nothing is an error: the recipe is stale.
func (b *builder) removePaths() error {
	r := b.p.Recipe
	var stale []string
	for i, rm := range r.Remove {
		if !rm.Applies(r.Arch) {
			continue
		}
		glob := tree.Canonical(rm.Glob)
		matched := b.tree.Glob(glob)
		if len(matched) == 0 {
			stale = append(stale, fmt.Sprintf("%s:%d: remove[%d]: %s matches nothing in the image: remove the entry or fix the glob", r.Path, rm.Line, i, rm.Glob))
			continue
		}
		rec := RemovedPaths{Glob: rm.Glob, Why: rm.Why}
		by := fmt.Sprintf("remove[%d] %s", i, rm.Glob)
		all := b.tree.Paths()
		for _, m := range matched {
			for _, p := range all {
				if p != m && !strings.HasPrefix(p, m+"/") {
					continue
				}
				n := b.tree.Get(p)
				if n == nil {
					continue // under an earlier match
				}
				rec.Paths = append(rec.Paths, p)
				rec.Bytes += int64(len(n.Data))
				if n.Kind != tree.Dir {
					b.leftOut[p] = by
				}
			}
			b.tree.Remove(m)
		}
		b.man.Removed = append(b.man.Removed, rec)
	}
	if len(stale) > 0 {
		return fmt.Errorf("%s", strings.Join(stale, "\n"))
	}
	return nil
}

// checkNeeds fails the build when an installed file needs a left-out path.
func (b *builder) checkNeeds() error {
	problems := needs.Check(b.tree, b.leftOut)
	if len(problems) == 0 {
		return nil
	}
	lines := make([]string, len(problems))
	for i, p := range problems {
		lines[i] = p.String()
	}
	return fmt.Errorf("%s: %d installed files need what the recipe leaves out:\n  %s", b.p.Recipe.Path, len(problems), strings.Join(lines, "\n  "))
}

// SetuidFiles lists the files with the setuid or setgid bit.
func SetuidFiles(files []FileEntry) []SetuidFile {
	out := []SetuidFile{}
	for _, f := range files {
		mode, err := strconv.ParseUint(f.Mode, 8, 32)
		if err == nil && f.Kind == tree.Regular.String() && mode&0o6000 != 0 {
			out = append(out, SetuidFile{Path: f.Path, Mode: f.Mode, Owner: f.Owner, From: f.From})
		}
	}
	return out
}
