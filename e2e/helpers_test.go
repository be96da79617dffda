//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/fat32"
	"github.com/erofs/go-erofs"

	"github.com/drover-os/drover/harness/qemu"
	"github.com/drover-os/drover/image/build"
	"github.com/drover-os/drover/image/esp"
	"github.com/drover-os/drover/image/uki"
	"github.com/drover-os/drover/internal/erofsutils"
)

// repo is the repository root; bin holds drover, drover-agent, drover-init
// built by `make build`.
var repo, _ = filepath.Abs("..")

func bin(name string) string { return filepath.Join(repo, "bin", name) }

// run runs a command, failing the test with its output on error.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	return runEnv(t, nil, name, args...)
}

// runEnv is run with env added to the test's environment.
func runEnv(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out.String())
	}
	t.Logf("%s%s %s (%s)", strings.Join(append(env, ""), " "), filepath.Base(name), strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	return out.String()
}

func fileSHA(t *testing.T, p string) string {
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	io.Copy(h, f)
	return hex.EncodeToString(h.Sum(nil))
}

func readManifest(t *testing.T, p string) *build.Manifest {
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m build.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return &m
}

// extract copies n bytes at off of src into a new file.
func extract(t *testing.T, src string, off, n int64, dst string) {
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := io.Copy(out, io.NewSectionReader(in, off, n)); err != nil {
		t.Fatal(err)
	}
}

// boot starts the image in stateDir and waits for one of the patterns.
func boot(t *testing.T, image, stateDir string, nvme bool, timeout time.Duration, patterns ...string) (*qemu.VM, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	vm, err := qemu.Start(ctx, &qemu.Config{Image: image, StateDir: stateDir, NVMe: nvme, DiskSize: 2 << 30})
	if err != nil {
		t.Fatal(err)
	}
	got, err := vm.WaitFor(ctx, patterns...)
	if err != nil {
		vm.Stop()
		t.Fatalf("%v\n--- serial console (last 60 lines) ---\n%s", err, tail(vm.Log(), 60))
	}
	return vm, got
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// partition returns the manifest's entry for the named partition.
func partition(t *testing.T, mf *build.Manifest, name string) build.Partition {
	t.Helper()
	for _, p := range mf.Partitions {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("the manifest has no %s partition", name)
	return build.Partition{}
}

// espFile reads one file from the image's ESP.
func espFile(t *testing.T, raw string, mf *build.Manifest, name string) []byte {
	t.Helper()
	f, err := os.Open(raw)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := partition(t, mf, "esp")
	efs, err := fat32.Read(file.New(f, true), p.Size, p.Offset, 512)
	if err != nil {
		t.Fatalf("reading the ESP of %s: %v", raw, err)
	}
	ef, err := efs.OpenFile("/"+name, os.O_RDONLY)
	if err != nil {
		t.Fatalf("opening %s on the ESP: %v", name, err)
	}
	b, err := io.ReadAll(ef)
	if err != nil {
		t.Fatalf("reading %s on the ESP: %v", name, err)
	}
	return b
}

// ukiSection returns the content of the named section (".linux",
// ".initrd", ".cmdline", …) of a Unified Kernel Image.
func ukiSection(t *testing.T, image []byte, name string) []byte {
	t.Helper()
	secs, err := uki.Sections(image)
	if err != nil {
		t.Fatalf("reading the UKI's sections: %v", err)
	}
	for _, s := range secs {
		if s.Name == name {
			return uki.SectionData(image, s)
		}
	}
	t.Fatalf("the UKI has no %s section", name)
	return nil
}

// rootFS opens the image's erofs root partition.
func rootFS(t *testing.T, raw string, mf *build.Manifest) fs.FS {
	t.Helper()
	f, err := os.Open(raw)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	p := partition(t, mf, "root")
	root, err := erofs.Open(io.NewSectionReader(f, p.Offset, p.Size))
	if err != nil {
		t.Fatalf("opening the erofs root of %s: %v", raw, err)
	}
	return root
}

func readAt(t *testing.T, p string, off int64, n int) []byte {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatalf("reading %d bytes at %d of %s: %v", n, off, p, err)
	}
	return b
}

func flipByte(t *testing.T, p string, off int64) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := []byte{0}
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// rootDir makes the erofs image img, whose files are compressed with
// compression (the manifest's rootfs.compression), readable as a
// directory: extracted by fsck.erofs --extract, which checks the image and
// decompresses every file (plain fsck.erofs checks the metadata only), with
// an fsck.erofs that knows the algorithm (internal/erofsutils: bookworm's
// reads LZ4 only, trixie's, from scripts/host-setup.sh, zstd too).
// go-erofs's reader, rootFS, reads uncompressed images only.
func rootDir(t *testing.T, img, compression string) string {
	t.Helper()
	fsck, err := erofsutils.Tool("fsck.erofs", compression)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "root")
	run(t, fsck, "--extract="+dir, img)
	return dir
}

// checkContent compares every regular file under dir with the manifest's
// sha256 of it.
func checkContent(t *testing.T, dir string, mf *build.Manifest) {
	t.Helper()
	n := 0
	for _, f := range mf.Files {
		if f.Kind != "file" {
			continue
		}
		if got := fileSHA(t, filepath.Join(dir, f.Path)); got != f.SHA256 {
			t.Errorf("%s: sha256 %s, the manifest says %s", f.Path, got, f.SHA256)
		}
		n++
	}
	if n == 0 {
		t.Error("the manifest lists no files")
	}
	t.Logf("%d files as the manifest says", n)
}

// checkInitrdInit checks where drover-init is: in the UKI's initrd at
// the manifest's path, with the manifest's sha256 and /init linking to
// it, and not in the root (ls lists a directory of the root, read with
// erofs-utils, not drover). It returns the binary written to a file, for
// `file` to judge.
func checkInitrdInit(t *testing.T, raw string, mf *build.Manifest, ls func(dir string) []string) string {
	t.Helper()
	var own *build.OwnFile
	for i, o := range mf.Own {
		if o.In == "initrd" {
			own = &mf.Own[i]
		}
	}
	if own == nil || own.Path != build.InitPath {
		t.Fatalf("the manifest lists no drover binary in the initrd at %s: %+v", build.InitPath, mf.Own)
	}
	ird := ukiSection(t, espFile(t, raw, mf, esp.UKIPath), ".initrd")
	bin := initrdFile(t, ird, own.Path)
	if got := fmt.Sprintf("%x", sha256.Sum256(bin.Data)); got != own.SHA256 {
		t.Errorf("initrd %s: sha256 %s, the manifest says %s", own.Path, got, own.SHA256)
	}
	if bin.Mode.Perm()&0o111 == 0 {
		t.Errorf("initrd %s: mode %v, not executable", own.Path, bin.Mode)
	}
	if l := initrdFile(t, ird, "/init"); l.Mode&os.ModeSymlink == 0 || "/"+l.Target != own.Path {
		t.Errorf("initrd /init: mode %v target %q, want a symlink to %s", l.Mode, l.Target, own.Path[1:])
	}
	names := ls(filepath.Dir(own.Path))
	if len(names) == 0 || slices.Contains(names, filepath.Base(own.Path)) {
		t.Errorf("the root's %s holds %q; want drover-init not there (it runs from the initrd only), beside the root's own files", filepath.Dir(own.Path), names)
	}
	f := filepath.Join(t.TempDir(), "drover-init")
	if err := os.WriteFile(f, bin.Data, 0o755); err != nil {
		t.Fatal(err)
	}
	return f
}

// erofsLs lists the names in dir of an erofs image, with dump.erofs.
func erofsLs(t *testing.T, img, compression string) func(dir string) []string {
	return func(dir string) []string {
		t.Helper()
		dump, err := erofsutils.Tool("dump.erofs", compression)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		listing := false
		for _, l := range strings.Split(run(t, dump, "--ls", "--path="+dir, img), "\n") {
			// dump.erofs --ls: the inode's details, then a "NID TYPE
			// FILENAME" header and one line per entry.
			f := strings.Fields(l)
			switch {
			case len(f) == 3 && f[0] == "NID" && f[2] == "FILENAME":
				listing = true
			case listing && len(f) == 3 && f[2] != "." && f[2] != "..":
				names = append(names, f[2])
			}
		}
		return names
	}
}
