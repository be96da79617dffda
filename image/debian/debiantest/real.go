package debiantest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/drover-os/drover/image/cache"
	"github.com/drover-os/drover/image/debian"
	"github.com/drover-os/drover/image/fetch"
	"github.com/drover-os/drover/recipes/keys"
)

// Real is the configured mirror's trixie main/amd64 with a verified
// download cache, for integration tests that need real packages (a kernel,
// dash, kmod). The cache lives in os.TempDir()/drover-test-cache and is
// shared between test binaries and runs: every file is re-checked against
// its sha256 before it is reused.
type Real struct {
	Client *debian.Client
	Index  *debian.Index
	Mirror string
	f      *fetch.Fetcher
}

var (
	realOnce sync.Once
	real     *Real
	realErr  error
)

// Trixie opens the archive once per test binary (the mirror comes from
// DROVER_MIRROR or the host's apt sources, the keys are the repository's trust root).
func Trixie(t interface {
	Helper()
	Fatal(...any)
}) *Real {
	t.Helper()
	realOnce.Do(func() { real, realErr = openTrixie() })
	if realErr != nil {
		t.Fatal(realErr)
	}
	return real
}

type store struct{ f *fetch.Fetcher }

func (s store) Fetch(ctx context.Context, name, url, sha string, size int64) (string, error) {
	return s.f.FetchOne(ctx, name, url, sha, size)
}

func openTrixie() (*Real, error) {
	mirror, err := debian.ResolveMirror("", os.Getenv, os.DirFS("/"))
	if err != nil {
		return nil, err
	}
	data, keysName, err := keys.Debian("trixie")
	if err != nil {
		return nil, err
	}
	keyring, err := debian.ParseKeyring(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keysName, err)
	}
	c, err := cache.Open(filepath.Join(os.TempDir(), "drover-test-cache"))
	if err != nil {
		return nil, err
	}
	f := &fetch.Fetcher{Cache: c}
	client := &debian.Client{Mirror: mirror, Keyring: keyring, KeyringPath: keysName,
		Store: store{f}, IndexDir: filepath.Join(c.Dir(), "index")}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rel, err := client.Release(ctx, "trixie")
	if err != nil {
		return nil, err
	}
	idx, err := client.Index(ctx, rel, []string{"main"}, "amd64")
	if err != nil {
		return nil, err
	}
	return &Real{Client: client, Index: idx, Mirror: mirror, f: f}, nil
}

// Deb returns a package's newest version in the index and its .deb,
// downloaded through the verified cache.
func (r *Real) Deb(ctx context.Context, name string) (debian.Package, []byte, error) {
	pkgs := r.Index.Lookup(name)
	if len(pkgs) == 0 {
		return debian.Package{}, nil, fmt.Errorf("%s is not in trixie main", name)
	}
	p := pkgs[0]
	path, err := r.f.FetchOne(ctx, p.Name+"_"+p.Version+".deb", p.URL(r.Mirror), p.SHA256, p.Size)
	if err != nil {
		return p, nil, err
	}
	data, err := os.ReadFile(path)
	return p, data, err
}
