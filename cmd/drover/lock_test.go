package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-os/drover/image/debian/debiantest"
)

func TestFetchRefusesStaleLock(t *testing.T) {
	a := debiantest.New(t, "trixie", []debiantest.Package{{Name: "libc6", Version: "2.41"}, {Name: "linux-image-cloud-amd64", Version: "6.12", Depends: "libc6"}, {Name: "udev", Version: "257"}})
	dir := t.TempDir()
	r := filepath.Join(dir, "r.yaml")
	os.WriteFile(r, []byte("name: t\npackages: [libc6]\n"), 0o644)
	common := []string{"--mirror", a.URL, "--security-mirror", a.SecurityURL, "--keyring", a.KeyringPath, "--cache", filepath.Join(dir, "cache")}
	if _, errOut, code := drover(t, append([]string{"lock", r}, common...)...); code != 0 {
		t.Fatalf("lock failed: %s", errOut)
	}
	if _, errOut, code := drover(t, append([]string{"fetch", r}, common...)...); code != 0 || !strings.Contains(errOut, "2 packages") {
		t.Fatalf("fetch failed (%d): %s", code, errOut)
	}
	os.WriteFile(r, []byte("name: t\npackages: [libc6, udev]\n"), 0o644)
	_, errOut, code := drover(t, append([]string{"fetch", r}, common...)...)
	want := "drover: lock " + r + ".lock does not match recipe " + r + " (its packages, kernel, suites or components changed since it was locked): run `drover lock " + r + "`\n"
	if code != 1 || errOut != want {
		t.Fatalf("stale lock: exit %d, stderr\n%s\nwant\n%s", code, errOut, want)
	}
}

func TestLockReportsRecipeErrorsWithLines(t *testing.T) {
	dir := t.TempDir()
	r := filepath.Join(dir, "r.yaml")
	os.WriteFile(r, []byte("name: t\npackages: [libc6]\nkernal: x\n"), 0o644)
	_, errOut, code := drover(t, "lock", r, "--mirror", "http://127.0.0.1:1/debian")
	if code != 1 || !strings.Contains(errOut, r+":3: kernal: unknown field") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

// A mirror whose InRelease is signed by a key outside recipes/keys is
// refused, naming the key, and no lock is written.
func TestLockRefusesKeyNotInTheRepository(t *testing.T) {
	a := debiantest.New(t, "trixie", []debiantest.Package{{Name: "libc6", Version: "2.41"}, {Name: "linux-image-cloud-amd64", Version: "6.12", Depends: "libc6"}})
	dir := t.TempDir()
	r := filepath.Join(dir, "r.yaml")
	os.WriteFile(r, []byte("name: t\npackages: [libc6]\n"), 0o644)
	_, errOut, code := drover(t, "lock", r, "--mirror", a.URL, "--security-mirror", a.SecurityURL, "--cache", filepath.Join(dir, "cache"))
	want := "drover: InRelease for trixie is signed by key " + a.Fingerprint() + ", which is not in keyring recipes/keys/debian-archive-trixie.asc"
	if code != 1 || !strings.HasPrefix(errOut, want) {
		t.Fatalf("exit %d, stderr\n%s\nwant it to start with\n%s", code, errOut, want)
	}
	if _, err := os.Stat(r + ".lock"); err == nil {
		t.Error("a lock was written")
	}
}
