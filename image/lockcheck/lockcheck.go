// Package lockcheck judges a lock's word by the signed archive: every deb
// line must be an entry of the Packages index of the suite it names, as the
// InRelease the lock pins for that suite lists it (name, version,
// architecture, sha256, size and pool path), and a Release fetched fresh
// must not be older than the one the lock records. A lock is text anyone
// with commit rights can edit; the build trusts the archive's signature,
// not the line.
//
// It is pure: the caller (image/sources) fetches and verifies the Releases
// and indexes, this package compares.
package lockcheck

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/drover-os/drover/image/debian"
	"github.com/drover-os/drover/image/lock"
)

// Suite is one suite's signed index as the check sees it.
type Suite struct {
	Name string
	// Date is the Date of the Release whose index Packages is.
	Date time.Time
	// Pinned is true when that Release is the one the lock pins (its
	// sha256 is the lock's). False when the pinned one could be had
	// neither from the cache nor from the mirror, and the mirror's newer
	// one stands in: a version superseded since then is then not in
	// Packages, and cannot be told from a forged line.
	Pinned bool
	// LockedDate is the Date the lock records for the suite.
	LockedDate time.Time
	// Packages are every entry of the suite's Packages indexes for the
	// recipe's components and architecture.
	Packages []debian.Package
}

// Problem is one deb line the signed index does not vouch for.
type Problem struct {
	Deb   lock.Deb
	Suite string // the suite whose index was consulted: the line's
	// Field is what differs from the index's entry of the same name,
	// version and architecture: "sha256", "size" or "path". Empty when
	// the index has no such entry (Listed says what it has instead) or
	// when the lock pins no such suite (NoSuite).
	Field, Locked, Index string
	// Listed are the index's entries of the line's name and architecture
	// when none has the locked version (empty: the index lists no such
	// package at all).
	Listed  []debian.Package
	NoSuite bool
	// Pinned and Date describe the Release consulted (see Suite).
	Pinned           bool
	Date, LockedDate time.Time
}

// Diff is one field in which a lock line differs from an index entry of
// the same name, version and architecture.
type Diff struct{ Field, Locked, Index string }

// Compare returns the fields in which d differs from p, an index entry of
// d's name, version and architecture: sha256 and size always (a version
// of a package is one file archive-wide, whichever suite lists it), the
// pool path only when p is from d's own suite (the path is relative to
// that suite's archive).
func Compare(d lock.Deb, p debian.Package) []Diff {
	var out []Diff
	if d.SHA256 != p.SHA256 {
		out = append(out, Diff{"sha256", d.SHA256, p.SHA256})
	}
	if d.Size != p.Size {
		out = append(out, Diff{"size", fmt.Sprint(d.Size), fmt.Sprint(p.Size)})
	}
	if p.Suite == d.Suite && p.Filename != d.Path {
		out = append(out, Diff{"path", d.Path, p.Filename})
	}
	return out
}

// Check returns every deb line that the index of its suite does not list
// exactly, in line order. suites are the lock's suites with their indexes.
func Check(debs []lock.Deb, suites []Suite) []Problem {
	type key struct{ name, arch string }
	bySuite := map[string]*Suite{}
	entries := map[string]map[key][]debian.Package{}
	for i := range suites {
		s := &suites[i]
		bySuite[s.Name] = s
		m := map[key][]debian.Package{}
		for _, p := range s.Packages {
			k := key{p.Name, p.Architecture}
			m[k] = append(m[k], p)
		}
		entries[s.Name] = m
	}
	var out []Problem
	for _, d := range debs {
		s := bySuite[d.Suite]
		if s == nil {
			out = append(out, Problem{Deb: d, Suite: d.Suite, NoSuite: true})
			continue
		}
		base := Problem{Deb: d, Suite: s.Name, Pinned: s.Pinned, Date: s.Date, LockedDate: s.LockedDate}
		listed := entries[s.Name][key{d.Name, d.Arch}]
		found := false
		for _, p := range listed {
			if p.Version != d.Version {
				continue
			}
			found = true
			p.Suite = s.Name // the index's entry is the suite's, whatever its caller set
			for _, diff := range Compare(d, p) {
				pr := base
				pr.Field, pr.Locked, pr.Index = diff.Field, diff.Locked, diff.Index
				out = append(out, pr)
			}
		}
		if !found {
			pr := base
			pr.Listed = append([]debian.Package(nil), listed...)
			out = append(out, pr)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Deb.Line < out[j].Deb.Line })
	return out
}

// Detail says what is wrong with the line, without the line's number.
func (p Problem) Detail() string {
	id := fmt.Sprintf("deb %s %s %s", p.Deb.Name, p.Deb.Version, p.Deb.Arch)
	if p.NoSuite {
		return fmt.Sprintf("%s names suite %q, which the lock does not pin", id, p.Suite)
	}
	index := fmt.Sprintf("the signed %s index (Release of %s)", p.Suite, rfc3339(p.Date))
	var s string
	switch {
	case p.Field != "":
		s = fmt.Sprintf("%s: %s %s, but %s says %s", id, p.Field, p.Locked, index, p.Index)
	case len(p.Listed) == 0:
		s = fmt.Sprintf("%s: %s lists no %s for %s at all", id, index, p.Deb.Name, p.Deb.Arch)
	default:
		var has []string
		for _, l := range p.Listed {
			has = append(has, fmt.Sprintf("version %s with sha256 %s, size %d", l.Version, l.SHA256, l.Size))
		}
		s = fmt.Sprintf("%s: %s has no version %s of %s: it has %s", id, index, p.Deb.Version, p.Deb.Name, strings.Join(has, "; "))
	}
	if !p.Pinned {
		s += fmt.Sprintf(" (the Release the lock pins, of %s, is neither in the cache nor served by the mirror any more: a version superseded since cannot be told from a forged line)", rfc3339(p.LockedDate))
	}
	return s
}

// ErrContradicted is what every error saying that the lock disagrees with
// the signed archive matches (errors.Is): drover exits 2 for it, as
// `drover outdated` does for a lock line the index contradicts.
var ErrContradicted = errors.New("the lock disagrees with the signed archive")

// Contradicted marks err, which says how the lock disagrees with the
// signed archive, as matching ErrContradicted.
func Contradicted(err error) error { return contradicted{err} }

type contradicted struct{ error }

func (c contradicted) Unwrap() error        { return c.error }
func (c contradicted) Is(target error) bool { return target == ErrContradicted }

// Error is a lock that the signed indexes contradict: what `drover build`
// and `drover fetch` refuse before any package is downloaded or unpacked.
type Error struct {
	Lock, Recipe string // paths, as messages name them
	Problems     []Problem
}

// Is makes an Error match ErrContradicted.
func (e *Error) Is(target error) bool { return target == ErrContradicted }

func (e *Error) Error() string {
	var b strings.Builder
	lines := map[int]bool{}
	for _, p := range e.Problems {
		fmt.Fprintf(&b, "%s:%d: %s\n", e.Lock, p.Deb.Line, p.Detail())
		lines[p.Deb.Line] = true
	}
	fmt.Fprintf(&b, "%s", Advice(e.Lock, e.Recipe, len(lines)))
	return b.String()
}

// Advice is what to do about lines of lockPath that the signed index
// contradicts: re-resolve them from the archive. Plain `drover lock` keeps
// a lock whose inputs and Releases are unchanged, forged lines and all;
// --refresh does not.
func Advice(lockPath, recipePath string, n int) string {
	lines := "a line of %s disagrees"
	if n != 1 {
		lines = fmt.Sprintf("%d lines of %%s disagree", n)
	}
	return fmt.Sprintf(lines+" with the archive's signed index: the lock was edited, or made against a mirror that lied; no package was downloaded or unpacked. Run `drover lock --refresh %s` to re-resolve every package from the signed archive, and review the diff",
		lockPath, recipePath)
}

// OlderReleaseError is a Release fetched fresh that is dated before the
// one the lock records for its suite: a mirror that is behind, or one
// replaying an old signed Release (still validly signed: a Release
// without Valid-Until never expires).
type OlderReleaseError struct {
	Suite           string
	Fetched, Locked time.Time
	// Advice is what to do; empty for the advice of the commands that
	// take --allow-older-release.
	Advice string
}

func (e *OlderReleaseError) Error() string {
	advice := e.Advice
	if advice == "" {
		advice = "use an up-to-date mirror, or pass --allow-older-release to accept the older Release on purpose"
	}
	return fmt.Sprintf("the mirror's InRelease for %s is dated %s, older than the %s the lock records: the mirror is behind, or replays an old signed Release; %s",
		e.Suite, rfc3339(e.Fetched), rfc3339(e.Locked), advice)
}

// CheckDate refuses fetched, the Date of a Release of suite fetched now,
// when it is older than the date locked records for suite. A suite the
// lock does not record has nothing to go back from.
func CheckDate(locked []lock.Suite, suite string, fetched time.Time) error {
	for _, s := range locked {
		if s.Name == suite && fetched.Before(s.Date) {
			return &OlderReleaseError{Suite: suite, Fetched: fetched, Locked: s.Date}
		}
	}
	return nil
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }
