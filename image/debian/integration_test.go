//go:build integration

package debian

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/recipes/keys"
)

// dirStore is a minimal Store: it downloads into dir and checks sha256 and size.
type dirStore struct {
	dir  string
	http *http.Client
}

func (s dirStore) Fetch(ctx context.Context, name, url, want string, size int64) (string, error) {
	dst := filepath.Join(s.dir, want)
	if _, err := os.Stat(dst); err == nil {
		return dst, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("fetching %s: %w", name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("fetching %s from %s: HTTP %s", name, url, resp.Status)
	}
	f, err := os.CreateTemp(s.dir, "dl-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), resp.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("fetching %s: %w", name, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want || n != size {
		return "", fmt.Errorf("fetching %s: got sha256 %s size %d, want %s size %d", name, got, n, want, size)
	}
	return dst, os.Rename(f.Name(), dst)
}

func TestIntegrationTrixieClosure(t *testing.T) {
	mirror, err := ResolveMirror("", os.Getenv, os.DirFS("/"))
	if err != nil {
		t.Fatal(err)
	}
	data, keysName, err := keys.Debian("trixie")
	if err != nil {
		t.Fatal(err)
	}
	keyring, err := ParseKeyring(data)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	hc := &http.Client{}
	c := &Client{
		Mirror:      mirror,
		HTTP:        hc,
		Keyring:     keyring,
		KeyringPath: keysName,
		Store:       dirStore{dir: t.TempDir(), http: hc},
		IndexDir:    t.TempDir(),
		Log:         tlogWriter{t},
	}
	rel, err := c.Release(ctx, "trixie")
	if err != nil {
		t.Fatal(err)
	}
	if rel.Codename != "trixie" || rel.SHA256 == "" || !rel.AcquireByHash {
		t.Errorf("Release = codename %q sha256 %q by-hash %v", rel.Codename, rel.SHA256, rel.AcquireByHash)
	}
	// The archive signs trixie with bookworm's automatic key first; the
	// repository's trust root holds only trixie's keys, so the signer is
	// trixie's automatic signing key (or its stable release key).
	if rel.SignedBy != "04B54C3CDCA79751B16BC6B5225629DF75B188BD" && rel.SignedBy != "41587F7DB8C774BCCF131416762F67A0B2C39DE4" {
		t.Errorf("trixie InRelease signed by %s, want a trixie archive key from %s", rel.SignedBy, keysName)
	}

	start := time.Now()
	idx, err := c.Index(ctx, rel, []string{"main"}, "amd64")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cold index: %d packages in %s", len(idx.Packages), time.Since(start))
	start = time.Now()
	idx, err = c.Index(ctx, rel, []string{"main"}, "amd64")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("warm index: %d packages in %s", len(idx.Packages), time.Since(start))

	roots := strings.Fields("systemd linux-image-cloud-amd64 containerd runc iptables ca-certificates e2fsprogs kmod")
	start = time.Now()
	cl, err := Resolve(idx, "amd64", roots)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("closure: %d packages, %.1f MiB to download, resolved in %s", len(cl.Packages), float64(cl.TotalSize())/(1<<20), time.Since(start))
	for _, ch := range cl.Choices {
		t.Logf("choice: %s", ch)
	}
	var kernel string
	have := map[string]bool{}
	for _, p := range cl.Packages {
		have[p.Name] = true
		if strings.HasPrefix(p.Name, "linux-image-") && strings.HasSuffix(p.Name, "-cloud-amd64") && p.Name != "linux-image-cloud-amd64" {
			kernel = p.Name
		}
	}
	if !have["libc6"] {
		t.Error("closure lacks libc6")
	}
	if kernel == "" {
		t.Errorf("closure lacks the kernel image package that linux-image-cloud-amd64 depends on")
	} else {
		t.Logf("kernel: %s (%s)", kernel, cl.Why[kernel])
	}
	t.Logf("libc6: %s", cl.Why["libc6"])
}

type tlogWriter struct{ t *testing.T }

func (w tlogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
