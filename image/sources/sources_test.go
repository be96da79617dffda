package sources

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/drover-os/drover/image/cache"
	"github.com/drover-os/drover/image/debian/debiantest"
	"github.com/drover-os/drover/image/lock"
	"github.com/drover-os/drover/image/recipe"
)

var basePkgs = []debiantest.Package{
	{Name: "libc6", Version: "2.41-12"},
	{Name: "mawk", Version: "1.3.4-1", Provides: "awk"},
	{Name: "base-files", Version: "13.8", Depends: "awk"},
	{Name: "systemd", Version: "257.13-1", Depends: "libc6 (>= 2.38), libsystemd0 (= 257.13-1)"},
	{Name: "libsystemd0", Version: "257.13-1", Depends: "libc6"},
	{Name: "linux-image-cloud-amd64", Version: "6.12.117-1", Depends: "libc6"},
	{Name: "broken", Version: "1.0", Depends: "libc6 (>= 9.0)"},
}

type env struct {
	t       *testing.T
	archive *debiantest.Archive
	dir     string
	log     *bytes.Buffer
	opts    Options
}

func newEnv(t *testing.T) *env {
	t.Helper()
	a := debiantest.New(t, "trixie", basePkgs)
	c, err := cache.Open(filepath.Join(t.TempDir(), "cache"))
	if err != nil {
		t.Fatal(err)
	}
	log := &bytes.Buffer{}
	return &env{t: t, archive: a, dir: t.TempDir(), log: log,
		opts: Options{Mirror: a.URL, SecurityMirror: a.SecurityURL, Keyring: a.KeyringPath, Cache: c, Log: log}}
}

func (e *env) recipe(body string) *recipe.Recipe {
	e.t.Helper()
	p := filepath.Join(e.dir, "r.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		e.t.Fatal(err)
	}
	r, err := recipe.Load(p)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func (e *env) lock(r *recipe.Recipe, prev *lock.Lock) (*Result, error) {
	return Lock(context.Background(), r, prev, e.opts)
}

func TestLockIsStableAndUnchangedIsANoop(t *testing.T) {
	e := newEnv(t)
	r := e.recipe("name: t\npackages: [systemd, base-files]\n")
	res, err := e.lock(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := res.Lock.Format("h")
	for _, want := range []string{"deb libc6 2.41-12 amd64", "deb libsystemd0 257.13-1", "deb mawk 1.3.4-1", "deb linux-image-cloud-amd64"} {
		if !strings.Contains(string(first), want) {
			t.Errorf("lock lacks %q:\n%s", want, first)
		}
	}
	if res.Why["libsystemd0"] == "" || res.Why["systemd"] != "requested by the recipe" {
		t.Errorf("explanation missing: %v", res.Why)
	}
	// A fresh resolution of the same recipe against the same archive gives the same bytes.
	res2, err := e.lock(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, res2.Lock.Format("h")) {
		t.Fatalf("two locks differ:\n%s\n---\n%s", first, res2.Lock.Format("h"))
	}
	// With the previous lock, nothing is re-resolved.
	prev, _ := lock.Parse("x", first)
	res3, err := e.lock(r, prev)
	if err != nil || !res3.Unchanged || !bytes.Equal(first, res3.Lock.Format("h")) {
		t.Fatalf("re-lock changed something: %v %v", err, res3)
	}
	// An archive update that does not touch the closure keeps the epoch.
	e.archive.SetPackages(t, append(append([]debiantest.Package(nil), basePkgs...), debiantest.Package{Name: "other", Version: "1"}))
	res4, err := e.lock(r, prev)
	if err != nil || res4.Unchanged {
		t.Fatalf("archive update not noticed: %v", err)
	}
	if res4.Lock.Epoch != prev.Epoch || res4.Lock.Suites[0].InRelease == prev.Suites[0].InRelease {
		t.Errorf("epoch %d (prev %d), suite %v", res4.Lock.Epoch, prev.Epoch, res4.Lock.Suites)
	}
}

func TestLockErrors(t *testing.T) {
	e := newEnv(t)
	missing := []byte("missing")
	e.archive.Put("/files/tool", []byte("tool v1"))
	good := sha256.Sum256([]byte("tool v1"))
	for _, tc := range []struct{ name, recipe, want string }{
		{"package not in archive", "name: t\npackages: [nosuchpkg]\n",
			`package "nosuchpkg" is not in trixie, trixie-updates, trixie-security (components: main); check the recipe's packages list`},
		{"unsatisfiable dependency", "name: t\npackages: [broken]\n",
			"libc6 (>= 9.0)"},
		{"url 404", fmt.Sprintf("name: t\npackages: [libc6]\nurls:\n  - name: tool\n    url: %s/files/nothere\n    sha256: %x\n    install: /usr/bin/tool\n", strings.TrimSuffix(e.archive.URL, "/debian"), sha256.Sum256(missing)),
			"r.yaml:4: url component tool: fetching tool: " + strings.TrimSuffix(e.archive.URL, "/debian") + "/files/nothere returned 404 Not Found"},
		{"url sha mismatch", fmt.Sprintf("name: t\npackages: [libc6]\nurls:\n  - name: tool\n    url: %s/files/tool\n    sha256: %s\n    install: /usr/bin/tool\n", strings.TrimSuffix(e.archive.URL, "/debian"), strings.Repeat("0", 64)),
			"sha256 mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.lock(e.recipe(tc.recipe), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
	_ = hex.EncodeToString(good[:])
}

func TestUnsatisfiableNamesEverything(t *testing.T) {
	e := newEnv(t)
	_, err := e.lock(e.recipe("name: t\npackages: [broken]\n"), nil)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"broken", "libc6 (>= 9.0)", "2.41-12"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestBadSignatureStopsBeforeAnythingElse(t *testing.T) {
	e := newEnv(t)
	ir := e.archive.Get("dists/trixie/InRelease")
	e.archive.Set("dists/trixie/InRelease", bytes.Replace(ir, []byte("Suite: trixie"), []byte("Suite: trixje"), 1))
	_, err := e.lock(e.recipe("name: t\npackages: [systemd]\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "signature") {
		t.Fatalf("want a signature error, got %v", err)
	}
	if reqs := e.archive.Requests(); len(reqs) != 1 || !strings.HasSuffix(reqs[0], "/InRelease") {
		t.Errorf("fetched more than the InRelease: %v", reqs)
	}
}

func TestFetchDetectsCorruptCacheEntry(t *testing.T) {
	e := newEnv(t)
	r := e.recipe("name: t\npackages: [systemd]\n")
	res, err := e.lock(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Fetch(context.Background(), r, res.Lock, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	var deb lock.Deb
	for _, d := range res.Lock.Debs {
		if d.Name == "systemd" {
			deb = d
		}
	}
	p := f.Debs["systemd"]
	data, _ := os.ReadFile(p)
	data[0] ^= 0xff
	os.Chmod(p, 0o644)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := sha256.Sum256(data)
	e.log.Reset()
	if _, err := Fetch(context.Background(), r, res.Lock, e.opts); err != nil {
		t.Fatal(err)
	}
	log := e.log.String()
	for _, want := range []string{deb.FileName(), deb.SHA256, hex.EncodeToString(bad[:]), "fetching it again"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	again, _ := os.ReadFile(p)
	if sum := sha256.Sum256(again); hex.EncodeToString(sum[:]) != deb.SHA256 {
		t.Error("entry not repaired")
	}
}

// TestSecurityAndUpdatesSuites: a package takes its highest version among
// the release, its -updates and its -security suite (as apt at equal
// priority); of equal versions the release's; each deb line names its
// suite, and fetch takes a security update from the security archive.
func TestSecurityAndUpdatesSuites(t *testing.T) {
	e := newEnv(t)
	e.archive.SetSuite(t, "trixie-updates", []debiantest.Package{
		{Name: "libc6", Version: "2.41-12+deb13u1"},
		// The same version as the release's: the release's is taken.
		{Name: "libsystemd0", Version: "257.13-1", Depends: "libc6"},
	})
	e.archive.SetSuite(t, "trixie-security", []debiantest.Package{
		{Name: "libc6", Version: "2.41-12+deb13u2"},
		{Name: "systemd", Version: "257.13-1+deb13u1", Depends: "libc6 (>= 2.38), libsystemd0 (= 257.13-1)"},
		// Older than the release's: never taken.
		{Name: "mawk", Version: "1.3.4-0+deb13u1", Provides: "awk"},
	})
	r := e.recipe("name: t\npackages: [systemd, base-files]\n")
	res, err := e.lock(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, d := range res.Lock.Debs {
		got[d.Name] = d.Version + " " + d.Suite + " " + d.Path
	}
	for name, want := range map[string]string{
		"libc6":       "2.41-12+deb13u2 trixie-security pool/updates/main/l/libc6/libc6_2.41-12+deb13u2_amd64.deb",
		"systemd":     "257.13-1+deb13u1 trixie-security pool/updates/main/s/systemd/systemd_257.13-1+deb13u1_amd64.deb",
		"libsystemd0": "257.13-1 trixie pool/main/l/libsystemd0/libsystemd0_257.13-1_amd64.deb",
		"mawk":        "1.3.4-1 trixie pool/main/m/mawk/mawk_1.3.4-1_amd64.deb",
	} {
		if got[name] != want {
			t.Errorf("%s: locked %q, want %q", name, got[name], want)
		}
	}
	var names []string
	for _, s := range res.Lock.Suites {
		names = append(names, s.Name)
		if s.Signer != e.archive.Fingerprint() || s.InRelease == "" {
			t.Errorf("suite %s not pinned with its signer: %+v", s.Name, s)
		}
	}
	if strings.Join(names, " ") != "trixie trixie-updates trixie-security" {
		t.Errorf("suites %v", names)
	}
	text := res.Lock.Format("h")
	if !strings.Contains(string(text), "\ndeb systemd 257.13-1+deb13u1 amd64 ") || !strings.Contains(string(text), " trixie-security pool/updates/main/s/systemd/") {
		t.Errorf("deb line lacks the suite:\n%s", text)
	}

	l, err := lock.Parse("x.lock", text)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Fetch(context.Background(), r, l, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(f.Debs["systemd"]); string(data) != "deb systemd 257.13-1+deb13u1" {
		t.Errorf("systemd fetched as %q", data)
	}
	if !slices.Contains(e.archive.Requests(), "/debian-security/pool/updates/main/s/systemd/systemd_257.13-1+deb13u1_amd64.deb") {
		t.Errorf("systemd not fetched from the security archive: %v", e.archive.Requests())
	}

	// No security archive configured: the lock says how to give one.
	o := e.opts
	o.SecurityMirror, o.SecurityMirrorErr = "", errors.New("no -security suite in the host's apt sources")
	if _, err := Lock(context.Background(), r, nil, o); err == nil || !strings.Contains(err.Error(), "suite trixie-security: no -security suite in the host's apt sources") {
		t.Errorf("lock without a security archive: %v", err)
	}
	// A deb line naming a suite the lock does not pin is refused by fetch.
	bad := *l
	bad.Debs = append([]lock.Deb(nil), l.Debs...)
	bad.Debs[0].Suite = "sid"
	if _, err := Fetch(context.Background(), r, &bad, e.opts); err == nil || !strings.Contains(err.Error(), `names suite "sid", which the lock does not pin`) {
		t.Errorf("fetch of a deb of an unpinned suite: %v", err)
	}
	// A newer security Release alone makes the lock stale, not unchanged.
	prev := l
	e.archive.SetSuite(t, "trixie-security", []debiantest.Package{{Name: "libc6", Version: "2.41-12+deb13u3"}})
	res2, err := e.lock(r, prev)
	if err != nil || res2.Unchanged {
		t.Fatalf("security update not noticed: unchanged %v, %v", res2 != nil && res2.Unchanged, err)
	}
}
