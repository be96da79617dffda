package debian

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"

	"github.com/ulikunitz/xz"

	"github.com/drover-os/drover/internal/atomicfile"
)

// Store fetches a file into a content-addressed cache, checking its sha256
// and size, and returns the local path. The cache package implements it.
type Store interface {
	Fetch(ctx context.Context, name, url, sha256 string, size int64) (path string, err error)
}

// Client talks to one Debian mirror. It is deliberately thin: everything it
// fetches is checked against the verified Release, and all parsing and
// resolution is done by the pure functions of this package.
type Client struct {
	Mirror      string // archive root, e.g. http://HOST/debian
	HTTP        *http.Client
	Keyring     openpgp.EntityList
	KeyringPath string // for messages
	Store       Store
	// IndexDir keeps decompressed Packages files named by the sha256 of the
	// .xz they came from, because xz decoding a full index in Go takes
	// seconds and the lock runs often. Empty disables that cache.
	IndexDir string
	Log      io.Writer // progress lines; nil for none
}

// maxInRelease bounds what Release reads: a real InRelease is well under
// 1 MiB, and an endless response must not exhaust memory.
const maxInRelease = 32 << 20

func (c *Client) logf(format string, args ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, format+"\n", args...)
	}
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

// Release fetches dists/<suite>/InRelease, always fresh, and verifies it
// against the keyring. Nothing else may be fetched before this succeeds:
// every other download is pinned by a hash the Release lists.
func (c *Client) Release(ctx context.Context, suite string) (*Release, error) {
	if len(c.Keyring) == 0 {
		return nil, fmt.Errorf("fetching InRelease for %s: no keyring loaded (pass --keyring)", suite)
	}
	url := strings.TrimRight(c.Mirror, "/") + "/dists/" + suite + "/InRelease"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("fetching InRelease for %s: %w", suite, err)
	}
	// A caching proxy between us and the mirror must not hand back an old
	// Release: the lock records what the archive says now.
	req.Header.Set("Cache-Control", "no-cache")
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching InRelease for %s from %s: %w (check the mirror: --mirror or %s)", suite, url, err, MirrorEnv)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		hint := "check the mirror (--mirror or " + MirrorEnv + ")"
		if resp.StatusCode == http.StatusNotFound {
			hint = "check the suite name in the recipe and that the mirror carries it"
		}
		return nil, fmt.Errorf("fetching InRelease for %s from %s: HTTP %s: %s", suite, url, resp.Status, hint)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxInRelease+1))
	if err != nil {
		return nil, fmt.Errorf("fetching InRelease for %s from %s: %w", suite, url, err)
	}
	if len(data) > maxInRelease {
		return nil, fmt.Errorf("fetching InRelease for %s from %s: larger than %d bytes: check the mirror", suite, url, maxInRelease)
	}

	rel, err := VerifyInRelease(data, c.Keyring, time.Now())
	if rel, err = c.forSuite(rel, err, suite, url); err != nil {
		return nil, err
	}
	c.logf("InRelease for %s: %s, signed by %s, sha256 %s", suite, rel.Date.Format(time.RFC1123), rel.SignedBy, rel.SHA256)
	return rel, nil
}

// PinnedRelease verifies data, an InRelease of suite that the caller kept
// by its sha256 (a lock pins it), against the keyring as Release does,
// but without judging its age (see VerifyPinnedInRelease); from names
// where data was read, for messages.
func (c *Client) PinnedRelease(data []byte, suite, from string) (*Release, error) {
	if len(c.Keyring) == 0 {
		return nil, fmt.Errorf("verifying InRelease for %s: no keyring loaded (pass --keyring)", suite)
	}
	rel, err := VerifyPinnedInRelease(data, c.Keyring, time.Now())
	return c.forSuite(rel, err, suite, from)
}

// forSuite completes a verification's result: a signature error names
// the suite and keyring, and a Release for another suite is refused, as
// apt refuses it: a mirror (or attacker) could otherwise answer "trixie"
// with a validly signed older suite.
func (c *Client) forSuite(rel *Release, err error, suite, from string) (*Release, error) {
	if err != nil {
		var se *SignatureError
		if errors.As(err, &se) {
			se.Suite, se.KeyringPath = suite, c.KeyringPath
		}
		return nil, err
	}
	if suite != rel.Suite && suite != rel.Codename {
		return nil, fmt.Errorf("InRelease from %s is for suite %q (codename %q), not %q: check the mirror", from, rel.Suite, rel.Codename, suite)
	}
	return rel, nil
}

// Index loads the Packages indexes of components for arch (which in Debian
// already list the arch:all packages) and merges them, in component order.
func (c *Client) Index(ctx context.Context, rel *Release, components []string, arch string) (*Index, error) {
	if len(rel.Architectures) > 0 && !slices.Contains(rel.Architectures, arch) {
		return nil, fmt.Errorf("architecture %q is not in %s (architectures: %s): check the recipe's architecture", arch, rel.Name(), strings.Join(rel.Architectures, " "))
	}
	var all []Package
	for _, comp := range components {
		// The security archive's Release names its components
		// "updates/main" while its indexes sit under main/, as apt asks
		// for them.
		if len(rel.Components) > 0 && !slices.Contains(rel.Components, comp) && !slices.Contains(rel.Components, "updates/"+comp) {
			return nil, fmt.Errorf("component %q is not in %s (components: %s): check the recipe's components", comp, rel.Name(), strings.Join(rel.Components, " "))
		}
		pkgs, err := c.componentIndex(ctx, rel, comp, arch)
		if err != nil {
			return nil, err
		}
		for i := range pkgs {
			pkgs[i].Suite = rel.Name()
		}
		all = append(all, pkgs...)
	}
	return NewIndex(rel.Name(), components, all), nil
}

func (c *Client) componentIndex(ctx context.Context, rel *Release, comp, arch string) ([]Package, error) {
	base := comp + "/binary-" + arch + "/Packages"
	xzFile, ok := rel.File(base + ".xz")
	if !ok {
		return nil, fmt.Errorf("loading %s index of %s: InRelease lists no %s.xz: check the component and architecture in the recipe", comp, rel.Name(), base)
	}
	plain, havePlain := rel.File(base)

	// The decompressed index is kept only when the signed Release lists its
	// sha256, and is re-hashed against it whenever it is read: the cache
	// directory is writable by whoever shares it, and the index decides
	// every hash the lock pins.
	var cached string
	if c.IndexDir != "" && havePlain {
		cached = filepath.Join(c.IndexDir, xzFile.SHA256+".Packages")
		if data, err := os.ReadFile(cached); err == nil {
			sum := sha256.Sum256(data)
			if got := hex.EncodeToString(sum[:]); got != plain.SHA256 {
				c.logf("index cache %s has sha256 %s, not the %s the signed Release lists: rebuilding", cached, got, plain.SHA256)
			} else if pkgs, err := ParseIndex(data); err == nil {
				return pkgs, nil
			} else {
				// A damaged cache entry is rebuilt rather than fatal.
				c.logf("index cache %s unreadable (%v): rebuilding", cached, err)
			}
		}
	}

	dist := strings.TrimRight(c.Mirror, "/") + "/dists/" + suitePath(rel)
	url := dist + "/" + base + ".xz"
	if rel.AcquireByHash {
		// The plain name may already point at a newer index than the
		// Release we verified; the by-hash name is immutable.
		url = dist + "/" + comp + "/binary-" + arch + "/by-hash/SHA256/" + xzFile.SHA256
	}
	c.logf("fetching %s %s.xz (%.1f MiB)", rel.Name(), base, float64(xzFile.Size)/(1<<20))
	name := rel.Name() + "_" + strings.ReplaceAll(base, "/", "_") + ".xz"
	path, err := c.Store.Fetch(ctx, name, url, xzFile.SHA256, xzFile.Size)
	if err != nil {
		return nil, fmt.Errorf("fetching %s index %s: %w", rel.Name(), base+".xz", err)
	}

	var want string
	var sizeHint int64
	if havePlain {
		want, sizeHint = plain.SHA256, plain.Size
	}
	data, err := decompressIndex(path, cached, want, sizeHint)
	if err != nil {
		return nil, fmt.Errorf("decompressing %s index %s.xz: %w", rel.Name(), base, err)
	}
	pkgs, err := ParseIndex(data)
	if err != nil {
		return nil, fmt.Errorf("parsing %s index %s: %w", rel.Name(), base, err)
	}
	return pkgs, nil
}

// suitePath is the directory under dists/: the codename, which every mirror
// carries, falling back to the suite.
func suitePath(rel *Release) string {
	if rel.Codename != "" {
		return rel.Codename
	}
	return rel.Suite
}

// decompressIndex decodes the .xz at src, checks the result against the
// uncompressed sha256 the Release lists (when it does), and, if dst is set,
// stores it there atomically so a crash never leaves a truncated index that
// would later be trusted.
func decompressIndex(src, dst, wantSHA256 string, sizeHint int64) ([]byte, error) {
	f, err := os.Open(src)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := xz.NewReader(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return nil, err
	}
	buf := bytes.NewBuffer(make([]byte, 0, max(sizeHint, 0)+bytes.MinRead))
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(buf, h), zr); err != nil {
		return nil, err
	}
	if got := hex.EncodeToString(h.Sum(nil)); wantSHA256 != "" && got != wantSHA256 {
		return nil, fmt.Errorf("sha256 mismatch after decompression: want %s (from InRelease), got %s: the mirror is inconsistent, retry or use another mirror", wantSHA256, got)
	}
	data := buf.Bytes()
	if dst == "" {
		return data, nil
	}
	if err := atomicfile.Write(dst, data, 0o644); err != nil {
		return nil, fmt.Errorf("caching decompressed index: %w", err)
	}
	return data, nil
}
