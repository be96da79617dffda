package build

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func gzipped(t *testing.T, text string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write([]byte(text)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// entry renders one Debian changelog entry as dch writes it.
func entry(src, ver, dist, date string, lines ...string) string {
	when, err := time.Parse(time.DateOnly, date)
	if err != nil {
		panic(err)
	}
	body := ""
	for _, l := range lines {
		body += "  " + l + "\n"
	}
	return fmt.Sprintf("%s (%s) %s; urgency=medium\n\n%s\n -- Jane Doe <jane@example.org>  %s\n\n", src, ver, dist, body, when.Format(time.RFC1123Z))
}

// glibcChangelog has five entries over four years, then the note Debian
// puts where it cut older entries.
func glibcChangelog() string {
	return entry("glibc", "2.41-12+deb13u5", "trixie-security", "2026-10-10",
		"* Fix a buffer overread in ns_sprintrrf (CVE-2026-6238).",
		"* Fix stack overflow in wordexp (CVE-2026-10791, CVE-2026-6238).") +
		entry("glibc", "2.41-12+deb13u4", "trixie", "2026-03-02", "* Fix ungetwc (CVE-2026-5928).") +
		entry("glibc", "2.41-12", "unstable", "2025-01-15", "* New upstream release.") +
		entry("glibc", "2.41-11", "unstable", "2024-06-01", "* Fix CVE-2024-2961.") +
		entry("glibc", "2.40-1", "unstable", "2023-01-01", "* New upstream release.") +
		"# Older entries have been removed from this changelog.\n# To read the complete changelog use `apt changelog libc6`.\n"
}

func versions(entries []ChangelogEntry) string {
	var vs []string
	for _, e := range entries {
		vs = append(vs, e.Version)
	}
	return strings.Join(vs, " ")
}

// TestParseChangelogBounds: entries since the bound, at least the newest
// changelogMinEntries, more set when the changelog goes on.
func TestParseChangelogBounds(t *testing.T) {
	day := func(s string) time.Time { d, _ := time.Parse(time.DateOnly, s); return d }
	for _, c := range []struct {
		since time.Time
		text  string
		want  string
		more  bool
	}{
		{day("2024-11-21"), glibcChangelog(), "2.41-12+deb13u5 2.41-12+deb13u4 2.41-12", true},
		// Only one entry is within the bound: the newest three are kept.
		{day("2026-06-01"), glibcChangelog(), "2.41-12+deb13u5 2.41-12+deb13u4 2.41-12", true},
		{day("2025-12-01"), strings.Repeat(entry("x", "1.0-1", "unstable", "2026-01-01", "* a"), 1), "1.0-1", false},
		// Every entry is within the bound; the note ends the parse.
		{time.Time{}, glibcChangelog(), "2.41-12+deb13u5 2.41-12+deb13u4 2.41-12 2.41-11 2.40-1", true},
		// The same without the note: the whole changelog is recorded.
		{time.Time{}, strings.Split(glibcChangelog(), "# Older")[0], "2.41-12+deb13u5 2.41-12+deb13u4 2.41-12 2.41-11 2.40-1", false},
		{day("2025-06-01"), entry("x", "3-1", "unstable", "2026-01-01", "* c") + entry("x", "2-1", "unstable", "2025-09-01", "* b") +
			entry("x", "1-1", "unstable", "2025-07-01", "* a") + entry("x", "0-1", "unstable", "2025-05-01", "* z"), "3-1 2-1 1-1", true},
	} {
		entries, more, err := parseChangelog(gzipped(t, c.text), c.since)
		if err != nil {
			t.Fatal(err)
		}
		if got := versions(entries); got != c.want || more != c.more {
			t.Errorf("since %s: entries %q, more %v; want %q, %v", c.since.Format(time.DateOnly), got, more, c.want, c.more)
		}
	}
}

func TestParseChangelogEntry(t *testing.T) {
	entries, _, err := parseChangelog(gzipped(t, glibcChangelog()), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	want := ChangelogEntry{Version: "2.41-12+deb13u5", Date: time.Date(2026, 10, 10, 0, 0, 0, 0, time.UTC), Distribution: "trixie-security", Urgency: "medium",
		CVEs: []string{"CVE-2026-6238", "CVE-2026-10791"},
		Text: "* Fix a buffer overread in ns_sprintrrf (CVE-2026-6238).\n* Fix stack overflow in wordexp (CVE-2026-10791, CVE-2026-6238)."}
	if !reflect.DeepEqual(entries[0], want) {
		t.Errorf("first entry\n got %+v\nwant %+v", entries[0], want)
	}
	if entries[2].CVEs != nil {
		t.Errorf("an entry naming no CVE has CVEs %q", entries[2].CVEs)
	}
	for _, bad := range [][]byte{[]byte("not gzip"), gzipped(t, "no changelog at all\n"), gzipped(t, "2024-08-13 (3.46.1)\n  * upstream\n"), gzipped(t, "")} {
		if _, _, err := parseChangelog(bad, time.Time{}); err == nil {
			t.Errorf("%q parsed as a changelog", bad)
		}
	}
}

// TestChangelogTextIsCut: a long entry keeps its first lines within
// changelogMaxText and every CVE ID of the whole text.
func TestChangelogTextIsCut(t *testing.T) {
	var lines []string
	for i := range 200 {
		lines = append(lines, fmt.Sprintf("- fix number %03d of the upstream stable update (CVE-2026-%05d)", i, 10000+i))
	}
	entries, _, err := parseChangelog(gzipped(t, entry("linux", "6.12.117-1", "trixie", "2026-11-01", lines...)), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	e := entries[0]
	if len(e.Text) > changelogMaxText || len(e.CVEs) != 200 || e.CutLines == 0 {
		t.Fatalf("text %d bytes, %d CVEs, %d lines cut", len(e.Text), len(e.CVEs), e.CutLines)
	}
	if kept := strings.Count(e.Text, "\n") + 1; kept+e.CutLines != 200 || !strings.HasPrefix(e.Text, lines[0]+"\n") || !strings.HasSuffix(e.Text, lines[kept-1]) {
		t.Errorf("%d lines kept + %d cut, want 200 in order:\n%s", kept, e.CutLines, e.Text)
	}
	if text, cut := cutLines([]string{strings.Repeat("é", 2000)}, 11); text != "ééééé" || cut != 0 {
		t.Errorf("a long first line is cut to %q (%d more lines), want 5 whole runes", text, cut)
	}
}

func TestIDs(t *testing.T) {
	got := ids(cveRE, "CVE-2026-10000 CVE-2025-1234 cve-2026-1 CVE-2026-9999 CVE-2026-123 CVE-2026-9999 GHSA-vwhp-8p66-mq4f")
	if want := []string{"CVE-2025-1234", "CVE-2026-9999", "CVE-2026-10000"}; !reflect.DeepEqual(got, want) {
		t.Errorf("CVE IDs %q, want %q", got, want)
	}
	if got := ids(ghsaRE, "[**GHSA-vwhp-8p66-mq4f**](…/GHSA-vwhp-8p66-mq4f) GHSA-8647-2jxj-p2rc"); !reflect.DeepEqual(got, []string{"GHSA-8647-2jxj-p2rc", "GHSA-vwhp-8p66-mq4f"}) {
		t.Errorf("GHSA IDs %q", got)
	}
}

func TestChangelogFilesWant(t *testing.T) {
	c := newChangelogFiles()
	for p, want := range map[string]bool{
		"/usr/share/doc/libc6/changelog.Debian.gz":           true,
		"/usr/share/doc/e2fsprogs/changelog.Debian.amd64.gz": true,
		"/usr/share/doc/linux-base/changelog.gz":             true,
		"/usr/share/doc/libsqlite3-0/changelog.html.gz":      false,
		"/usr/share/doc/libc6/copyright":                     false,
		"/usr/share/doc/changelog.gz":                        false,
		"/usr/share/doc/foo/examples/changelog.gz":           false,
		"/usr/lib/foo/changelog.Debian.gz":                   false,
	} {
		if c.Want(p) != want {
			t.Errorf("Want(%s) = %v", p, !want)
		}
	}
}

// TestSourceChangelogs: one changelog per source, from the binary of the
// newest upload; binNMU entries merged; a native package's changelog.gz;
// an upstream changelog.gz is not taken for the Debian one.
func TestSourceChangelogs(t *testing.T) {
	pkgs := []Package{
		{Name: "libc-bin", Version: "2.41-12+deb13u5", Source: "glibc", SourceVersion: "2.41-12+deb13u5"},
		{Name: "glibc-doc", Version: "2.41-12+deb13u4", Source: "glibc", SourceVersion: "2.41-12+deb13u4"}, // arch: all, lagging
		{Name: "libc6", Version: "2.41-12+deb13u5", Source: "glibc", SourceVersion: "2.41-12+deb13u5"},
		{Name: "e2fsprogs", Version: "1.47.2-3+b12", Source: "e2fsprogs", SourceVersion: "1.47.2-3"},
		{Name: "kmod", Version: "34.2-2", Source: "kmod", SourceVersion: "34.2-2"},
		{Name: "linux-image-cloud-amd64", Version: "6.12.117-1", Source: "linux-signed-amd64", SourceVersion: "6.12.117+1"},
		{Name: "libfoo1", Version: "1.0-1"}, // an old manifest's package: no source recorded
		{Name: "libsqlite3-0", Version: "3.46.1-7", Source: "sqlite3", SourceVersion: "3.46.1-7"},
	}
	lagging := entry("glibc", "2.41-12+deb13u4", "trixie", "2026-03-02", "* old")
	files := map[string]map[string][]byte{
		"glibc-doc": {"/usr/share/doc/glibc-doc/changelog.Debian.gz": gzipped(t, lagging)},
		"libc6":     {"/usr/share/doc/libc6/changelog.Debian.gz": gzipped(t, glibcChangelog()), "/usr/share/doc/libc6/changelog.gz": gzipped(t, "upstream\n")},
		"libc-bin":  {"/usr/share/doc/libc-bin/changelog.Debian.gz": gzipped(t, glibcChangelog())},
		"e2fsprogs": {
			"/usr/share/doc/e2fsprogs/changelog.Debian.gz":       gzipped(t, entry("e2fsprogs", "1.47.2-3", "unstable", "2025-03-01", "* c")),
			"/usr/share/doc/e2fsprogs/changelog.Debian.amd64.gz": gzipped(t, entry("e2fsprogs", "1.47.2-3+b12", "trixie", "2026-07-12", "* Rebuild for outdated Built-Using (glibc/2.41-12+deb13u3)")),
		},
		"kmod":                    {"/usr/share/doc/libkmod2/changelog.Debian.gz": gzipped(t, entry("kmod", "34.2-2", "unstable", "2025-06-01", "* k"))},
		"linux-image-cloud-amd64": {"/usr/share/doc/linux-image-cloud-amd64/changelog.gz": gzipped(t, entry("linux-signed-amd64", "6.12.117+1", "trixie-security", "2026-11-01", "* Sign kernel from linux 6.12.117-1", "- ext4: validate readdir offset (CVE-2026-92499)"))},
		"libfoo1":                 {"/usr/share/doc/libfoo1/changelog.Debian.gz": gzipped(t, entry("foo", "1.0-1", "unstable", "2025-06-01", "* f"))},
		"libsqlite3-0":            {"/usr/share/doc/libsqlite3-0/changelog.gz": gzipped(t, "2024-08-13 (3.46.1)\n  * upstream\n")},
	}
	got := map[string]SourceChangelog{}
	var order []string
	for _, sc := range debianChangelogs(pkgs, files, time.Date(2024, 11, 21, 0, 0, 0, 0, time.UTC)) {
		got[sc.Source] = sc
		order = append(order, sc.Source)
	}
	if strings.Join(order, " ") != "e2fsprogs glibc kmod libfoo1 linux-signed-amd64 sqlite3" {
		t.Errorf("sources %q, want one per source, sorted", order)
	}
	for src, want := range map[string]struct{ pkg, file, versions, problem string }{
		"glibc":              {"libc-bin", "/usr/share/doc/libc-bin/changelog.Debian.gz", "2.41-12+deb13u5 2.41-12+deb13u4 2.41-12", ""},
		"e2fsprogs":          {"e2fsprogs", "/usr/share/doc/e2fsprogs/changelog.Debian.gz", "1.47.2-3+b12 1.47.2-3", ""},
		"kmod":               {"kmod", "/usr/share/doc/libkmod2/changelog.Debian.gz", "34.2-2", ""},
		"linux-signed-amd64": {"linux-image-cloud-amd64", "/usr/share/doc/linux-image-cloud-amd64/changelog.gz", "6.12.117+1", ""},
		"libfoo1":            {"libfoo1", "/usr/share/doc/libfoo1/changelog.Debian.gz", "1.0-1", ""},
		"sqlite3":            {"", "", "", "no changelog.Debian.gz in libsqlite3-0"},
	} {
		sc := got[src]
		if sc.Package != want.pkg || sc.File != want.file || versions(sc.Entries) != want.versions || sc.Problem != want.problem {
			t.Errorf("%s: %s %s %q problem %q\nwant %s %s %q problem %q", src, sc.Package, sc.File, versions(sc.Entries), sc.Problem,
				want.pkg, want.file, want.versions, want.problem)
		}
	}
	if cves := got["linux-signed-amd64"].Entries[0].CVEs; !reflect.DeepEqual(cves, []string{"CVE-2026-92499"}) {
		t.Errorf("kernel entry CVEs %q", cves)
	}
}
