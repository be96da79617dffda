package debian

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ulikunitz/xz"
)

const clientPackages = `Package: app
Version: 1.0
Architecture: amd64
Depends: libc6
Filename: pool/main/a/app/app_1.0_amd64.deb
Size: 100
SHA256: 3333333333333333333333333333333333333333333333333333333333333333

Package: libc6
Version: 2.41-12
Architecture: amd64
Filename: pool/main/g/glibc/libc6_2.41-12_amd64.deb
Size: 2000
SHA256: 4444444444444444444444444444444444444444444444444444444444444444
`

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func xzBytes(t *testing.T, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	// The smallest dictionary: the default one's match tables are
	// allocated and cleared for every archive a test builds, and the
	// reader allocates what the header names.
	w, err := xz.WriterConfig{DictCap: 4096}.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(data)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// fakeArchive serves one suite under /debian and records every request.
type fakeArchive struct {
	mu       sync.Mutex
	files    map[string][]byte // path → body
	requests []string
	headers  []http.Header
}

func (a *fakeArchive) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.requests = append(a.requests, r.URL.Path)
	a.headers = append(a.headers, r.Header.Clone())
	body, ok := a.files[r.URL.Path]
	a.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Write(body)
}

// archiveOpts tweaks the generated Release.
type archiveOpts struct {
	byHash   bool
	plainSHA string // overrides the uncompressed Packages hash
	signer   *openpgp.Entity
	codename string
}

// newFakeArchive builds an archive whose InRelease lists clientPackages. The
// plain Packages.xz name serves a newer, different index, as a mirror does
// mid-update, so only a by-hash fetch gets the indexed one.
func newFakeArchive(t *testing.T, o archiveOpts) (*fakeArchive, *httptest.Server, string) {
	t.Helper()
	xzData := xzBytes(t, []byte(clientPackages))
	newer := xzBytes(t, []byte(strings.ReplaceAll(clientPackages, "1.0", "1.1")))
	plainSHA := sha([]byte(clientPackages))
	if o.plainSHA != "" {
		plainSHA = o.plainSHA
	}
	if o.codename == "" {
		o.codename = "trixie"
	}
	byHash := "no"
	if o.byHash {
		byHash = "yes"
	}
	var rel strings.Builder
	fmt.Fprintf(&rel, "Origin: Debian\nSuite: stable\nCodename: %s\nDate: Sat, 09 Aug 2025 09:27:52 UTC\nAcquire-By-Hash: %s\n", o.codename, byHash)
	rel.WriteString("Architectures: all amd64\nComponents: main contrib\nSHA256:\n")
	fmt.Fprintf(&rel, " %s %d main/binary-amd64/Packages\n", plainSHA, len(clientPackages))
	fmt.Fprintf(&rel, " %s %d main/binary-amd64/Packages.xz\n", sha(xzData), len(xzData))
	if o.signer == nil {
		o.signer, _, _ = testKeys(t)
	}
	inRelease := clearsignWith(t, rel.String(), o.signer)
	dist := "/debian/dists/" + o.codename
	a := &fakeArchive{files: map[string][]byte{
		dist + "/InRelease":                                       inRelease,
		dist + "/main/binary-amd64/Packages.xz":                   newer,
		dist + "/main/binary-amd64/by-hash/SHA256/" + sha(xzData): xzData,
	}}
	if !o.byHash {
		a.files[dist+"/main/binary-amd64/Packages.xz"] = xzData
	}
	// The suite name is an alias of the codename directory on a mirror.
	a.files["/debian/dists/stable/InRelease"] = inRelease
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	return a, srv, sha(xzData)
}

// fakeStore downloads through HTTP into a temp dir, checking the hash.
type fakeStore struct {
	dir   string
	calls []string // URLs
}

func (s *fakeStore) Fetch(ctx context.Context, name, url, want string, size int64) (string, error) {
	s.calls = append(s.calls, url)
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK || sha(data) != want || int64(len(data)) != size {
		return "", fmt.Errorf("fetching %s: status %d, sha256 %s size %d, want %s size %d", name, resp.StatusCode, sha(data), len(data), want, size)
	}
	path := filepath.Join(s.dir, want)
	return path, os.WriteFile(path, data, 0o644)
}

func newTestClient(t *testing.T, srv *httptest.Server) (*Client, *fakeStore) {
	ed, rsa, _ := testKeys(t)
	st := &fakeStore{dir: t.TempDir()}
	return &Client{
		Mirror:      srv.URL + "/debian/",
		HTTP:        srv.Client(),
		Keyring:     openpgp.EntityList{ed, rsa},
		KeyringPath: "/test/archive.gpg",
		Store:       st,
		IndexDir:    t.TempDir(),
	}, st
}

func TestClientReleaseAndIndex(t *testing.T) {
	a, srv, xzSHA := newFakeArchive(t, archiveOpts{byHash: true})
	c, st := newTestClient(t, srv)
	var log bytes.Buffer
	c.Log = &log
	ctx := context.Background()

	rel, err := c.Release(ctx, "trixie")
	if err != nil {
		t.Fatal(err)
	}
	if rel.SHA256 != sha(a.files["/debian/dists/trixie/InRelease"]) {
		t.Errorf("Release.SHA256 = %s, want the served InRelease's hash", rel.SHA256)
	}
	if a.requests[0] != "/debian/dists/trixie/InRelease" || a.headers[0].Get("Cache-Control") != "no-cache" {
		t.Errorf("first request %s with Cache-Control %q; want a fresh InRelease", a.requests[0], a.headers[0].Get("Cache-Control"))
	}

	idx, err := c.Index(ctx, rel, []string{"main"}, "amd64")
	if err != nil {
		t.Fatal(err)
	}
	if len(idx.Packages) != 2 || idx.Packages[0].Version != "1.0" || idx.Suite != "trixie" {
		t.Fatalf("index = %+v", idx.Packages)
	}
	if want := srv.URL + "/debian/dists/trixie/main/binary-amd64/by-hash/SHA256/" + xzSHA; len(st.calls) != 1 || st.calls[0] != want {
		t.Errorf("store fetched %v, want the by-hash URL %s", st.calls, want)
	}
	cached := filepath.Join(c.IndexDir, xzSHA+".Packages")
	if data, err := os.ReadFile(cached); err != nil || string(data) != clientPackages {
		t.Errorf("decompressed cache %s: %v", cached, err)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(c.IndexDir, ".tmp-*")); len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}

	// Warm: the decompressed copy is used; neither the store nor the
	// mirror is asked for the index again.
	before := len(a.requests)
	idx2, err := c.Index(ctx, rel, []string{"main"}, "amd64")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.calls) != 1 || len(a.requests) != before {
		t.Errorf("warm Index made store calls %v, requests %v", st.calls, a.requests[before:])
	}
	if !slicesEqualPkgs(idx.Packages, idx2.Packages) {
		t.Error("warm index differs from cold index")
	}
	cl, err := Resolve(idx2, "amd64", []string{"app"})
	if err != nil || len(cl.Packages) != 2 {
		t.Fatalf("Resolve over fetched index: %v, %+v", err, cl)
	}
	if !strings.Contains(log.String(), "InRelease for trixie") {
		t.Errorf("log = %q", log.String())
	}

	// A decompressed copy changed in the cache (a writable, shared
	// directory) is not trusted: its sha256 is not the signed one, so the
	// index is decoded again from the verified .xz.
	if err := os.WriteFile(cached, []byte(strings.Replace(clientPackages, "Version: 1.0", "Version: 9.9", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	idx3, err := c.Index(ctx, rel, []string{"main"}, "amd64")
	if err != nil {
		t.Fatal(err)
	}
	if !slicesEqualPkgs(idx.Packages, idx3.Packages) || !strings.Contains(log.String(), "not the "+sha([]byte(clientPackages))+" the signed Release lists: rebuilding") {
		t.Errorf("a tampered cached index was used: %+v\n%s", idx3.Packages, log.String())
	}
	if data, _ := os.ReadFile(cached); string(data) != clientPackages {
		t.Error("the tampered cache entry was not replaced")
	}
}

func slicesEqualPkgs(a, b []Package) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestClientIndexPlainNameWithoutByHash(t *testing.T) {
	_, srv, _ := newFakeArchive(t, archiveOpts{byHash: false})
	c, st := newTestClient(t, srv)
	c.IndexDir = "" // no decompressed cache: decode in memory
	rel, err := c.Release(context.Background(), "stable")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Index(context.Background(), rel, []string{"main"}, "amd64"); err != nil {
		t.Fatal(err)
	}
	if want := srv.URL + "/debian/dists/trixie/main/binary-amd64/Packages.xz"; len(st.calls) != 1 || st.calls[0] != want {
		t.Errorf("store fetched %v, want %s", st.calls, want)
	}
}

func TestClientErrors(t *testing.T) {
	ctx := context.Background()
	_, _, other := testKeys(t)

	t.Run("signature by a key outside the keyring", func(t *testing.T) {
		_, srv, _ := newFakeArchive(t, archiveOpts{signer: other})
		c, _ := newTestClient(t, srv)
		_, err := c.Release(ctx, "trixie")
		var se *SignatureError
		if !errors.As(err, &se) {
			t.Fatalf("err = %v, want SignatureError", err)
		}
		want := "InRelease for trixie is signed by key " + strings.ToUpper(hex.EncodeToString(other.PrimaryKey.Fingerprint)) + ", which is not in keyring /test/archive.gpg"
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("InRelease for another suite", func(t *testing.T) {
		a, srv, _ := newFakeArchive(t, archiveOpts{})
		a.files["/debian/dists/forky/InRelease"] = a.files["/debian/dists/trixie/InRelease"]
		c, _ := newTestClient(t, srv)
		if _, err := c.Release(ctx, "forky"); err == nil || !strings.Contains(err.Error(), `not "forky"`) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("unknown suite", func(t *testing.T) {
		_, srv, _ := newFakeArchive(t, archiveOpts{})
		c, _ := newTestClient(t, srv)
		if _, err := c.Release(ctx, "nosuchsuite"); err == nil || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), "suite name") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("decompressed index does not match InRelease", func(t *testing.T) {
		_, srv, xzSHA := newFakeArchive(t, archiveOpts{byHash: true, plainSHA: strings.Repeat("0", 64)})
		c, _ := newTestClient(t, srv)
		rel, err := c.Release(ctx, "trixie")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Index(ctx, rel, []string{"main"}, "amd64"); err == nil || !strings.Contains(err.Error(), "sha256 mismatch after decompression") {
			t.Errorf("err = %v", err)
		}
		if _, err := os.Stat(filepath.Join(c.IndexDir, xzSHA+".Packages")); err == nil {
			t.Error("a mismatching index was cached")
		}
	})
	t.Run("component or architecture not in the suite", func(t *testing.T) {
		_, srv, _ := newFakeArchive(t, archiveOpts{})
		c, st := newTestClient(t, srv)
		rel, err := c.Release(ctx, "trixie")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Index(ctx, rel, []string{"main", "universe"}, "amd64"); err == nil || !strings.Contains(err.Error(), `component "universe" is not in trixie`) {
			t.Errorf("err = %v", err)
		}
		if _, err := c.Index(ctx, rel, []string{"main"}, "riscv64"); err == nil || !strings.Contains(err.Error(), `architecture "riscv64"`) {
			t.Errorf("err = %v", err)
		}
		if _, err := c.Index(ctx, rel, []string{"contrib"}, "amd64"); err == nil || !strings.Contains(err.Error(), "contrib/binary-amd64/Packages.xz") {
			t.Errorf("err = %v", err)
		}
		if len(st.calls) != 1 {
			t.Errorf("store calls %v: only main may have been fetched", st.calls)
		}
	})
	t.Run("no keyring", func(t *testing.T) {
		_, srv, _ := newFakeArchive(t, archiveOpts{})
		c, _ := newTestClient(t, srv)
		c.Keyring = nil
		if _, err := c.Release(ctx, "trixie"); err == nil || !strings.Contains(err.Error(), "--keyring") {
			t.Errorf("err = %v", err)
		}
	})
}
