package sources

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/drover-os/drover/image/debian"
	"github.com/drover-os/drover/image/lock"
	"github.com/drover-os/drover/image/lockcheck"
	"github.com/drover-os/drover/image/recipe"
)

// keepRelease puts a verified InRelease into the cache under its sha256:
// the lock pins it, and a build checks the lock's packages against it
// after the mirror has moved on to a newer one (a -security suite's
// changes daily).
func (o *Options) keepRelease(rel *debian.Release) error {
	if ok, _, err := o.Cache.Check(rel.SHA256); err == nil && ok {
		return nil
	}
	if _, err := o.Cache.Put(rel.SHA256, bytes.NewReader(rel.Data)); err != nil {
		return fmt.Errorf("keeping the InRelease of %s: %w", rel.Name(), err)
	}
	return nil
}

// CheckReleaseDates refuses a fresh Release older than the one l records
// for its suite, unless o.AllowOlderRelease (then it only says so).
func CheckReleaseDates(l *lock.Lock, suites []*Suite, o Options) error {
	if l == nil {
		return nil
	}
	for _, s := range suites {
		err := lockcheck.CheckDate(l.Suites, s.Name, s.Release.Date)
		var oe *lockcheck.OlderReleaseError
		if errors.As(err, &oe) && o.AllowOlderRelease {
			o.logf("InRelease for %s: accepting the Release of %s, older than the lock's of %s (--allow-older-release)", s.Name,
				oe.Fetched.UTC().Format(time.RFC3339), oe.Locked.UTC().Format(time.RFC3339))
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// VerifyDebs checks every deb line of l against the signed archive before
// anything of a package is fetched: for each suite, the InRelease the lock
// pins (from the cache, else the mirror's if it is still that one),
// verified against roots (the suites' trust roots, in lock order, as
// CheckSigners checked them), and its Packages indexes, fetched by the
// hashes it lists through the cache; then lockcheck.Check. A line the
// index contradicts is a *lockcheck.Error.
//
// When the mirror has moved on and the cache lacks the pinned InRelease,
// the mirror's newer one stands in (never an older one): the lines must
// still be in a signed index, and a version superseded since fails, saying
// why.
func VerifyDebs(ctx context.Context, r *recipe.Recipe, l *lock.Lock, roots []*TrustRoot, o Options) error {
	_, err := verifyDebs(ctx, r, l, roots, o, true)
	return err
}

// VerifyPinned is VerifyDebs for drover outdated, which compares the lock
// with today's indexes besides: a suite whose pinned InRelease neither the
// cache holds nor the mirror serves is not checked (a stand-in would call
// every version superseded since forged, and superseded is what outdated
// reports); it returns the names of those suites.
func VerifyPinned(ctx context.Context, r *recipe.Recipe, l *lock.Lock, o Options) (unchecked []string, err error) {
	roots, err := checkSigners(r, l, o)
	if err != nil {
		return nil, err
	}
	return verifyDebs(ctx, r, l, roots, o, false)
}

func verifyDebs(ctx context.Context, r *recipe.Recipe, l *lock.Lock, roots []*TrustRoot, o Options, standIn bool) (unchecked []string, err error) {
	if len(l.Debs) == 0 {
		return nil, nil
	}
	start := time.Now()
	var suites []lockcheck.Suite
	debs := l.Debs
	for i, s := range l.Suites {
		client, err := o.client(r, s.Name, roots[i])
		if err != nil {
			return nil, err
		}
		rel, pinned, err := o.lockedRelease(ctx, client, r, s)
		if err != nil {
			return nil, err
		}
		if !pinned && !standIn {
			unchecked = append(unchecked, s.Name)
			debs = slices.DeleteFunc(slices.Clone(debs), func(d lock.Deb) bool { return d.Suite == s.Name })
			continue
		}
		if !pinned {
			if err := standInDate(s, rel); err != nil {
				return nil, err
			}
			o.logf("the InRelease of %s the lock pins (%s) is not in the cache and the mirror serves a newer one (%s): checking the lock against that",
				s.Name, s.Date.UTC().Format(time.RFC3339), rel.Date.UTC().Format(time.RFC3339))
		}
		idx, err := client.Index(ctx, rel, r.Debian.Components, r.Arch)
		if err != nil {
			return nil, err
		}
		suites = append(suites, lockcheck.Suite{Name: s.Name, Date: rel.Date, Pinned: pinned, LockedDate: s.Date, Packages: idx.Packages})
	}
	if p := lockcheck.Check(debs, suites); len(p) > 0 {
		return nil, &lockcheck.Error{Lock: r.LockPath(), Recipe: r.Path, Problems: p}
	}
	o.logf("%d locked packages are in the signed indexes of %s (checked in %s)", len(debs), lockedDates(suites), time.Since(start).Round(time.Millisecond))
	return unchecked, nil
}

// lockedRelease is the verified InRelease of s: the one the lock pins, from
// the cache or the mirror (pinned), else the mirror's current one, another.
func (o *Options) lockedRelease(ctx context.Context, c *debian.Client, r *recipe.Recipe, s lock.Suite) (*debian.Release, bool, error) {
	if ok, _, err := o.Cache.Check(s.InRelease); err != nil {
		return nil, false, fmt.Errorf("lock %s: suite %s: InRelease %w: the lock is damaged: run `drover lock --refresh %s`", r.LockPath(), s.Name, err, r.Path)
	} else if ok {
		path := o.Cache.Path(s.InRelease)
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, false, fmt.Errorf("reading the InRelease of %s: %w", s.Name, err)
		}
		rel, err := c.PinnedRelease(data, s.Name, path)
		if err != nil {
			return nil, false, err
		}
		return rel, true, o.checkLockedDate(r, s, rel)
	}
	rel, err := c.Release(ctx, s.Name)
	if err != nil {
		return nil, false, err
	}
	if rel.SHA256 != s.InRelease {
		return rel, false, nil
	}
	if err := o.keepRelease(rel); err != nil {
		return nil, false, err
	}
	return rel, true, o.checkLockedDate(r, s, rel)
}

// standInDate refuses rel, the mirror's Release of s that is not the one
// the lock pins, when it is older than the lock's: a Release never goes
// back, and an older one cannot vouch for the lock.
func standInDate(s lock.Suite, rel *debian.Release) error {
	err := lockcheck.CheckDate([]lock.Suite{s}, s.Name, rel.Date)
	var oe *lockcheck.OlderReleaseError
	if errors.As(err, &oe) {
		oe.Advice = fmt.Sprintf("use an up-to-date mirror, or build where the lock's InRelease (sha256 %s) is in the cache", s.InRelease)
	}
	return err
}

// checkLockedDate refuses a lock whose suite line records another date
// than the InRelease it pins: the date is what a fresh Release may not
// go back from, so an edited one matters.
func (o *Options) checkLockedDate(r *recipe.Recipe, s lock.Suite, rel *debian.Release) error {
	if !rel.Date.Equal(s.Date) {
		return lockcheck.Contradicted(fmt.Errorf("lock %s: suite %s records the date %s, but the InRelease it pins is dated %s: the lock was edited; run `drover lock --refresh %s`",
			r.LockPath(), s.Name, s.Date.UTC().Format(time.RFC3339), rel.Date.UTC().Format(time.RFC3339), r.Path))
	}
	return nil
}

func lockedDates(suites []lockcheck.Suite) string {
	var b bytes.Buffer
	for i, s := range suites {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s of %s", s.Name, s.Date.UTC().Format(time.RFC3339))
		if !s.Pinned {
			b.WriteString(" (newer than the lock's)")
		}
	}
	return b.String()
}
