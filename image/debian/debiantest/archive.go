// Package debiantest serves a small, signed, fake Debian archive over HTTP
// for tests of everything that consumes the Debian client: a test keyring,
// a clearsigned InRelease, a Packages.xz index and the .deb files.
package debiantest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/clearsign"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"github.com/ulikunitz/xz"
)

// Package is one package in the fake archive.
type Package struct {
	Name, Version, Arch string
	Depends, Provides   string
	Data                []byte // the .deb bytes (any content will do for resolution tests)
}

// Archive is a running fake archive. Like Debian's, it serves a release
// (Suite) with its -updates suite from the archive root (URL) and its
// -security suite from a security archive root of its own (SecurityURL),
// each with a signed InRelease; the updates suites start empty (SetSuite
// fills them). One test key signs them all.
type Archive struct {
	URL         string // archive root to pass as the mirror
	SecurityURL string // security archive root to pass as the security mirror
	KeyringPath string // binary keyring file that verifies the InRelease
	Suite       string
	Date        time.Time
	ValidUntil  time.Time // none when zero

	mu       sync.Mutex
	files    map[string][]byte
	requests []string
	entity   *openpgp.Entity
	pkgs     []Package
	updates  map[string][]Package // suite -> packages, for Suite's -updates and -security
}

// New builds and serves an archive for suite with the given packages (and
// its empty suite-updates and suite-security).
func New(t testing.TB, suite string, pkgs []Package) *Archive {
	t.Helper()
	cfg := &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA}
	e, err := openpgp.NewEntity("drover test archive", "", "test@drover.invalid", cfg)
	if err != nil {
		t.Fatal(err)
	}
	a := &Archive{Suite: suite, Date: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC), entity: e, pkgs: pkgs,
		updates: map[string][]Package{suite + "-updates": nil, suite + "-security": nil}}
	var kr bytes.Buffer
	if err := e.Serialize(&kr); err != nil {
		t.Fatal(err)
	}
	a.KeyringPath = filepath.Join(t.TempDir(), "test-keyring.gpg")
	if err := os.WriteFile(a.KeyringPath, kr.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	a.rebuild(t)
	srv := httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(srv.Close)
	a.URL = srv.URL + "/debian"
	a.SecurityURL = srv.URL + "/debian-security"
	return a
}

// SetSuite replaces the packages of suite (Suite's -updates or -security)
// and re-signs the archive a day later: an update is published.
func (a *Archive) SetSuite(t testing.TB, suite string, pkgs []Package) {
	a.mu.Lock()
	if _, ok := a.updates[suite]; !ok {
		a.mu.Unlock()
		t.Fatalf("debiantest: the archive has no suite %s", suite)
	}
	a.updates[suite] = pkgs
	a.Date = a.Date.Add(24 * time.Hour)
	a.mu.Unlock()
	a.rebuild(t)
}

// SetPackages replaces the archive content and re-signs it (an archive update).
func (a *Archive) SetPackages(t testing.TB, pkgs []Package) {
	a.mu.Lock()
	a.pkgs = pkgs
	a.Date = a.Date.Add(24 * time.Hour)
	a.mu.Unlock()
	a.rebuild(t)
}

// SetDates re-signs the archive with another Date and Valid-Until (zero:
// none), e.g. a Release from the future or an expired one.
func (a *Archive) SetDates(t testing.TB, date, validUntil time.Time) {
	a.mu.Lock()
	a.Date, a.ValidUntil = date, validUntil
	a.mu.Unlock()
	a.rebuild(t)
}

// Fingerprint is the fingerprint (hex, upper case) of the archive's signing
// key, a key generated for the test and therefore in no trust root.
func (a *Archive) Fingerprint() string {
	return strings.ToUpper(hex.EncodeToString(a.entity.PrimaryKey.Fingerprint))
}

// Put serves extra content at a path below the server root (e.g. for URL components).
func (a *Archive) Put(path string, data []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.files[path] = data
}

// Set replaces the bytes served at path under the archive root, e.g. to
// break the InRelease signature.
func (a *Archive) Set(path string, data []byte) { a.Put("/debian/"+path, data) }

// Get returns what is served at path under the archive root.
func (a *Archive) Get(path string) []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.files["/debian/"+path]
}

// Requests lists the paths requested so far.
func (a *Archive) Requests() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.requests...)
}

func (a *Archive) serve(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.requests = append(a.requests, r.URL.Path)
	data, ok := a.files[r.URL.Path]
	a.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
}

func hexsum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func (a *Archive) rebuild(t testing.TB) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	files := map[string][]byte{}
	for p, d := range a.files {
		if !strings.HasPrefix(p, "/debian/") && !strings.HasPrefix(p, "/debian-security/") {
			files[p] = d // extra content survives an archive update
		}
	}
	a.publish(t, files, "/debian/", a.Suite, "pool/main", a.pkgs)
	for suite, pkgs := range a.updates {
		root, pool := "/debian/", "pool/main"
		if strings.HasSuffix(suite, "-security") {
			// The security archive's pool, as Debian lays it out.
			root, pool = "/debian-security/", "pool/updates/main"
		}
		a.publish(t, files, root, suite, pool, pkgs)
	}
	a.files = files
}

// publish adds suite's .debs, index and InRelease below root to files.
func (a *Archive) publish(t testing.TB, files map[string][]byte, root, suite, pool string, pkgs []Package) {
	t.Helper()
	pkgs = append([]Package(nil), pkgs...)
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].Name < pkgs[j].Name })
	var idx bytes.Buffer
	for _, p := range pkgs {
		arch := p.Arch
		if arch == "" {
			arch = "amd64"
		}
		data := p.Data
		if data == nil {
			data = []byte("deb " + p.Name + " " + p.Version)
		}
		path := fmt.Sprintf("%s/%c/%s/%s_%s_%s.deb", pool, p.Name[0], p.Name, p.Name, strings.ReplaceAll(p.Version, ":", "%3a"), arch)
		files[root+path] = data
		fmt.Fprintf(&idx, "Package: %s\nVersion: %s\nArchitecture: %s\nPriority: optional\n", p.Name, p.Version, arch)
		if p.Depends != "" {
			fmt.Fprintf(&idx, "Depends: %s\n", p.Depends)
		}
		if p.Provides != "" {
			fmt.Fprintf(&idx, "Provides: %s\n", p.Provides)
		}
		fmt.Fprintf(&idx, "Filename: %s\nSize: %d\nSHA256: %s\n\n", path, len(data), hexsum(data))
	}
	var xzb bytes.Buffer
	zw, err := xz.NewWriter(&xzb)
	if err != nil {
		t.Fatal(err)
	}
	zw.Write(idx.Bytes())
	zw.Close()
	comp := "main/binary-amd64/Packages.xz"
	files[root+"dists/"+suite+"/"+comp] = xzb.Bytes()
	var validUntil string
	if !a.ValidUntil.IsZero() {
		validUntil = "Valid-Until: " + a.ValidUntil.Format(time.RFC1123Z) + "\n"
	}
	components := "main"
	if strings.HasSuffix(suite, "-security") {
		components = "updates/main" // what the security archive's Release says
	}
	release := fmt.Sprintf("Origin: Debian\nLabel: Debian\nSuite: %s\nCodename: %s\nDate: %s\n%sArchitectures: amd64\nComponents: %s\nSHA256:\n %s %d %s\n",
		suite, suite, a.Date.Format(time.RFC1123Z), validUntil, components, hexsum(xzb.Bytes()), xzb.Len(), comp)
	var signed bytes.Buffer
	w, err := clearsign.Encode(&signed, a.entity.PrivateKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte(release))
	w.Close()
	files[root+"dists/"+suite+"/InRelease"] = signed.Bytes()
}
