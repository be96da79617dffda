package lockcheck

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/image/debian"
	"github.com/drover-os/drover/image/lock"
)

var (
	locked   = time.Date(2026, 11, 21, 9, 15, 44, 0, time.UTC)
	shaA     = strings.Repeat("a", 64)
	shaB     = strings.Repeat("b", 64)
	shaSec   = strings.Repeat("c", 64)
	trixie   = "trixie"
	security = "trixie-security"
)

// suites is a trixie index with base-files 13.8+deb13u8 and libc6
// 2.41-12, and a security index with libc6 2.41-12+deb13u1, both the
// Releases the lock pins.
func suites() []Suite {
	return []Suite{
		{Name: trixie, Date: locked, LockedDate: locked, Pinned: true, Packages: []debian.Package{
			{Name: "base-files", Version: "13.8+deb13u8", Architecture: "amd64", SHA256: shaA, Size: 88324, Filename: "pool/main/b/base-files/base-files_13.8+deb13u8_amd64.deb"},
			{Name: "libc6", Version: "2.41-12", Architecture: "amd64", SHA256: shaB, Size: 100, Filename: "pool/main/g/glibc/libc6_2.41-12_amd64.deb"},
			{Name: "libc6", Version: "2.41-12", Architecture: "arm64", SHA256: shaSec, Size: 99, Filename: "pool/main/g/glibc/libc6_2.41-12_arm64.deb"},
		}},
		{Name: security, Date: locked, LockedDate: locked, Pinned: true, Packages: []debian.Package{
			{Name: "libc6", Version: "2.41-12+deb13u1", Architecture: "amd64", SHA256: shaSec, Size: 101, Filename: "pool/updates/main/g/glibc/libc6_2.41-12+deb13u1_amd64.deb"},
		}},
	}
}

// good is the lock's honest line for each entry of suites.
func good() []lock.Deb {
	return []lock.Deb{
		{Name: "base-files", Version: "13.8+deb13u8", Arch: "amd64", Size: 88324, SHA256: shaA, Suite: trixie, Path: "pool/main/b/base-files/base-files_13.8+deb13u8_amd64.deb", Line: 10},
		{Name: "libc6", Version: "2.41-12+deb13u1", Arch: "amd64", Size: 101, SHA256: shaSec, Suite: security, Path: "pool/updates/main/g/glibc/libc6_2.41-12+deb13u1_amd64.deb", Line: 11},
	}
}

func TestHonestLockHasNoProblem(t *testing.T) {
	if p := Check(good(), suites()); len(p) != 0 {
		t.Fatalf("problems with an honest lock: %+v", p)
	}
}

// Each forged line is one problem naming the line, the suite and what
// differs; the honest line beside it is none.
func TestForgedLines(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edit   func(d *lock.Deb)
		detail string
	}{
		{"invented version", func(d *lock.Deb) { d.Version = "13.8+deb13u9" },
			"deb base-files 13.8+deb13u9 amd64: the signed trixie index (Release of 2026-11-21T09:15:44Z) has no version 13.8+deb13u9 of base-files: it has version 13.8+deb13u8 with sha256 " + shaA + ", size 88324"},
		{"changed digest", func(d *lock.Deb) { d.SHA256 = shaB },
			"deb base-files 13.8+deb13u8 amd64: sha256 " + shaB + ", but the signed trixie index (Release of 2026-11-21T09:15:44Z) says " + shaA},
		{"changed size", func(d *lock.Deb) { d.Size = 88325 },
			"deb base-files 13.8+deb13u8 amd64: size 88325, but the signed trixie index (Release of 2026-11-21T09:15:44Z) says 88324"},
		{"changed path", func(d *lock.Deb) { d.Path = "pool/main/b/base-files/evil.deb" },
			"deb base-files 13.8+deb13u8 amd64: path pool/main/b/base-files/evil.deb, but the signed trixie index (Release of 2026-11-21T09:15:44Z) says pool/main/b/base-files/base-files_13.8+deb13u8_amd64.deb"},
		{"package the index lacks", func(d *lock.Deb) { d.Name = "netcat" },
			"deb netcat 13.8+deb13u8 amd64: the signed trixie index (Release of 2026-11-21T09:15:44Z) lists no netcat for amd64 at all"},
		{"architecture the index lacks", func(d *lock.Deb) { d.Arch = "arm64" },
			"deb base-files 13.8+deb13u8 arm64: the signed trixie index (Release of 2026-11-21T09:15:44Z) lists no base-files for arm64 at all"},
		{"suite the lock does not pin", func(d *lock.Deb) { d.Suite = "sid" },
			`deb base-files 13.8+deb13u8 amd64 names suite "sid", which the lock does not pin`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debs := good()
			tc.edit(&debs[0])
			p := Check(debs, suites())
			if len(p) != 1 || p[0].Deb.Line != 10 || p[0].Detail() != tc.detail {
				t.Fatalf("problems %+v\ndetail: %s\nwant one for line 10: %s", p, detailOf(p), tc.detail)
			}
		})
	}
}

// An older version the archive publishes in another suite, with that
// file's real digest, is still not in the index of the suite the line
// names: trixie's libc6 under trixie-security.
func TestOlderPublishedVersionUnderAnotherSuite(t *testing.T) {
	debs := good()
	debs[1].Version, debs[1].SHA256, debs[1].Size = "2.41-12", shaB, 100
	p := Check(debs, suites())
	want := "deb libc6 2.41-12 amd64: the signed trixie-security index (Release of 2026-11-21T09:15:44Z) has no version 2.41-12 of libc6: it has version 2.41-12+deb13u1 with sha256 " + shaSec + ", size 101"
	if len(p) != 1 || p[0].Deb.Line != 11 || p[0].Detail() != want {
		t.Fatalf("problems %+v\n%s\nwant: %s", p, detailOf(p), want)
	}
}

// Several differing fields are one problem each, in line order.
func TestProblemsInLineOrder(t *testing.T) {
	debs := good()
	debs[0], debs[1] = debs[1], debs[0]
	debs[0].SHA256, debs[0].Size = shaA, 7
	debs[1].Version = "1"
	p := Check(debs, suites())
	var got []string
	for _, x := range p {
		got = append(got, fmt.Sprintf("%s@%d", x.Field, x.Deb.Line))
	}
	if strings.Join(got, " ") != "@10 sha256@11 size@11" {
		t.Fatalf("problems %v", got)
	}
}

// A stand-in Release (the pinned one could not be had) says so: a
// version superseded since is not evidence of forgery.
func TestStandInReleaseSaysSo(t *testing.T) {
	s := suites()
	s[1].Pinned, s[1].Date = false, locked.Add(48*time.Hour)
	p := Check(good()[1:], s)
	if len(p) != 0 {
		t.Fatalf("an honest line with a stand-in index that still lists it: %+v", p)
	}
	s[1].Packages[0].Version = "2.41-12+deb13u2"
	p = Check(good()[1:], s)
	if len(p) != 1 || !strings.HasSuffix(p[0].Detail(), "(the Release the lock pins, of 2026-11-21T09:15:44Z, is neither in the cache nor served by the mirror any more: a version superseded since cannot be told from a forged line)") ||
		!strings.Contains(p[0].Detail(), "(Release of 2026-11-23T09:15:44Z)") {
		t.Fatalf("problems %+v\n%s", p, detailOf(p))
	}
}

func TestErrorNamesLinesAndAdvice(t *testing.T) {
	debs := good()
	debs[0].Version = "9"
	debs[1].SHA256 = shaA
	e := &Error{Lock: "recipes/minimal.yaml.lock", Recipe: "recipes/minimal.yaml", Problems: Check(debs, suites())}
	lines := strings.Split(e.Error(), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "recipes/minimal.yaml.lock:10: deb base-files 9 amd64: ") || !strings.HasPrefix(lines[1], "recipes/minimal.yaml.lock:11: deb libc6 2.41-12+deb13u1 amd64: sha256 ") ||
		!strings.HasPrefix(lines[2], "2 lines of recipes/minimal.yaml.lock disagree with the archive's signed index") || !strings.HasSuffix(lines[2], "Run `drover lock --refresh recipes/minimal.yaml` to re-resolve every package from the signed archive, and review the diff") {
		t.Fatalf("error:\n%s", e)
	}
}

func TestCheckDate(t *testing.T) {
	l := []lock.Suite{{Name: trixie, Date: locked}, {Name: "trixie-updates", Date: locked.Add(time.Hour)}}
	for _, ok := range []struct {
		suite string
		at    time.Time
	}{{trixie, locked}, {trixie, locked.Add(time.Second)}, {"trixie-updates", locked.Add(2 * time.Hour)}, {"bookworm", locked.Add(-time.Hour)}} {
		if err := CheckDate(l, ok.suite, ok.at); err != nil {
			t.Errorf("%s at %s: %v", ok.suite, ok.at, err)
		}
	}
	err := CheckDate(l, "trixie-updates", locked)
	var oe *OlderReleaseError
	want := "the mirror's InRelease for trixie-updates is dated 2026-11-21T09:15:44Z, older than the 2026-11-21T10:15:44Z the lock records: the mirror is behind, or replays an old signed Release; use an up-to-date mirror, or pass --allow-older-release to accept the older Release on purpose"
	if !errors.As(err, &oe) || err.Error() != want {
		t.Fatalf("older trixie-updates: %v\nwant: %s", err, want)
	}
}

func TestCompare(t *testing.T) {
	d := good()[0]
	p := suites()[0].Packages[0]
	p.Suite = trixie
	if c := Compare(d, p); len(c) != 0 {
		t.Errorf("equal: %+v", c)
	}
	p.Filename = "elsewhere.deb"
	if c := Compare(d, p); len(c) != 1 || c[0].Field != "path" {
		t.Errorf("path in its own suite: %+v", c)
	}
	// Another suite's pool path is relative to another archive.
	p.Suite = "trixie-updates"
	if c := Compare(d, p); len(c) != 0 {
		t.Errorf("path in another suite: %+v", c)
	}
}

func detailOf(p []Problem) string {
	var s []string
	for _, x := range p {
		s = append(s, x.Detail())
	}
	return strings.Join(s, "\n")
}

func TestErrContradicted(t *testing.T) {
	var err error = &Error{Problems: Check([]lock.Deb{{Name: "x", Suite: trixie}}, suites())}
	wrapped := fmt.Errorf("fetch: %w", err)
	marked := fmt.Errorf("fetch: %w", Contradicted(errors.New("suite line edited")))
	if !errors.Is(wrapped, ErrContradicted) || !errors.Is(marked, ErrContradicted) || marked.Error() != "fetch: suite line edited" {
		t.Errorf("wrapped %v, marked %v", errors.Is(wrapped, ErrContradicted), marked)
	}
	if errors.Is(fmt.Errorf("fetch: %w", &OlderReleaseError{}), ErrContradicted) || errors.Is(errors.New("x"), ErrContradicted) {
		t.Error("an error that is not about the lock matches ErrContradicted")
	}
}
