//go:build integration

package kmod

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-os/drover/image/debian"
	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// shaStore is the smallest debian.Store: it downloads into a directory named
// by sha256 and checks the hash and size. The directory is shared between
// runs (os.TempDir) because the kernel package is tens of MiB; a file is
// reused only after its hash is checked again.
type shaStore struct {
	dir  string
	http *http.Client
}

func (s shaStore) Fetch(ctx context.Context, name, url, want string, size int64) (string, error) {
	dst := filepath.Join(s.dir, want)
	if data, err := os.ReadFile(dst); err == nil {
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) == want {
			return dst, nil
		}
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
	if got := hex.EncodeToString(h.Sum(nil)); got != want || (size > 0 && n != size) {
		return "", fmt.Errorf("fetching %s: got sha256 %s size %d, want %s size %d", name, got, n, want, size)
	}
	return dst, os.Rename(f.Name(), dst)
}

// trixieArchive is a client for trixie main/amd64, set up once per test
// binary.
type trixieArchive struct {
	client *debian.Client
	index  *debian.Index
	mirror string
}

var (
	archiveOnce sync.Once
	archive     *trixieArchive
	archiveErr  error
)

func trixie(t *testing.T) *trixieArchive {
	t.Helper()
	archiveOnce.Do(func() { archive, archiveErr = openTrixie() })
	if archiveErr != nil {
		t.Fatal(archiveErr)
	}
	return archive
}

func openTrixie() (*trixieArchive, error) {
	mirror, err := debian.ResolveMirror("", os.Getenv, os.DirFS("/"))
	if err != nil {
		return nil, err
	}
	keyring, err := debian.LoadKeyring(debian.DefaultKeyring)
	if err != nil {
		return nil, fmt.Errorf("%w (apt-get install debian-archive-keyring)", err)
	}
	dir := filepath.Join(os.TempDir(), "drover-kmod-test")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	hc := &http.Client{}
	c := &debian.Client{
		Mirror:      mirror,
		HTTP:        hc,
		Keyring:     keyring,
		KeyringPath: debian.DefaultKeyring,
		Store:       shaStore{dir: dir, http: hc},
		IndexDir:    dir,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rel, err := c.Release(ctx, "trixie")
	if err != nil {
		return nil, err
	}
	idx, err := c.Index(ctx, rel, []string{"main"}, "amd64")
	if err != nil {
		return nil, err
	}
	return &trixieArchive{client: c, index: idx, mirror: mirror}, nil
}

// deb downloads a package (sha256-checked by the store) and returns it.
func (a *trixieArchive) deb(name string) (debian.Package, []byte, error) {
	pkgs := a.index.Lookup(name)
	if len(pkgs) == 0 {
		return debian.Package{}, nil, fmt.Errorf("%s is not in trixie main", name)
	}
	p := pkgs[0]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	path, err := a.client.Store.Fetch(ctx, p.Name, p.URL(a.mirror), p.SHA256, p.Size)
	if err != nil {
		return p, nil, err
	}
	data, err := os.ReadFile(path)
	return p, data, err
}

// kernelTree is the module tree of one kernel package, in memory.
type kernelTree struct {
	pkg     string            // e.g. linux-image-6.12.48+deb13-cloud-amd64
	version string            // Debian version of pkg
	kver    string            // directory name under /usr/lib/modules
	files   map[string][]byte // relative to /usr/lib/modules/<kver>
}

var (
	kernelOnce sync.Once
	kernel     *kernelTree
	kernelErr  error
)

// trixieCloudKernel downloads trixie's cloud kernel once per test binary.
func trixieCloudKernel(t *testing.T) *kernelTree {
	t.Helper()
	a := trixie(t)
	kernelOnce.Do(func() { kernel, kernelErr = fetchCloudKernel(t, a) })
	if kernelErr != nil {
		t.Fatal(kernelErr)
	}
	return kernel
}

func fetchCloudKernel(t *testing.T, a *trixieArchive) (*kernelTree, error) {
	meta := a.index.Lookup("linux-image-cloud-amd64")
	if len(meta) == 0 {
		return nil, errors.New("trixie main has no linux-image-cloud-amd64")
	}
	var pkgName string
	for _, dep := range strings.Split(meta[0].Depends, ",") {
		name := strings.Fields(strings.TrimSpace(dep))[0]
		if strings.HasPrefix(name, "linux-image-") && strings.HasSuffix(name, "-cloud-amd64") {
			pkgName = name
		}
	}
	if pkgName == "" {
		return nil, fmt.Errorf("linux-image-cloud-amd64 depends on %q: no versioned image package", meta[0].Depends)
	}
	p, deb, err := a.deb(pkgName)
	if err != nil {
		return nil, err
	}
	t.Logf("kernel package %s %s (%.1f MiB)", p.Name, p.Version, float64(len(deb))/(1<<20))
	tr, err := debData(deb)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", p.Name, err)
	}
	kt, err := modulesFromTar(tr)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", p.Name, err)
	}
	kt.pkg, kt.version = p.Name, p.Version
	return kt, nil
}

// debData reads the ar archive by hand (a .deb is "!<arch>\n" and 60-byte
// member headers) and opens its data.tar.
func debData(deb []byte) (*tar.Reader, error) {
	const magic = "!<arch>\n"
	if !bytes.HasPrefix(deb, []byte(magic)) {
		return nil, errors.New("not an ar archive")
	}
	off := len(magic)
	for off+60 <= len(deb) {
		hdr := deb[off : off+60]
		name := strings.TrimRight(strings.TrimSpace(string(hdr[:16])), "/")
		size, err := strconv.Atoi(strings.TrimSpace(string(hdr[48:58])))
		if err != nil {
			return nil, fmt.Errorf("member %q: bad size: %w", name, err)
		}
		off += 60
		if off+size > len(deb) {
			return nil, fmt.Errorf("member %q truncated", name)
		}
		body := bytes.NewReader(deb[off : off+size])
		off += size + size%2
		switch name {
		case "data.tar.xz":
			zr, err := xz.NewReader(body)
			if err != nil {
				return nil, err
			}
			return tar.NewReader(zr), nil
		case "data.tar.zst":
			zr, err := zstd.NewReader(body)
			if err != nil {
				return nil, err
			}
			return tar.NewReader(zr), nil
		}
	}
	return nil, errors.New("no data.tar.xz or data.tar.zst member")
}

func modulesFromTar(tr *tar.Reader) (*kernelTree, error) {
	kt := &kernelTree{files: map[string][]byte{}}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		name := strings.TrimPrefix(h.Name, "./")
		rest, ok := strings.CutPrefix(name, "usr/lib/modules/")
		if !ok || h.Typeflag != tar.TypeReg {
			continue
		}
		kver, rel, ok := strings.Cut(rest, "/")
		if !ok {
			continue
		}
		if kt.kver != "" && kt.kver != kver {
			return nil, fmt.Errorf("two kernel versions in one package: %s and %s", kt.kver, kver)
		}
		kt.kver = kver
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		kt.files[rel] = data
	}
	if kt.kver == "" {
		return nil, errors.New("no usr/lib/modules/<kver> in data.tar")
	}
	return kt, nil
}

// trixieKmod unpacks trixie's kmod and the libraries it needs into a
// directory and returns a runner for its tools (depmod, modprobe, modinfo):
// the binary is started through trixie's own dynamic loader, so it runs on
// an older host without touching the host's libraries.
func trixieKmod(t *testing.T) func(tool string, args ...string) *exec.Cmd {
	t.Helper()
	a := trixie(t)
	cl, err := debian.Resolve(a.index, "amd64", []string{"kmod"})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	var versions []string
	for _, p := range cl.Packages {
		_, deb, err := a.deb(p.Name)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := debData(deb)
		if err != nil {
			t.Fatalf("reading %s: %v", p.Name, err)
		}
		if err := extractTo(tr, root); err != nil {
			t.Fatalf("unpacking %s: %v", p.Name, err)
		}
		if p.Name == "kmod" {
			versions = append(versions, p.Name+" "+p.Version)
		}
	}
	t.Logf("trixie tools: %s (closure of %d packages)", strings.Join(versions, ", "), len(cl.Packages))
	libdir := filepath.Join(root, "usr/lib/x86_64-linux-gnu")
	loader := filepath.Join(libdir, "ld-linux-x86-64.so.2")
	kmod := filepath.Join(root, "usr/bin/kmod")
	return func(tool string, args ...string) *exec.Cmd {
		return exec.Command(loader, append([]string{"--library-path", libdir, "--argv0", tool, kmod}, args...)...)
	}
}

// extractTo unpacks regular files, directories and symlinks under dir.
func extractTo(tr *tar.Reader, dir string) error {
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(strings.TrimPrefix(h.Name, "./"))
		if name == "." || strings.HasPrefix(name, "..") || filepath.IsAbs(name) {
			continue
		}
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			var data []byte
			if data, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(p, data, os.FileMode(h.Mode)&0o777)
			}
		case tar.TypeSymlink:
			os.Remove(p)
			err = os.Symlink(h.Linkname, p)
		}
		if err != nil {
			return err
		}
	}
}

// writeTree lays files out as <root>/lib/modules/<kver>/, which is where
// modprobe -d and depmod -b look.
func writeTree(t *testing.T, root, kver string, files map[string][]byte) string {
	t.Helper()
	dir := filepath.Join(root, "lib", "modules", kver)
	for rel, data := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
