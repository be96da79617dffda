package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/image/debian/debiantest"
)

// forgeArchive is a signed fake archive whose trixie has libc6 2.41-12 and
// whose trixie-security published 2.41-12+deb13u1, then 2.41-12+deb13u2,
// and a recipe locked against it: the lock pins security's deb13u2. It returns the archive, the recipe,
// the common flags (the cache is the one drover lock filled) and the
// honest lock's text.
func forgeArchive(t *testing.T) (*debiantest.Archive, string, []string, []byte) {
	t.Helper()
	a := debiantest.New(t, "trixie", []debiantest.Package{
		{Name: "libc6", Version: "2.41-12"}, {Name: "hello", Version: "1.0", Depends: "libc6"},
		{Name: "linux-image-cloud-amd64", Version: "6.12", Depends: "libc6"},
	})
	// Security published deb13u1, then deb13u2: the lock pins deb13u2.
	a.SetSuite(t, "trixie-security", []debiantest.Package{{Name: "libc6", Version: "2.41-12+deb13u1"}})
	a.SetSuite(t, "trixie-security", []debiantest.Package{{Name: "libc6", Version: "2.41-12+deb13u2"}})
	dir := t.TempDir()
	r := filepath.Join(dir, "r.yaml")
	os.WriteFile(r, []byte("name: t\npackages: [hello]\n"), 0o644)
	common := []string{"--mirror", a.URL, "--security-mirror", a.SecurityURL, "--keyring", a.KeyringPath, "--cache", filepath.Join(dir, "cache")}
	if _, errOut, code := drover(t, append([]string{"lock", r}, common...)...); code != 0 {
		t.Fatalf("lock failed: %s", errOut)
	}
	honest, err := os.ReadFile(r + ".lock")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(honest, []byte("\ndeb libc6 2.41-12+deb13u2 amd64 ")) {
		t.Fatalf("the lock does not pin security's libc6:\n%s", honest)
	}
	return a, r, common, honest
}

// editLine replaces the fields of the deb line of name (1-based field
// numbers as in the lock format: 2 version, 4 size, 5 sha256, 6 suite,
// 7 path) and returns the text and the line's number.
func editLine(t *testing.T, text []byte, name string, fields map[int]string) ([]byte, int) {
	t.Helper()
	lines := strings.Split(string(text), "\n")
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) == 8 && f[0] == "deb" && f[1] == name {
			for n, v := range fields {
				f[n] = v
			}
			lines[i] = strings.Join(f, " ")
			return []byte(strings.Join(lines, "\n")), i + 1
		}
	}
	t.Fatalf("no deb line for %s", name)
	return nil, 0
}

// debLine is the honest lock's deb line of name, split.
func debLine(t *testing.T, text []byte, name string) []string {
	t.Helper()
	for _, l := range strings.Split(string(text), "\n") {
		if f := strings.Fields(l); len(f) == 8 && f[0] == "deb" && f[1] == name {
			return f
		}
	}
	t.Fatalf("no deb line for %s", name)
	return nil
}

// poolRequests counts the archive's requests for .deb files: the build
// downloads packages only after the lock has passed the check.
func poolRequests(a *debiantest.Archive) int {
	n := 0
	for _, p := range a.Requests() {
		if strings.HasSuffix(p, ".deb") {
			n++
		}
	}
	return n
}

// TestBuildRefusesForgedLockLines: each forged libc6 line fails drover
// build with exit status 2 and an error naming the lock file, the line and
// what the signed index says, before any .deb is downloaded and with no
// output; the honest lock passes the check (the build downloads the .debs
// and fails later, at the fake packages).
func TestBuildRefusesForgedLockLines(t *testing.T) {
	a, r, common, honest := forgeArchive(t)
	sec := debLine(t, honest, "libc6")
	// Versions the archive published, each with its real digest, size and
	// pool path: security's previous libc6, and trixie's.
	published := func(version, pool string) map[int]string {
		data := []byte("deb libc6 " + version) // what debiantest serves as its .deb
		return map[int]string{2: version, 4: strconv.Itoa(len(data)), 5: sha256Hex(data), 7: pool + "/l/libc6/libc6_" + version + "_amd64.deb"}
	}
	has := "it has version 2.41-12+deb13u2 with sha256 " + sec[5] + ", size " + sec[4]
	index := "the signed trixie-security index (Release of " + rfc(a.Date) + ")"
	for _, tc := range []struct {
		name   string
		fields map[int]string
		want   string
	}{
		{"invented version", map[int]string{2: "2.41-12+deb13u9"},
			"deb libc6 2.41-12+deb13u9 amd64: " + index + " has no version 2.41-12+deb13u9 of libc6: " + has},
		{"older published version with its real digest", published("2.41-12+deb13u1", "pool/updates/main"),
			"deb libc6 2.41-12+deb13u1 amd64: " + index + " has no version 2.41-12+deb13u1 of libc6: " + has},
		{"trixie's version with its real digest under trixie-security", published("2.41-12", "pool/main"),
			"deb libc6 2.41-12 amd64: " + index + " has no version 2.41-12 of libc6: " + has},
		{"changed digest", map[int]string{5: strings.Repeat("0", 64)},
			"deb libc6 2.41-12+deb13u2 amd64: sha256 " + strings.Repeat("0", 64) + ", but " + index + " says " + sec[5]},
		{"changed size", map[int]string{4: "7"},
			"deb libc6 2.41-12+deb13u2 amd64: size 7, but " + index + " says " + sec[4]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forged, n := editLine(t, honest, "libc6", tc.fields)
			os.WriteFile(r+".lock", forged, 0o644)
			out := filepath.Join(t.TempDir(), "out")
			before := poolRequests(a)
			_, errOut, code := drover(t, append([]string{"build", r, "-o", out}, common...)...)
			want := r + ".lock:" + strconv.Itoa(n) + ": " + tc.want + "\n"
			if code != 2 || !strings.Contains(errOut, want) || !strings.Contains(errOut, "Run `drover lock --refresh "+r+"`") {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit 2 and the line:\n%s", code, errOut, want)
			}
			if got := poolRequests(a); got != before {
				t.Errorf("the build downloaded %d .deb files for a forged lock", got-before)
			}
			if ents, _ := os.ReadDir(out); len(ents) != 0 {
				t.Errorf("a refused build left %d entries in %s", len(ents), out)
			}
			// drover fetch refuses it the same way.
			if _, errOut, code := drover(t, append([]string{"fetch", r}, common...)...); code != 2 || !strings.Contains(errOut, want) {
				t.Errorf("fetch: exit %d, stderr:\n%s", code, errOut)
			}
		})
	}

	// A suite line whose date is not its pinned InRelease's: the date is
	// what a fresh Release may not go back from.
	edited := strings.Replace(string(honest), "\nsuite trixie "+rfc(a.Date)+" ", "\nsuite trixie "+rfc(a.Date.Add(time.Hour))+" ", 1)
	if edited == string(honest) {
		t.Fatal("no trixie suite line to edit")
	}
	os.WriteFile(r+".lock", []byte(edited), 0o644)
	_, errOut, code := drover(t, append([]string{"build", r, "-o", filepath.Join(t.TempDir(), "out")}, common...)...)
	if code != 2 || !strings.Contains(errOut, "suite trixie records the date "+rfc(a.Date.Add(time.Hour))+", but the InRelease it pins is dated "+rfc(a.Date)) {
		t.Errorf("edited suite date: exit %d, stderr:\n%s", code, errOut)
	}

	os.WriteFile(r+".lock", honest, 0o644)
	before := poolRequests(a)
	_, errOut, code = drover(t, append([]string{"build", r, "-o", filepath.Join(t.TempDir(), "out")}, common...)...)
	if code != 1 || !strings.Contains(errOut, "drover: assemble: ") || poolRequests(a) == before {
		t.Fatalf("honest lock: exit %d, %d .deb downloads, stderr:\n%s\nwant it past the check, failing at the fake packages", code, poolRequests(a)-before, errOut)
	}
}

// TestLockRefreshRepairsAForgedLine: plain drover lock keeps a forged lock
// (same recipe, same Releases), drover lock --refresh restores the honest
// one, byte for byte, and names the lines it changed.
func TestLockRefreshRepairsAForgedLine(t *testing.T) {
	_, r, common, honest := forgeArchive(t)
	forged, n := editLine(t, honest, "libc6", map[int]string{5: strings.Repeat("0", 64)})
	os.WriteFile(r+".lock", forged, 0o644)
	if _, errOut, code := drover(t, append([]string{"lock", r}, common...)...); code != 0 {
		t.Fatalf("lock: %s", errOut)
	}
	if got, _ := os.ReadFile(r + ".lock"); !bytes.Equal(got, forged) {
		t.Fatalf("plain drover lock changed the lock; this test is about the shortcut that keeps it:\n%s", got)
	}
	_, errOut, code := drover(t, append([]string{"lock", "--refresh", r}, common...)...)
	if code != 0 {
		t.Fatalf("lock --refresh: %s", errOut)
	}
	if got, _ := os.ReadFile(r + ".lock"); !bytes.Equal(got, honest) {
		t.Fatalf("lock --refresh did not restore the honest lock:\n%s\nwant:\n%s", got, honest)
	}
	forgedLine := strings.Split(string(forged), "\n")[n-1]
	honestLine := strings.Split(string(honest), "\n")[n-1]
	for _, want := range []string{"lock: " + r + ".lock:" + strconv.Itoa(n) + ": - " + forgedLine + "\n", "lock: " + r + ".lock:" + strconv.Itoa(n) + ": + " + honestLine + "\n"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("lock --refresh does not say %q:\n%s", want, errOut)
		}
	}
}

// TestLockRefusesAnOlderRelease: a mirror that serves a Release dated
// before the lock's is refused by drover lock and drover outdated, naming
// the suite and both dates, and the lock is kept; --allow-older-release
// accepts it and the lock records the older date.
func TestLockRefusesAnOlderRelease(t *testing.T) {
	a, r, common, honest := forgeArchive(t)
	locked := a.Date
	a.SetDates(t, locked.Add(-48*time.Hour), time.Time{})
	want := "the mirror's InRelease for trixie is dated " + rfc(locked.Add(-48*time.Hour)) + ", older than the " + rfc(locked) + " the lock records"
	for _, c := range []string{"lock", "outdated"} {
		_, errOut, code := drover(t, append([]string{c, r}, common...)...)
		if wantCode := map[string]int{"lock": 1, "outdated": 2}[c]; code != wantCode || !strings.Contains(errOut, want) || !strings.Contains(errOut, "--allow-older-release") {
			t.Errorf("%s: exit %d, stderr:\n%s\nwant exit %d and: %s", c, code, errOut, wantCode, want)
		}
		if got, _ := os.ReadFile(r + ".lock"); !bytes.Equal(got, honest) {
			t.Fatalf("%s changed the lock", c)
		}
	}
	if _, errOut, code := drover(t, append([]string{"outdated", "--allow-older-release", r}, common...)...); code != 0 {
		t.Errorf("outdated --allow-older-release: exit %d:\n%s", code, errOut)
	}
	if _, errOut, code := drover(t, append([]string{"lock", "--allow-older-release", r}, common...)...); code != 0 {
		t.Fatalf("lock --allow-older-release: exit %d:\n%s", code, errOut)
	}
	got, _ := os.ReadFile(r + ".lock")
	if !bytes.Contains(got, []byte("\nsuite trixie "+rfc(locked.Add(-48*time.Hour))+" ")) {
		t.Fatalf("the accepted lock does not record the older Release:\n%s", got)
	}
}

// TestBuildWhenTheMirrorMovedOn: a build with a cache that lacks the
// pinned InRelease (another machine) checks the lock against the mirror's
// newer Release: a line it still lists passes, one it superseded fails,
// saying why; the cache drover lock filled still has the pinned one.
func TestBuildWhenTheMirrorMovedOn(t *testing.T) {
	a, r, common, _ := forgeArchive(t)
	a.SetSuite(t, "trixie-updates", []debiantest.Package{{Name: "hello", Version: "1.0+u1", Depends: "libc6"}})
	other := append(append([]string(nil), common[:len(common)-1]...), filepath.Join(t.TempDir(), "cache"))
	before := poolRequests(a)
	_, errOut, code := drover(t, append([]string{"build", r, "-o", filepath.Join(t.TempDir(), "out")}, other...)...)
	if code != 1 || !strings.Contains(errOut, "drover: assemble: ") || poolRequests(a) == before {
		t.Fatalf("newer Release that still lists the lock's packages: exit %d, stderr:\n%s", code, errOut)
	}

	a.SetSuite(t, "trixie-security", []debiantest.Package{{Name: "libc6", Version: "2.41-12+deb13u3"}})
	_, errOut, code = drover(t, append([]string{"build", r, "-o", filepath.Join(t.TempDir(), "out")}, other...)...)
	if code != 2 || !strings.Contains(errOut, "has no version 2.41-12+deb13u2 of libc6: it has version 2.41-12+deb13u3") ||
		!strings.Contains(errOut, "is neither in the cache nor served by the mirror any more: a version superseded since cannot be told from a forged line") {
		t.Fatalf("superseded version without the pinned Release: exit %d, stderr:\n%s", code, errOut)
	}
	// A Release older than the lock's never stands in for the pinned one.
	a.SetDates(t, a.Date.Add(-30*24*time.Hour), time.Time{})
	_, errOut, code = drover(t, append([]string{"build", r, "-o", filepath.Join(t.TempDir(), "out")}, other...)...)
	if code != 1 || !strings.Contains(errOut, "the mirror's InRelease for trixie is dated "+rfc(a.Date)+", older than the ") ||
		!strings.Contains(errOut, "build where the lock's InRelease (sha256 ") {
		t.Fatalf("older Release without the pinned one: exit %d, stderr:\n%s", code, errOut)
	}

	// With the pinned Release cached the lock passes the check: the build
	// asks for the .debs (the fake archive, like Debian's pool, no longer
	// has the superseded one).
	before = poolRequests(a)
	_, errOut, code = drover(t, append([]string{"build", r, "-o", filepath.Join(t.TempDir(), "out")}, common...)...)
	if code != 1 || !strings.Contains(errOut, "/pool/updates/main/l/libc6/libc6_2.41-12+deb13u2_amd64.deb returned 404 Not Found") || poolRequests(a) == before {
		t.Fatalf("superseded version with the pinned Release cached: exit %d, stderr:\n%s", code, errOut)
	}
}

// TestOutdatedChecksThePinnedIndex: an invented version that today's
// index does not list, which outdated used to let through (exit 0), is an
// error naming the line where the pinned InRelease is cached; without it,
// outdated checks what today's index can tell and says which suites it
// could not check.
func TestOutdatedChecksThePinnedIndex(t *testing.T) {
	a, r, common, honest := forgeArchive(t)
	forged, n := editLine(t, honest, "hello", map[int]string{2: "1.0+evil1"})
	os.WriteFile(r+".lock", forged, 0o644)
	_, errOut, code := drover(t, append([]string{"outdated", r}, common...)...)
	want := r + ".lock:" + strconv.Itoa(n) + ": deb hello 1.0+evil1 amd64: the signed trixie index (Release of " + rfc(a.Date) + ") has no version 1.0+evil1 of hello: it has version 1.0 with sha256 "
	if code != 2 || !strings.Contains(errOut, want) || !strings.Contains(errOut, "drover lock --refresh "+r) {
		t.Fatalf("invented version: exit %d, stderr:\n%s\nwant exit 2 and: %s", code, errOut, want)
	}

	// Another machine's cache, after the archive moved on: trixie's pinned
	// InRelease is not to be had, and today's index does not contradict a
	// version it does not list.
	a.SetSuite(t, "trixie-updates", []debiantest.Package{{Name: "zlib1g", Version: "1"}})
	other := append(append([]string(nil), common[:len(common)-1]...), filepath.Join(t.TempDir(), "cache"))
	_, errOut, code = drover(t, append([]string{"outdated", r}, other...)...)
	if code == 2 || !strings.Contains(errOut, "the InRelease the lock pins for trixie, trixie-security, trixie-updates is neither in the cache nor served any more") {
		t.Fatalf("without the pinned Releases: exit %d, stderr:\n%s", code, errOut)
	}
}

func rfc(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
