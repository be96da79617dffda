//go:build integration

package erofsz

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/drover-os/drover/image/tree"
	"github.com/drover-os/drover/internal/erofsutils"
)

// run runs a host tool, failing with the Debian package to install when it
// is missing.
func run(t *testing.T, pkg, name string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Fatalf("%s not found: apt-get install %s", name, pkg)
	}
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func needRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (CI runs the integration tests as root)")
	}
}

// fsckFor is the fsck.erofs that decompresses a: bookworm's 1.5 reads LZ4
// only, the trixie one scripts/host-setup.sh installs reads zstd too.
func fsckFor(t *testing.T, a Algorithm) string {
	t.Helper()
	name, err := erofsutils.Tool("fsck.erofs", a.String())
	if err != nil {
		t.Fatal(err)
	}
	return name
}

func writeFile(t *testing.T, tr *tree.Tree, opts Options) string {
	t.Helper()
	img, _ := writeBytes(t, tr, opts)
	p := filepath.Join(t.TempDir(), "root.erofs")
	if err := os.WriteFile(p, img, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestIntegrationFsck checks each algorithm's image with fsck.erofs, then
// extracts it and compares every file with the tree.
func TestIntegrationFsck(t *testing.T) {
	tr := testTree(t)
	for _, a := range algorithms {
		t.Run(a.String(), func(t *testing.T) {
			fsck := fsckFor(t, a)
			img := writeFile(t, tr, Options{BuildTime: testTime, UUID: testUUID, Label: "root", Compression: a})
			run(t, "erofs-utils", fsck, img)
			if os.Geteuid() != 0 {
				return // extracting with owners needs root
			}
			dir := filepath.Join(t.TempDir(), "x")
			run(t, "erofs-utils", fsck, "--extract="+dir, "--preserve", img)
			checkDir(t, tr, dir, false)
		})
	}
}

// TestIntegrationDump checks with dump.erofs which files are compressed:
// those that shrink by a block besides their tail, not tiny,
// incompressible or gzipped ones.
func TestIntegrationDump(t *testing.T) {
	tr := testTree(t)
	img := writeFile(t, tr, Options{BuildTime: testTime, Compression: LZ4})
	if sb := run(t, "erofs-utils", "dump.erofs", "-s", img); !strings.Contains(sb, "0padding big_pcluster") {
		t.Errorf("superblock features:\n%s", sb)
	}
	for p, compressed := range map[string]bool{
		"/usr/bin/big": true, "/zeros/200000": true, "/text/065537": true, "/mixed": true, "/home/user/data": true,
		"/zeros/008193": true, "/text/004097": false, "/zeros/004097": false, "/random/200000": false,
		"/usr/share/doc/changelog.gz": false, "/zeros/000000": false,
	} {
		out := run(t, "erofs-utils", "dump.erofs", "--path="+p, img)
		if got := strings.Contains(out, "Layout: 1 "); got != compressed {
			t.Errorf("%s: compressed %v, want %v (layout 1: compressed, 0: plain, 2: inline tail):\n%s", p, got, compressed, out)
		}
	}
	// /mixed: compressed, plain, compressed, … — the extent map shows the
	// uncompressed ones block by block, logical length equal to physical.
	ext := run(t, "erofs-utils", "dump.erofs", "-e", "--path=/mixed", img)
	if !regexp.MustCompile(`65536\.\.\s+69632 \|\s+4096 :.*\|\s+4096\n`).MatchString(ext) ||
		!regexp.MustCompile(`0\.\.\s+65536 \|\s+65536 :`).MatchString(ext) {
		t.Errorf("/mixed extents:\n%s", ext)
	}
}

// TestIntegrationMount mounts each image with the host's kernel, the
// reader that matters at boot, and compares everything, xattrs included.
func TestIntegrationMount(t *testing.T) {
	needRoot(t)
	tr := testTree(t)
	for _, a := range algorithms {
		t.Run(a.String(), func(t *testing.T) {
			img := writeFile(t, tr, Options{BuildTime: testTime, UUID: testUUID, Compression: a})
			mnt := t.TempDir()
			if out, err := exec.Command("mount", "-t", "erofs", "-o", "loop,ro", img, mnt).CombinedOutput(); err != nil {
				t.Fatalf("mount -t erofs -o loop: %v\n%s(needs erofs with CONFIG_EROFS_FS_ZIP%s and loop devices)", err, out,
					map[Algorithm]string{Zstd: "_ZSTD"}[a])
			}
			defer func() {
				if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
					t.Errorf("umount %s: %v\n%s", mnt, err, out)
				}
			}()
			checkDir(t, tr, mnt, true)
		})
	}
}
