package debian

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
)

// localStore answers every Fetch with one local file and records the
// requests.
type localStore struct {
	path  string
	calls []string // "name url sha256 size"
}

func (s *localStore) Fetch(_ context.Context, name, url, sha string, size int64) (string, error) {
	s.calls = append(s.calls, fmt.Sprintf("%s %s %s %d", name, url, sha, size))
	return s.path, nil
}

// indexRelease is a verified Release as Index receives it, listing
// main/binary-amd64/Packages.xz (and, with plain, the uncompressed hash).
func indexRelease(t *testing.T, plain bool) (*Release, *localStore) {
	t.Helper()
	xzData := xzBytes(t, []byte(clientPackages))
	path := filepath.Join(t.TempDir(), "Packages.xz")
	if err := os.WriteFile(path, xzData, 0o644); err != nil {
		t.Fatal(err)
	}
	rel := &Release{Suite: "stable-security", Files: []ReleaseFile{
		{Path: "main/binary-amd64/Packages.xz", Size: 3 << 20, SHA256: sha(xzData)},
	}}
	if plain {
		rel.Files = append(rel.Files, ReleaseFile{Path: "main/binary-amd64/Packages", Size: int64(len(clientPackages)), SHA256: sha([]byte(clientPackages))})
	}
	return rel, &localStore{path: path}
}

// TestIndexWithoutPlainHash: a Release that lists only the .xz is
// decoded (nothing to check the result against, so nothing is cached),
// fetched under the suite's name when it has no codename, from the plain
// name when the archive does not serve by-hash.
func TestIndexWithoutPlainHash(t *testing.T) {
	rel, st := indexRelease(t, false)
	var log bytes.Buffer
	c := &Client{Mirror: "http://m.example.invalid/debian/", Store: st, IndexDir: t.TempDir(), Log: &log}
	idx, err := c.Index(context.Background(), rel, []string{"main"}, "amd64")
	if err != nil {
		t.Fatal(err)
	}
	if len(idx.Packages) != 2 || idx.Suite != "stable-security" || idx.Packages[1].Suite != "stable-security" {
		t.Errorf("index %s: %+v", idx.Suite, idx.Packages)
	}
	xz := rel.Files[0]
	want := "stable-security_main_binary-amd64_Packages.xz http://m.example.invalid/debian/dists/stable-security/main/binary-amd64/Packages.xz " + xz.SHA256 + " 3145728"
	if len(st.calls) != 1 || st.calls[0] != want {
		t.Errorf("store calls %q, want %q", st.calls, want)
	}
	if got := log.String(); got != "fetching stable-security main/binary-amd64/Packages.xz (3.0 MiB)\n" {
		t.Errorf("log %q", got)
	}
	if left, _ := os.ReadDir(c.IndexDir); len(left) != 0 {
		t.Errorf("an index no signed hash covers was cached: %v", left)
	}
}

// TestIndexCacheNamedByXZHash: with the uncompressed hash listed, the
// decoded index is kept under the .xz's hash and read back from there.
func TestIndexCacheNamedByXZHash(t *testing.T) {
	rel, st := indexRelease(t, true)
	rel.Codename, rel.AcquireByHash = "trixie-security", true
	c := &Client{Mirror: "http://m.example.invalid/debian-security", Store: st, IndexDir: t.TempDir()}
	for range 2 {
		if _, err := c.Index(context.Background(), rel, []string{"main"}, "amd64"); err != nil {
			t.Fatal(err)
		}
	}
	xz := rel.Files[0]
	want := "trixie-security_main_binary-amd64_Packages.xz http://m.example.invalid/debian-security/dists/trixie-security/main/binary-amd64/by-hash/SHA256/" + xz.SHA256 + " " + xz.SHA256 + " 3145728"
	if len(st.calls) != 1 || st.calls[0] != want {
		t.Errorf("store calls %q, want one: %q", st.calls, want)
	}
	if data, err := os.ReadFile(filepath.Join(c.IndexDir, xz.SHA256+".Packages")); err != nil || string(data) != clientPackages {
		t.Errorf("cached index: %v", err)
	}
}

// TestIndexCacheDamaged: a cache entry with the right hash that does not
// parse (the signed index itself is broken) is not fatal on its own: the
// .xz is fetched and decoded again, and its parse error is reported.
func TestIndexCacheDamaged(t *testing.T) {
	rel, st := indexRelease(t, true)
	bad := "Package: a\n\n"
	rel.Files[1].SHA256 = sha([]byte(bad))
	var log bytes.Buffer
	c := &Client{Mirror: "http://m.example.invalid/debian", Store: st, IndexDir: t.TempDir(), Log: &log}
	cached := filepath.Join(c.IndexDir, rel.Files[0].SHA256+".Packages")
	if err := os.WriteFile(cached, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := c.Index(context.Background(), rel, []string{"main"}, "amd64")
	if len(st.calls) != 1 || !strings.Contains(log.String(), "index cache "+cached+" unreadable (package a (line 1) has no Version field): rebuilding") {
		t.Errorf("store calls %q, log %q", st.calls, log.String())
	}
	if err == nil || !strings.Contains(err.Error(), "decompressing stable-security index main/binary-amd64/Packages.xz: sha256 mismatch after decompression") {
		t.Errorf("err = %v", err)
	}
}

// TestIndexSuiteLists: a Release that lists no architectures or components
// restricts neither; the security archive's "updates/main" is main.
func TestIndexSuiteLists(t *testing.T) {
	for _, tc := range []struct {
		name          string
		arches, comps []string
		want          string
	}{
		{"no lists", nil, nil, ""},
		{"security components", []string{"amd64"}, []string{"updates/main", "updates/contrib"}, ""},
		{"architecture missing", []string{"arm64", "all"}, nil, `architecture "amd64" is not in stable-security (architectures: arm64 all): check the recipe's architecture`},
		{"component missing", nil, []string{"contrib"}, `component "main" is not in stable-security (components: contrib): check the recipe's components`},
	} {
		rel, st := indexRelease(t, true)
		rel.Architectures, rel.Components = tc.arches, tc.comps
		c := &Client{Mirror: "http://m.example.invalid/debian", Store: st}
		_, err := c.Index(context.Background(), rel, []string{"main"}, "amd64")
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || err.Error() != tc.want) {
			t.Errorf("%s: Index = %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestReleaseHTTPErrors: a failing mirror is named with what to check.
func TestReleaseHTTPErrors(t *testing.T) {
	ed, _, _ := testKeys(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/debian/dists/broken/InRelease":
			http.Error(w, "oops", http.StatusInternalServerError)
		case "/debian/dists/html/InRelease":
			w.Write([]byte("<html>captive portal</html>"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c := &Client{Mirror: srv.URL + "/debian", HTTP: srv.Client(), Keyring: openpgp.EntityList{ed}}
	for suite, want := range map[string]string{
		"broken": "fetching InRelease for broken from " + srv.URL + "/debian/dists/broken/InRelease: HTTP 500 Internal Server Error: check the mirror (--mirror or DROVER_MIRROR)",
		"html":   "reading InRelease: no clearsigned message found (is the mirror serving an error page?)",
	} {
		if _, err := c.Release(context.Background(), suite); err == nil || err.Error() != want {
			t.Errorf("Release(%s) = %v, want %q", suite, err, want)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// filler reads as an endless run of one byte, without holding it.
type filler byte

func (b filler) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

// TestReleaseSizeLimitAndTransport: Release goes through the Client's own
// HTTP client, and refuses an InRelease over maxInRelease bytes before
// parsing it, while one of exactly that size is read whole.
func TestReleaseSizeLimitAndTransport(t *testing.T) {
	ed, _, _ := testKeys(t)
	var asked []string
	sizes := map[string]int64{"limit": maxInRelease, "over": maxInRelease + 1}
	c := &Client{Mirror: "http://m.example.invalid/debian", Keyring: openpgp.EntityList{ed},
		HTTP: &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			asked = append(asked, r.URL.String())
			suite := strings.Split(r.URL.Path, "/")[3]
			return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Request: r,
				Body: io.NopCloser(io.LimitReader(filler('x'), sizes[suite]))}, nil
		})}}
	for suite, want := range map[string]string{
		"over":  "fetching InRelease for over from http://m.example.invalid/debian/dists/over/InRelease: larger than 33554432 bytes: check the mirror",
		"limit": "reading InRelease: no clearsigned message found (is the mirror serving an error page?)",
	} {
		if _, err := c.Release(context.Background(), suite); err == nil || err.Error() != want {
			t.Errorf("Release(%s) = %v, want %q", suite, err, want)
		}
	}
	if len(asked) != 2 {
		t.Errorf("the Client's transport was asked %q, want both InRelease files", asked)
	}
}
