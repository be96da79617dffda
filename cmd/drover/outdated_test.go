package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/drover-os/drover/image/debian/debiantest"
)

// TestOutdated: against the fake archive, a fresh lock is current (exit
// 0); a security update published after the lock makes it outdated (exit
// 1) with the package marked, in text and JSON, and --security-only counts
// only that; a lock line whose sha256 the signed index contradicts is an
// error naming the line (exit 2), as is a usage error.
func TestOutdated(t *testing.T) {
	a := debiantest.New(t, "trixie", []debiantest.Package{
		{Name: "libc6", Version: "2.41-12"}, {Name: "runc", Version: "1.1.15+ds1-2+b4", Depends: "libc6"},
		{Name: "zlib1g", Version: "1:1.3.dfsg-3"},
		{Name: "linux-image-cloud-amd64", Version: "6.12.117-1", Depends: "libc6"},
	})
	dir := t.TempDir()
	r := filepath.Join(dir, "r.yaml")
	os.WriteFile(r, []byte("name: t\npackages: [runc, zlib1g]\n"), 0o644)
	common := []string{"--mirror", a.URL, "--security-mirror", a.SecurityURL, "--keyring", a.KeyringPath, "--cache", filepath.Join(dir, "cache")}
	if _, errOut, code := drover(t, append([]string{"lock", r}, common...)...); code != 0 {
		t.Fatalf("lock failed: %s", errOut)
	}
	out, errOut, code := drover(t, append([]string{"outdated", r}, common...)...)
	if code != 0 || !strings.HasPrefix(out, r+".lock is current: no newer version in trixie, trixie-updates, trixie-security") {
		t.Fatalf("fresh lock: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "InRelease for trixie-security") {
		t.Errorf("no progress on stderr: %s", errOut)
	}

	a.SetSuite(t, "trixie-updates", []debiantest.Package{{Name: "zlib1g", Version: "1:1.3.dfsg-3+deb13u1"}})
	a.SetSuite(t, "trixie-security", []debiantest.Package{{Name: "runc", Version: "1.1.15+ds1-2+deb13u1", Depends: "libc6"}})
	out, errOut, code = drover(t, append([]string{"outdated", r}, common...)...)
	if code != 1 || !regexp.MustCompile(`(?m)^  runc +1\.1\.15\+ds1-2\+b4 \(trixie\) +-> 1\.1\.15\+ds1-2\+deb13u1 \(trixie-security\) +security update$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^  zlib1g +1:1\.3\.dfsg-3 \(trixie\) +-> 1:1\.3\.dfsg-3\+deb13u1 \(trixie-updates\) *$`).MatchString(out) ||
		!strings.Contains(out, "is outdated: 2 Debian packages with a newer version (1 security update)") {
		t.Fatalf("security update: exit %d\n%s%s", code, out, errOut)
	}
	out, _, code = drover(t, append([]string{"outdated", "--security-only", r}, common...)...)
	if code != 1 || !strings.Contains(out, "runc") || strings.Contains(out, "zlib1g") {
		t.Fatalf("--security-only: exit %d\n%s", code, out)
	}
	out, _, code = drover(t, append([]string{"outdated", "--json", r}, common...)...)
	var rep struct {
		Outdated bool
		Packages []struct {
			Name, Locked, Newer, Suite string
			Security                   bool
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 1 || !rep.Outdated || len(rep.Packages) != 2 ||
		rep.Packages[0].Name != "runc" || !rep.Packages[0].Security || rep.Packages[1].Name != "zlib1g" || rep.Packages[1].Security {
		t.Fatalf("--json: exit %d, %v\n%s", code, err, out)
	}

	// Only the updates suite changes: --security-only says current.
	a.SetSuite(t, "trixie-security", nil)
	if out, _, code := drover(t, append([]string{"outdated", "--security-only", r}, common...)...); code != 0 || !strings.Contains(out, "is current: no security update in") {
		t.Fatalf("--security-only without a security update: exit %d\n%s", code, out)
	}

	lockText, _ := os.ReadFile(r + ".lock")
	lines := strings.Split(string(lockText), "\n")
	n := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "deb libc6 ") {
			f := strings.Fields(l)
			f[5] = strings.Repeat("0", 64)
			lines[i], n = strings.Join(f, " "), i+1
		}
	}
	os.WriteFile(r+".lock", []byte(strings.Join(lines, "\n")), 0o644)
	_, errOut, code = drover(t, append([]string{"outdated", r}, common...)...)
	want := "drover: " + r + ".lock:" + strconv.Itoa(n) + ": deb libc6 2.41-12 amd64: sha256 " + strings.Repeat("0", 64) + ", but the signed trixie index (Release of "
	if code != 2 || !strings.HasPrefix(errOut[strings.Index(errOut, "drover: "):], want) {
		t.Fatalf("edited lock line: exit %d, stderr\n%s\nwant\n%s", code, errOut, want)
	}
	if _, _, code := drover(t, "outdated"); code != 2 {
		t.Errorf("no argument: exit %d, want 2", code)
	}
}
