package reprotest

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestFirstDiff(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", -1},
		{"abc", "abc", -1},
		{"abc", "abd", 2},
		{"xbc", "abc", 0},
		{"ab", "abc", 2},
		{"abc", "ab", 2},
	} {
		if got := FirstDiff([]byte(c.a), []byte(c.b)); got != c.want {
			t.Errorf("FirstDiff(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func TestShuffleReordersRepeatably(t *testing.T) {
	for n := 2; n <= 12; n++ {
		given := make([]int, n)
		for i := range given {
			given[i] = i
		}
		a, b := slices.Clone(given), slices.Clone(given)
		Shuffle(a)
		Shuffle(b)
		if slices.Equal(a, given) {
			t.Errorf("%d items: Shuffle left the given order", n)
		}
		if !slices.Equal(a, b) {
			t.Errorf("%d items: two shuffles gave %v and %v", n, a, b)
		}
		slices.Sort(a)
		if !slices.Equal(a, given) {
			t.Errorf("%d items: Shuffle changed the items: %v", n, a)
		}
	}
}

// recorder keeps what Same reports instead of ending the test.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper()           {}
func (r *recorder) Fatal(args ...any) { r.failed = fmt.Sprint(args...) }

func TestSameNamesTheFirstDifference(t *testing.T) {
	locate := func(off int) string { return fmt.Sprintf("<area of %d>", off) }
	for _, c := range []struct {
		base, got string
		want      string // in the message; "" for a pass
	}{
		{"abcd", "abcd", ""},
		{"abcd", "abXd", "first difference at byte 2: <area of 2>"},
		{"abcd", "ab", "(2 bytes), baseline"},
		{"ab", "abcd", "first difference at byte 2"},
	} {
		r := &recorder{TB: t}
		Same(r, "the thing", []byte(c.base), []byte(c.got), locate)
		if c.want == "" && r.failed != "" || !strings.Contains(r.failed, c.want) {
			t.Errorf("Same(%q, %q) reports %q, want it to contain %q", c.base, c.got, r.failed, c.want)
		}
		if c.base == "ab" && strings.Contains(r.failed, "<area") {
			t.Errorf("Same(%q, %q) located an offset past the baseline: %q", c.base, c.got, r.failed)
		}
	}
}

func TestConditionsEndWithTheSubtest(t *testing.T) {
	mask := syscall.Umask(0o022)
	syscall.Umask(mask)
	local := time.Local
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	t.Run("changed", func(t *testing.T) {
		OtherUmask(t)
		if m := syscall.Umask(0o277); m == mask {
			t.Errorf("umask is still %#o", m)
		} else {
			syscall.Umask(m)
		}
		loc := OtherZone(t, at)
		_, was := at.In(local).Zone()
		if _, off := at.In(loc).Zone(); off == was || time.Local != loc {
			t.Errorf("zone %v (offset %d), time.Local %v; want an offset other than %d, set as time.Local", loc, off, time.Local, was)
		}
	})
	if m := syscall.Umask(mask); m != mask {
		t.Errorf("umask after the subtest = %#o, want %#o", m, mask)
	}
	if time.Local != local {
		t.Errorf("time.Local after the subtest = %v, want %v", time.Local, local)
	}
}
