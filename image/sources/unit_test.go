package sources

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/image/debian"
	"github.com/drover-os/drover/image/gomod"
	"github.com/drover-os/drover/image/lock"
	"github.com/drover-os/drover/image/recipe"
)

func TestArchive(t *testing.T) {
	noApt := errors.New("no -security suite in the host's apt sources")
	for _, tc := range []struct {
		name  string
		o     Options
		suite string
		want  string // the root, or the error
	}{
		{"release from the mirror", Options{Mirror: "http://m/debian", SecurityMirror: "http://s/debian-security"}, "trixie", "http://m/debian"},
		{"updates from the mirror", Options{Mirror: "http://m/debian", SecurityMirror: "http://s/debian-security"}, "trixie-updates", "http://m/debian"},
		{"security from the security archive", Options{Mirror: "http://m/debian", SecurityMirror: "http://s/debian-security"}, "trixie-security", "http://s/debian-security"},
		{"no mirror", Options{SecurityMirror: "http://s/debian-security"}, "trixie",
			"no Debian mirror for suite trixie: pass --mirror, set DROVER_MIRROR or configure apt"},
		{"no security archive", Options{Mirror: "http://m/debian"}, "trixie-security",
			"no Debian security archive for suite trixie-security: pass --security-mirror or set DROVER_SECURITY_MIRROR"},
		{"no security archive, and why", Options{Mirror: "http://m/debian", SecurityMirrorErr: noApt}, "trixie-security",
			"suite trixie-security: no -security suite in the host's apt sources"},
	} {
		root, err := tc.o.Archive(tc.suite)
		got := root
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%s: Archive(%s) = %q, want %q", tc.name, tc.suite, got, tc.want)
		}
	}
}

func testSuite(name string, date time.Time, inRelease, signer, trust string) *Suite {
	return &Suite{Name: name, Release: &debian.Release{Date: date, SHA256: inRelease, SignedBy: signer}, Trust: &TrustRoot{Source: trust}}
}

// TestSameSuites: a previous lock's suites still hold only when every suite
// is pinned with the same Release date, InRelease hash, signer and trust
// root (in any order).
func TestSameSuites(t *testing.T) {
	day := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	suites := []*Suite{
		testSuite("trixie", day, "aa", "AB", "repo:k"),
		testSuite("trixie-security", day.Add(time.Hour), "bb", "AB", "repo:k"),
	}
	prev := func(f func(s []lock.Suite)) []lock.Suite {
		var l []lock.Suite
		for _, s := range suites {
			l = append(l, s.Locked())
		}
		f(l)
		return l
	}
	for _, tc := range []struct {
		name string
		prev []lock.Suite
		want bool
	}{
		{"same", prev(func([]lock.Suite) {}), true},
		{"same, other order", prev(func(s []lock.Suite) { s[0], s[1] = s[1], s[0] }), true},
		{"same date in another zone", prev(func(s []lock.Suite) { s[0].Date = s[0].Date.In(time.FixedZone("x", 3600)) }), true},
		{"one suite fewer", prev(func([]lock.Suite) {})[:1], false},
		{"another suite", prev(func(s []lock.Suite) { s[1].Name = "trixie-updates" }), false},
		{"another date", prev(func(s []lock.Suite) { s[1].Date = s[1].Date.Add(time.Second) }), false},
		{"another InRelease", prev(func(s []lock.Suite) { s[0].InRelease = "cc" }), false},
		{"another signer", prev(func(s []lock.Suite) { s[1].Signer = "CD" }), false},
		{"another trust root", prev(func(s []lock.Suite) { s[0].Trust = "override:sha256:00" }), false},
	} {
		if got := sameSuites(tc.prev, suites); got != tc.want {
			t.Errorf("%s: sameSuites = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestEpoch: the recipe's epoch; else the previous lock's while the locked
// content is the same; else the newest Release date.
func TestEpoch(t *testing.T) {
	day := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	suites := []*Suite{testSuite("trixie", day, "aa", "", ""), testSuite("trixie-security", day.Add(time.Hour), "bb", "", ""), testSuite("trixie-updates", day.Add(-time.Hour), "cc", "", "")}
	newest := day.Add(time.Hour).Unix()
	l := &lock.Lock{Inputs: "new", Debs: []lock.Deb{{Name: "a", Version: "1", Arch: "amd64", Size: 1, SHA256: "aa", Suite: "trixie", Path: "pool/a.deb"}}}
	same := &lock.Lock{Inputs: "old", Epoch: 42, Suites: []lock.Suite{{Name: "trixie"}}, Debs: l.Debs}
	other := &lock.Lock{Inputs: "old", Epoch: 42, Debs: []lock.Deb{{Name: "a", Version: "2", Arch: "amd64", Size: 1, SHA256: "ab", Suite: "trixie", Path: "pool/a.deb"}}}
	for _, tc := range []struct {
		name string
		r    *recipe.Recipe
		prev *lock.Lock
		want int64
	}{
		{"the recipe's", &recipe.Recipe{Epoch: 7}, same, 7},
		{"the previous lock's", &recipe.Recipe{}, same, 42},
		{"content changed", &recipe.Recipe{}, other, newest},
		{"no previous lock", &recipe.Recipe{}, nil, newest},
	} {
		if got := epoch(tc.r, tc.prev, l, suites); got != tc.want {
			t.Errorf("%s: epoch = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestLockToolchain(t *testing.T) {
	for _, tc := range []struct {
		name, asked string
		prev        *lock.Lock
		want        string // the toolchain, or the error
	}{
		{"asked for", "go1.27.3", &lock.Lock{Toolchain: "go1.26.8"}, "go1.27.3"},
		{"the previous lock's", "", &lock.Lock{Toolchain: "go1.26.8"}, "go1.26.8"},
		{"not a Go release", "1.27.3", nil, `--toolchain "1.27.3": want a Go release such as go1.27.3`},
	} {
		got, err := lockToolchain(context.Background(), tc.prev, Options{Toolchain: tc.asked})
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%s: lockToolchain = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestPrevGoKeepsPinsOfTheSameComponent: a component keeps its previous
// pins only when its name, module, version, package and replaces (in any
// order and spacing) are the same.
func TestPrevGoKeepsPinsOfTheSameComponent(t *testing.T) {
	pinned := lock.Go{Name: "runc", Module: "m/runc", Version: "v1", Package: "m/runc/cmd", Toolchain: "go1.26.8",
		GoMod: []string{"module b", "replace a =>  a2 v2", "replace c => c2 v3", "require m/runc v1"}}
	prev := &lock.Lock{Go: []lock.Go{{Name: "other", Module: "m/runc", Version: "v1", Package: "m/runc/cmd"}, pinned}}
	g := recipe.GoComponent{Name: "runc", Module: "m/runc", Version: "v1", Package: "m/runc/cmd", Replace: []string{"c => c2 v3", "a => a2  v2"}}
	if p := prevGo(prev, g); p == nil || p.Name != "runc" || p.Toolchain != "go1.26.8" {
		t.Errorf("prevGo = %+v, want the runc pins", p)
	}
	if p := prevGo(nil, g); p != nil {
		t.Errorf("prevGo without a previous lock = %+v", p)
	}
	for name, change := range map[string]func(*recipe.GoComponent){
		"name":     func(g *recipe.GoComponent) { g.Name = "runc2" },
		"module":   func(g *recipe.GoComponent) { g.Module = "m/runc2" },
		"version":  func(g *recipe.GoComponent) { g.Version = "v2" },
		"package":  func(g *recipe.GoComponent) { g.Package = "m/runc" },
		"replaces": func(g *recipe.GoComponent) { g.Replace = g.Replace[:1] },
		"replace":  func(g *recipe.GoComponent) { g.Replace = []string{"c => c2 v3", "a => a2 v3"} },
	} {
		h := g
		change(&h)
		if p := prevGo(prev, h); p != nil {
			t.Errorf("another %s: prevGo = %+v, want none", name, p)
		}
	}
}

func TestComponentReplaces(t *testing.T) {
	c, err := Component(recipe.GoComponent{Name: "x", Replace: []string{"a v1 => b v2", " c=>d  v3 "}})
	if want := []gomod.Replace{{Old: "a", New: "b", Version: "v2"}, {Old: "c", New: "d", Version: "v3"}}; err != nil || !slices.Equal(c.Replace, want) {
		t.Errorf("Component replaces %+v, %v; want %+v", c.Replace, err, want)
	}
	for _, bad := range []string{"a => b", "=> b v1", "a b v1", "a => b v1 x"} {
		_, err := Component(recipe.GoComponent{Name: "x", Replace: []string{bad}})
		if want := "replace " + `"` + bad + `"` + ": want 'old => new version'"; err == nil || err.Error() != want {
			t.Errorf("replace %q: %v, want %s", bad, err, want)
		}
	}
	if _, err := Component(recipe.GoComponent{Name: "x", Release: "nosuch"}); err == nil {
		t.Error("an unknown release preset was accepted")
	}
}

func TestNonEmptyLines(t *testing.T) {
	if got, want := nonEmptyLines("module b\n\n  go 1.26  \n\t\nrequire (\n)\n"), []string{"module b", "go 1.26", "require (", ")"}; !slices.Equal(got, want) {
		t.Errorf("nonEmptyLines = %q, want %q", got, want)
	}
}

func TestReleaseDates(t *testing.T) {
	day := time.Date(2026, 11, 29, 8, 5, 0, 0, time.FixedZone("x", 3600))
	if got, want := releaseDates([]*Suite{testSuite("trixie", day, "", "", ""), testSuite("trixie-security", day.Add(time.Hour), "", "", "")}), "trixie 2026-11-29 07:05, trixie-security 2026-11-29 08:05"; got != want {
		t.Errorf("releaseDates = %q, want %q", got, want)
	}
	if strings.Contains(releaseDates(nil), ",") {
		t.Error("no suites, yet a list")
	}
}
