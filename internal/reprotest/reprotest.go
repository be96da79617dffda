// Package reprotest is for tests only: the determinism tests of the image
// writers share through it the conditions a build host varies (clock,
// umask, time zone, input order), the byte comparison that names the first
// difference, and the lookup of the host tool that checks an output.
// Each test keeps what belongs to its format: how to build, and what a
// differing byte falls in.
package reprotest

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// Input tells VaryHost how to make a package's build input and how to
// re-express it; a condition never changes its content.
type Input[In any] struct {
	New func(*testing.T) In
	// Reverse and Shuffle list the input's items in another order.
	Reverse, Shuffle func(*In)
	// Time points at the input's timestamp, which the TZ condition hands
	// the writer expressed in the other zone; nil when the input has none.
	Time func(*In) *time.Time
}

// VaryHost runs one subtest per condition a build host varies (clock,
// umask, order reversed, order shuffled, TZ) and one under all at once
// (clock, umask, shuffled, TZ). Each makes a fresh input, applies the
// condition until the subtest ends, and hands the input to check, which
// builds it and compares the output with the baseline. baseDone is when
// the baseline build ended; tick is the finest time step the format stores.
func VaryHost[In any](t *testing.T, baseDone time.Time, tick time.Duration, in Input[In], check func(*testing.T, In)) {
	clock := func(t testing.TB, _ *In) { OtherClock(t, baseDone, tick) }
	umask := func(t testing.TB, _ *In) { OtherUmask(t) }
	reverse := func(_ testing.TB, x *In) { in.Reverse(x) }
	shuffle := func(_ testing.TB, x *In) { in.Shuffle(x) }
	zone := func(t testing.TB, x *In) {
		if in.Time == nil {
			OtherZone(t, time.Now())
			return
		}
		at := in.Time(x)
		*at = at.In(OtherZone(t, *at))
	}
	conditions := []struct {
		name  string
		apply []func(testing.TB, *In)
	}{
		{"clock", []func(testing.TB, *In){clock}},
		{"umask", []func(testing.TB, *In){umask}},
		{"order reversed", []func(testing.TB, *In){reverse}},
		{"order shuffled", []func(testing.TB, *In){shuffle}},
		{"TZ", []func(testing.TB, *In){zone}},
		{"all at once", []func(testing.TB, *In){clock, umask, shuffle, zone}},
	}
	for _, c := range conditions {
		t.Run(c.name, func(t *testing.T) {
			x := in.New(t)
			for _, apply := range c.apply {
				apply(t, &x)
			}
			check(t, x)
		})
	}
}

// OtherClock moves the clock a writer could read until t ends:
// SOURCE_DATE_EPOCH, for code that follows that convention, and the wall
// clock, by sleeping past the next tick after the baseline build ended.
func OtherClock(t testing.TB, baseDone time.Time, tick time.Duration) {
	t.Setenv("SOURCE_DATE_EPOCH", "4102444800") // 2100-01-01
	time.Sleep(time.Until(baseDone.Truncate(tick).Add(tick)))
}

// OtherUmask sets a umask other than the process's until t ends; 0277 also
// masks the owner's write bit, which a read-only flag could be derived from.
func OtherUmask(t testing.TB) {
	old := syscall.Umask(0o277)
	if old == 0o277 {
		syscall.Umask(0o000)
	}
	t.Cleanup(func() { syscall.Umask(old) })
}

// OtherZone sets TZ and time.Local, until t ends, to a zone with an odd
// offset that is not the one time.Local has at instant at, and returns it.
func OtherZone(t testing.TB, at time.Time) *time.Location {
	loc, tz := time.FixedZone("+0545", 5*3600+45*60), "<+0545>-05:45"
	if _, off := at.In(time.Local).Zone(); off == 5*3600+45*60 {
		loc, tz = time.FixedZone("-0930", -(9*3600+30*60)), "<-0930>09:30"
	}
	t.Setenv("TZ", tz)
	old := time.Local
	time.Local = loc
	t.Cleanup(func() { time.Local = old })
	return loc
}

// Shuffle reorders s with a fixed seed, so a failure repeats, shuffling
// again while the order is the one given.
func Shuffle[E any](s []E) {
	if len(s) < 2 {
		return
	}
	perm := make([]int, len(s))
	r := rand.New(rand.NewPCG(24, 7))
	for identity := true; identity; {
		for i := range perm {
			perm[i] = i
		}
		r.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		identity = slices.IsSorted(perm)
	}
	old := slices.Clone(s)
	for i, p := range perm {
		s[i] = old[p]
	}
}

// Same fails t unless got is base. The message names both digests and
// sizes and the first differing byte, and, when that byte lies inside
// base, what locate says base holds there (locate may be nil).
func Same(t testing.TB, what string, base, got []byte, locate func(off int) string) {
	t.Helper()
	if bytes.Equal(base, got) {
		return
	}
	off := FirstDiff(base, got)
	msg := fmt.Sprintf("%s differs from the baseline: sha256 %x (%d bytes), baseline %x (%d bytes); first difference at byte %d",
		what, sha256.Sum256(got), len(got), sha256.Sum256(base), len(base), off)
	if locate != nil && off < len(base) {
		msg += ": " + locate(off)
	}
	t.Fatal(msg)
}

// FirstDiff returns the first offset where a and b differ (the shorter
// length when one is a prefix of the other), -1 when they are equal.
func FirstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) == len(b) {
		return -1
	}
	return min(len(a), len(b))
}

// Tool returns the path of the host tool name, failing t when it is
// missing: the tests check outputs with the real tool, and
// scripts/host-setup.sh installs the Debian package pkg that has it.
func Tool(t testing.TB, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found: install the Debian package %s (scripts/host-setup.sh)", name, pkg)
	}
	return p
}

// WriteTemp writes data to a file called name in a directory removed when
// t ends, for a tool that reads a path, and returns the path.
func WriteTemp(t testing.TB, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
