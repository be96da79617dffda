//go:build integration

package kmod

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-os/drover/image/debian"
	"github.com/drover-os/drover/image/debian/debiantest"
	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// trixieArchive is the configured mirror's trixie main/amd64 with the
// project's verified download cache (shared with other packages' tests).
type trixieArchive struct{ *debiantest.Real }

func trixie(t *testing.T) trixieArchive { return trixieArchive{debiantest.Trixie(t)} }

func (a trixieArchive) deb(name string) (debian.Package, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	return a.Deb(ctx, name)
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

func fetchCloudKernel(t *testing.T, a trixieArchive) (*kernelTree, error) {
	meta := a.Index.Lookup("linux-image-cloud-amd64")
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
	cl, err := debian.Resolve(a.Index, "amd64", []string{"kmod"})
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
