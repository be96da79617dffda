package diff

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/image/build"
)

func day(s string) time.Time {
	d, err := time.Parse(time.DateOnly, s)
	if err != nil {
		panic(err)
	}
	return d
}

func cl(version, date, dist, text string, cves ...string) build.ChangelogEntry {
	return build.ChangelogEntry{Version: version, Date: day(date), Distribution: dist, Urgency: "medium", CVEs: cves, Text: text}
}

// fixesOld and fixesNew are two builds of a node a few weeks apart: a
// security update of glibc, a binNMU of e2fsprogs, openssl downgraded
// (pinned back), zlib updated from before the recorded entries, dash
// without a changelog, and three Go modules: Kubernetes, containerd (two
// components) and one whose module carries no release notes.
func fixesOld() *build.Manifest {
	m := base()
	m.Packages = []build.Package{
		{Name: "dash", Version: "0.5.12-11", Arch: "amd64", SHA256: hash("41"), Source: "dash", SourceVersion: "0.5.12-11", Suite: "trixie"},
		{Name: "e2fsprogs", Version: "1.47.2-3+b11", Arch: "amd64", SHA256: hash("42"), Source: "e2fsprogs", SourceVersion: "1.47.2-3", Suite: "trixie"},
		{Name: "libc-bin", Version: "2.41-12+deb13u4", Arch: "amd64", SHA256: hash("43"), Source: "glibc", SourceVersion: "2.41-12+deb13u4", Suite: "trixie"},
		{Name: "libc6", Version: "2.41-12+deb13u4", Arch: "amd64", SHA256: hash("44"), Source: "glibc", SourceVersion: "2.41-12+deb13u4", Suite: "trixie"},
		{Name: "libssl3t64", Version: "3.5.9-1~deb13u1", Arch: "amd64", SHA256: hash("45"), Source: "openssl", SourceVersion: "3.5.9-1~deb13u1", Suite: "trixie-security"},
		{Name: "zlib1g", Version: "1:1.3.dfsg-3.1", Arch: "amd64", SHA256: hash("46"), Source: "zlib", SourceVersion: "1:1.3.dfsg-3.1", Suite: "trixie"},
	}
	m.Go = []build.GoComponent{
		{Name: "containerd", Module: "github.com/containerd/containerd/v2", Version: "v2.4.1", SHA256: hash("47")},
		{Name: "containerd-shim-runc-v2", Module: "github.com/containerd/containerd/v2", Version: "v2.4.1", SHA256: hash("48")},
		{Name: "crane", Module: "github.com/google/go-containerregistry", Version: "v0.20.0", SHA256: hash("49")},
		{Name: "kubelet", Module: "k8s.io/kubernetes", Version: "v1.37.0", SHA256: hash("4a")},
	}
	m.Changelogs = &build.Changelogs{Since: day("2024-11-21"), MinEntries: 3, MaxText: 2048, Debian: []build.SourceChangelog{
		{Source: "openssl", Package: "libssl3t64", File: "/usr/share/doc/libssl3t64/changelog.Debian.gz", More: true, Entries: []build.ChangelogEntry{
			cl("3.5.9-1~deb13u1", "2026-10-01", "trixie-security", "* New upstream security release (CVE-2026-1111, CVE-2026-2222).", "CVE-2026-1111", "CVE-2026-2222"),
			cl("3.5.7-1~deb13u3", "2026-06-01", "trixie-security", "* Fix CVE-2025-9230.", "CVE-2025-9230"),
			cl("3.5.7-1~deb13u2", "2026-03-01", "trixie", "* Rebuild."),
		}},
	}, Go: []build.ReleaseNotes{}}
	return m
}

func fixesNew() *build.Manifest {
	m := fixesOld()
	m.BuildID = "7f00c0ffee000001"
	m.Packages = []build.Package{
		{Name: "dash", Version: "0.5.12-12", Arch: "amd64", SHA256: hash("51"), Source: "dash", SourceVersion: "0.5.12-12", Suite: "trixie"},
		{Name: "e2fsprogs", Version: "1.47.2-3+b12", Arch: "amd64", SHA256: hash("52"), Source: "e2fsprogs", SourceVersion: "1.47.2-3", Suite: "trixie"},
		{Name: "libc-bin", Version: "2.41-12+deb13u5", Arch: "amd64", SHA256: hash("53"), Source: "glibc", SourceVersion: "2.41-12+deb13u5", Suite: "trixie-security"},
		{Name: "libc6", Version: "2.41-12+deb13u5", Arch: "amd64", SHA256: hash("54"), Source: "glibc", SourceVersion: "2.41-12+deb13u5", Suite: "trixie-security"},
		{Name: "libssl3t64", Version: "3.5.7-1~deb13u3", Arch: "amd64", SHA256: hash("55"), Source: "openssl", SourceVersion: "3.5.7-1~deb13u3", Suite: "trixie-security"},
		{Name: "zlib1g", Version: "1:1.3.dfsg+really1.3.1-1+deb13u1", Arch: "amd64", SHA256: hash("56"), Source: "zlib", SourceVersion: "1:1.3.dfsg+really1.3.1-1+deb13u1", Suite: "trixie"},
	}
	m.Go = []build.GoComponent{
		{Name: "containerd", Module: "github.com/containerd/containerd/v2", Version: "v2.4.2", SHA256: hash("57")},
		{Name: "containerd-shim-runc-v2", Module: "github.com/containerd/containerd/v2", Version: "v2.4.2", SHA256: hash("58")},
		{Name: "crane", Module: "github.com/google/go-containerregistry", Version: "v0.20.1", SHA256: hash("59")},
		{Name: "kubelet", Module: "k8s.io/kubernetes", Version: "v1.37.2", SHA256: hash("5a")},
	}
	m.Changelogs = &build.Changelogs{Since: day("2024-12-12"), MinEntries: 3, MaxText: 2048, Debian: []build.SourceChangelog{
		{Source: "dash", Problem: "no changelog.Debian.gz in dash", Entries: []build.ChangelogEntry{}},
		{Source: "e2fsprogs", Package: "e2fsprogs", File: "/usr/share/doc/e2fsprogs/changelog.Debian.gz", Entries: []build.ChangelogEntry{
			cl("1.47.2-3+b12", "2026-07-12", "trixie", "* Binary-only non-maintainer upload for amd64; no source changes.\n* Rebuild for outdated Built-Using (glibc/2.41-12+deb13u3)"),
			cl("1.47.2-3", "2025-03-01", "unstable", "* Fix the build."),
		}},
		{Source: "glibc", Package: "libc-bin", File: "/usr/share/doc/libc-bin/changelog.Debian.gz", More: true, Entries: []build.ChangelogEntry{
			cl("2.41-12+deb13u5", "2026-10-10", "trixie-security", "* debian/patches/git-updates.diff: update from upstream stable branch:\n  - Fix a buffer overread in ns_sprintrrf (CVE-2026-6238).\n  - Fix stack overflow in wordexp ``tilde`` expansion (CVE-2026-10791).", "CVE-2026-6238", "CVE-2026-10791"),
			cl("2.41-12+deb13u4", "2026-03-02", "trixie", "* Fix ungetwc (CVE-2026-5928).", "CVE-2026-5928"),
			cl("2.41-12", "2025-01-15", "unstable", "* New upstream release."),
		}},
		{Source: "openssl", Package: "libssl3t64", File: "/usr/share/doc/libssl3t64/changelog.Debian.gz", More: true, Entries: []build.ChangelogEntry{
			cl("3.5.7-1~deb13u3", "2026-06-01", "trixie-security", "* Fix CVE-2025-9230.", "CVE-2025-9230"),
			cl("3.5.7-1~deb13u2", "2026-03-01", "trixie", "* Rebuild."),
			cl("3.5.7-1~deb13u1", "2026-01-01", "trixie", "* Backport."),
		}},
		{Source: "zlib", Package: "zlib1g", File: "/usr/share/doc/zlib1g/changelog.Debian.gz", More: true, Entries: []build.ChangelogEntry{
			cl("1:1.3.dfsg+really1.3.1-1+deb13u1", "2026-09-01", "trixie-security", "* Fix CVE-2026-27171.", "CVE-2026-27171"),
			cl("1:1.3.dfsg+really1.3.1-1", "2025-02-01", "unstable", "* New upstream release."),
		}},
	}, Go: []build.ReleaseNotes{
		{Module: "github.com/containerd/containerd/v2", Version: "v2.4.2", File: "releases/", Releases: []build.Release{
			{Version: "v2.4.2", CVEs: []string{"CVE-2026-95839"}, GHSAs: []string{"GHSA-8647-2jxj-p2rc", "GHSA-vwhp-8p66-mq4f"}},
			{Version: "v2.4.1", CVEs: []string{"CVE-2026-53493"}, GHSAs: []string{"GHSA-pg57-6jwg-q645"}},
			{Version: "v2.4.0"},
			{Version: "v1.0.0", CVEs: []string{"CVE-2017-0001"}},
		}},
		{Module: "github.com/google/go-containerregistry", Version: "v0.20.1", Releases: []build.Release{}, Problem: "no release notes in the module"},
		{Module: "k8s.io/kubernetes", Version: "v1.37.2", File: "CHANGELOG/CHANGELOG-1.37.md", Releases: []build.Release{
			{Version: "v1.37.1", CVEs: []string{"CVE-2026-3333"}},
			{Version: "v1.37.0", CVEs: []string{"CVE-2026-4444"}},
			{Version: "v1.37.0-rc.0"},
		}},
	}}
	return m
}

func fixByName(t *testing.T, d *Diff, name string) Fix {
	t.Helper()
	for _, f := range d.Fixes {
		if f.Name == name {
			return f
		}
	}
	t.Fatalf("no fix for %s in %+v", name, d.Fixes)
	return Fix{}
}

func entryVersions(f Fix) string {
	var vs []string
	for _, e := range f.Entries {
		vs = append(vs, e.Version)
	}
	for _, r := range f.Releases {
		vs = append(vs, r.Version)
	}
	return strings.Join(vs, " ")
}

// TestFixesBetweenVersions: the entries with old < version <= new, per
// source package, with the CVE IDs they name; a binNMU's own entry; what
// the record does not cover.
func TestFixesBetweenVersions(t *testing.T) {
	d := Compare(fixesOld(), fixesNew())
	var names []string
	for _, f := range d.Fixes {
		names = append(names, f.Kind+":"+f.Name)
	}
	if want := "debian:dash debian:e2fsprogs debian:glibc debian:openssl debian:zlib go:github.com/containerd/containerd/v2 go:github.com/google/go-containerregistry go:k8s.io/kubernetes"; strings.Join(names, " ") != want {
		t.Fatalf("fixes %q\nwant %q", names, want)
	}
	for _, c := range []struct {
		name, entries string
		cves          []string
		notes         []string
	}{
		{"glibc", "2.41-12+deb13u5", []string{"CVE-2026-6238", "CVE-2026-10791"}, []string{}},
		{"e2fsprogs", "1.47.2-3+b12", []string{}, []string{}},
		{"zlib", "1:1.3.dfsg+really1.3.1-1+deb13u1 1:1.3.dfsg+really1.3.1-1", []string{"CVE-2026-27171"},
			[]string{"entries before 1:1.3.dfsg+really1.3.1-1 (2025-02-01) were not recorded"}},
		{"k8s.io/kubernetes", "v1.37.1", []string{"CVE-2026-3333"}, []string{"v1.37.2's own notes are not in its module"}},
		{"github.com/containerd/containerd/v2", "v2.4.2", []string{"CVE-2026-95839"}, []string{}},
	} {
		f := fixByName(t, d, c.name)
		if got := entryVersions(f); got != c.entries || !reflect.DeepEqual(f.CVEs, c.cves) || !reflect.DeepEqual(f.Notes, c.notes) || !f.Recorded || f.Downgrade {
			t.Errorf("%s: entries %q, CVEs %q, notes %q, recorded %v, downgrade %v\nwant %q, %q, %q", c.name, got, f.CVEs, f.Notes, f.Recorded, f.Downgrade,
				c.entries, c.cves, c.notes)
		}
	}
	glibc := fixByName(t, d, "glibc")
	if !glibc.Security || glibc.Old != "2.41-12+deb13u4" || glibc.New != "2.41-12+deb13u5" || strings.Join(glibc.Packages, ",") != "libc-bin,libc6" {
		t.Errorf("glibc: %+v", glibc)
	}
	if fixByName(t, d, "e2fsprogs").Security || fixByName(t, d, "e2fsprogs").Old != "1.47.2-3+b11" {
		t.Errorf("e2fsprogs: %+v", fixByName(t, d, "e2fsprogs"))
	}
	if c := fixByName(t, d, "github.com/containerd/containerd/v2"); strings.Join(c.Packages, ",") != "containerd,containerd-shim-runc-v2" ||
		!reflect.DeepEqual(c.GHSAs, []string{"GHSA-8647-2jxj-p2rc", "GHSA-vwhp-8p66-mq4f"}) {
		t.Errorf("containerd: one fix for both components with the GHSA IDs of v2.4.2: %+v", c)
	}
	for _, p := range d.Packages {
		if want := p.Name == "libc6" || p.Name == "libc-bin"; p.Security != want {
			t.Errorf("package %s: security %v, want %v (new suite trixie-security)", p.Name, p.Security, want)
		}
	}
}

// TestFixesDowngrade: a downgrade says so and lists the entries the image
// loses, from the old manifest.
func TestFixesDowngrade(t *testing.T) {
	f := fixByName(t, Compare(fixesOld(), fixesNew()), "openssl")
	// From trixie-security to trixie-security, but no security update.
	if !f.Downgrade || !f.Recorded || f.Security || entryVersions(f) != "3.5.9-1~deb13u1" || !reflect.DeepEqual(f.CVEs, []string{"CVE-2026-1111", "CVE-2026-2222"}) {
		t.Errorf("openssl 3.5.9-1~deb13u1 → 3.5.7-1~deb13u3: %+v", f)
	}
	// The other way round it is an upgrade fixing the same, read from the
	// then newer manifest.
	f = fixByName(t, Compare(fixesNew(), fixesOld()), "openssl")
	if f.Downgrade || entryVersions(f) != "3.5.9-1~deb13u1" {
		t.Errorf("openssl 3.5.7-1~deb13u3 → 3.5.9-1~deb13u1: %+v", f)
	}
	// glibc backwards: it loses the security update, which is no
	// security update itself.
	if g := fixByName(t, Compare(fixesNew(), fixesOld()), "glibc"); !g.Downgrade || !g.Recorded || g.Security || entryVersions(g) != "2.41-12+deb13u5" {
		t.Errorf("glibc 2.41-12+deb13u5 → 2.41-12+deb13u4: %+v", g)
	}
	// The same when the old manifest has no changelog of glibc.
	newer := fixesNew()
	newer.Changelogs.Debian = slices.DeleteFunc(newer.Changelogs.Debian, func(s build.SourceChangelog) bool { return s.Source == "glibc" })
	if g := fixByName(t, Compare(newer, fixesOld()), "glibc"); !g.Downgrade || g.Recorded || len(g.Notes) != 1 || g.Notes[0] != "changelog not recorded in the old manifest" {
		t.Errorf("glibc downgrade without the old changelog: %+v", g)
	}
}

func TestFixesSummary(t *testing.T) {
	d := Compare(fixesOld(), fixesNew())
	want := "fixes 5 CVEs and 2 GHSA advisories in 4 packages, 1 package downgraded (losing fixes of 2 CVEs), no changelog recorded for 2 packages"
	if got := strings.Join(d.fixSummary(), ", "); got != want {
		t.Errorf("summary\n got %q\nwant %q", got, want)
	}
	if !strings.Contains(d.Summary(), want) {
		t.Errorf("Summary() lacks the fixes: %s", d.Summary())
	}
}

// TestFixesWithoutRecords: manifests written before drover recorded
// changelogs still compare; every changed package says its changelog is
// not recorded.
func TestFixesWithoutRecords(t *testing.T) {
	old, new := fixesOld(), fixesNew()
	old.Changelogs, new.Changelogs = nil, nil
	d := Compare(old, new)
	for _, f := range d.Fixes {
		if f.Recorded || len(f.Notes) != 1 || !strings.Contains(f.Notes[0], "predates drover recording") {
			t.Errorf("%s: %+v", f.Name, f)
		}
	}
	if got := strings.Join(d.fixSummary(), ", "); got != "1 package downgraded, no changelog recorded for 8 packages" {
		t.Errorf("summary %q", got)
	}
}

// TestNoFixesAcrossArchitectures: an arm64 build is no upgrade of the
// amd64 one, though binNMU versions differ.
func TestNoFixesAcrossArchitectures(t *testing.T) {
	arm := fixesNew()
	arm.Arch = "arm64"
	if d := Compare(fixesOld(), arm); len(d.Fixes) != 0 {
		t.Errorf("fixes across architectures: %+v", d.Fixes)
	}
}

// TestDebianEntriesCoverage: "not recorded" only when the changelog went
// on beyond the recorded entries and the old version is older than them;
// a recorded changelog older than the new version says where it ends.
func TestDebianEntriesCoverage(t *testing.T) {
	sc := &build.SourceChangelog{Source: "x", Entries: []build.ChangelogEntry{cl("3-1", "2026-03-01", "unstable", "c"), cl("2-1", "2026-02-01", "unstable", "b")}}
	for _, c := range []struct {
		more   bool
		lo, hi string
		want   []string
	}{
		{false, "1-1", "3-1", []string{}},
		{true, "1-1", "3-1", []string{"entries before 2-1 (2026-02-01) were not recorded"}},
		{true, "2-1", "3-1", []string{}},
		{true, "2-1", "4-1", []string{"the recorded changelog ends at 3-1"}},
	} {
		sc.More = c.more
		if _, notes := debianEntries(sc, c.lo, c.hi); !reflect.DeepEqual(notes, c.want) {
			t.Errorf("more %v, %s → %s: notes %q, want %q", c.more, c.lo, c.hi, notes, c.want)
		}
	}
}

func TestFenced(t *testing.T) {
	if got := fenced("a ``` b"); got != "````text\na ``` b\n````\n" {
		t.Errorf("fenced: %q", got)
	}
}

// TestFixesFollowTheSource: a new kernel ABI renames the kernel's package;
// its source package is what changed. The signed kernel's changelog holds
// the linux entries too: 6.12.117-1 is older than 6.12.117+1, the old
// image's. A package of a manifest without sources gets the other's.
func TestFixesFollowTheSource(t *testing.T) {
	old, new := base(), base()
	old.Packages = []build.Package{
		{Name: "libc6", Version: "2.41-12+deb13u4", Arch: "amd64"},
		{Name: "linux-image-6.12.117+deb13-cloud-amd64", Version: "6.12.117-1", Arch: "amd64", Source: "linux-signed-amd64", SourceVersion: "6.12.117+1"},
	}
	new.Packages = []build.Package{
		{Name: "libc6", Version: "2.41-12+deb13u5", Arch: "amd64", Source: "glibc", SourceVersion: "2.41-12+deb13u5", Suite: "trixie-security"},
		{Name: "linux-image-6.12.118+deb13-cloud-amd64", Version: "6.12.118-1", Arch: "amd64", Source: "linux-signed-amd64", SourceVersion: "6.12.118+1", Suite: "trixie-security"},
	}
	new.Changelogs = &build.Changelogs{Debian: []build.SourceChangelog{
		fixesNew().Changelogs.Debian[2], // glibc
		{Source: "linux-signed-amd64", More: true, Entries: []build.ChangelogEntry{
			cl("6.12.118+1", "2026-11-20", "trixie-security", "* Sign kernel from linux 6.12.118-1\n\n* New upstream stable update (CVE-2026-98853)", "CVE-2026-98853"),
			cl("6.12.117-1", "2026-11-01", "trixie-security", "* New upstream stable update (CVE-2026-92499)", "CVE-2026-92499"),
			cl("6.12.116-1", "2026-10-01", "trixie-security", "* New upstream stable update"),
		}},
	}}
	d := Compare(old, new)
	k := fixByName(t, d, "linux-signed-amd64")
	if k.Old != "6.12.117+1" || k.New != "6.12.118+1" || entryVersions(k) != "6.12.118+1" || !k.Security ||
		strings.Join(k.Packages, " ") != "linux-image-6.12.117+deb13-cloud-amd64 linux-image-6.12.118+deb13-cloud-amd64" {
		t.Errorf("kernel: %+v", k)
	}
	if g := fixByName(t, d, "glibc"); g.Old != "2.41-12+deb13u4" || entryVersions(g) != "2.41-12+deb13u5" {
		t.Errorf("glibc from a manifest without sources: %+v", g)
	}
	if len(d.Fixes) != 2 {
		t.Errorf("fixes: %+v", d.Fixes)
	}
}
