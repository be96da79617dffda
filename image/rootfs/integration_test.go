//go:build integration

package rootfs

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/drover-os/drover/image/erofsz"
	"github.com/drover-os/drover/image/tree"
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
		t.Skip("needs root")
	}
}

// compressions are the writers' settings the integration tests cover:
// go-erofs's uncompressed image and erofsz's LZ4 one (image/erofsz's own
// tests cover its other algorithms).
var compressions = []erofsz.Algorithm{erofsz.None, erofsz.LZ4}

func TestIntegrationFsck(t *testing.T) {
	for _, c := range compressions {
		t.Run(c.String(), func(t *testing.T) {
			img, _ := writeImage(t, sampleTree(t), Options{UUID: testUUID, Label: "drover-root", Compression: c})
			run(t, "erofs-utils", "fsck.erofs", img)
			out := run(t, "util-linux", "blkid", "-o", "export", "-p", img)
			for _, want := range []string{"TYPE=erofs", "UUID=8a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f9", "LABEL=drover-root", "BLOCK_SIZE=4096"} {
				if !strings.Contains(out, want+"\n") {
					t.Errorf("blkid does not report %s:\n%s", want, out)
				}
			}
		})
	}
}

// TestIntegrationExtract extracts the image with fsck.erofs twice: with
// ownership, and with permissions only, because erofs-utils 1.5 chowns
// after chmod and the kernel then clears setuid and setgid.
func TestIntegrationExtract(t *testing.T) {
	needRoot(t)
	for _, c := range compressions {
		t.Run(c.String(), func(t *testing.T) {
			tr := sampleTree(t)
			img, st := writeImage(t, tr, Options{UUID: testUUID, Compression: c})
			if c != erofsz.None && st.Compressed == 0 {
				t.Error("no file was compressed")
			}
			owners := filepath.Join(t.TempDir(), "x")
			run(t, "erofs-utils", "fsck.erofs", "--extract="+owners, "--preserve", img)
			perms := filepath.Join(t.TempDir(), "x")
			run(t, "erofs-utils", "fsck.erofs", "--extract="+perms, "--preserve-perms", "--no-preserve-owner", img)

			checkDir(t, tr, owners, checkOwner|checkContent|checkTime)
			checkDir(t, tr, perms, checkMode)
		})
	}
}

// TestIntegrationMount mounts the image with the kernel, the reader that
// matters at boot, and checks everything including xattrs.
func TestIntegrationMount(t *testing.T) {
	needRoot(t)
	for _, c := range compressions {
		t.Run(c.String(), func(t *testing.T) {
			tr := sampleTree(t)
			img, _ := writeImage(t, tr, Options{UUID: testUUID, Compression: c})
			mnt := t.TempDir()
			if out, err := exec.Command("mount", "-t", "erofs", "-o", "loop,ro", img, mnt).CombinedOutput(); err != nil {
				t.Fatalf("mount -t erofs -o loop: %v\n%s(needs the erofs kernel module and loop devices)", err, out)
			}
			defer func() {
				if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
					t.Errorf("umount %s: %v\n%s", mnt, err, out)
				}
			}()
			checkDir(t, tr, mnt, checkOwner|checkContent|checkTime|checkMode|checkXattrs)
		})
	}
}

const (
	checkOwner = 1 << iota
	checkContent
	checkTime
	checkMode
	checkXattrs
)

// checkDir compares every node of tr with what is under root.
func checkDir(t *testing.T, tr *tree.Tree, root string, what int) {
	t.Helper()
	err := tr.Walk(func(n *tree.Node) error {
		p := filepath.Join(root, n.Path)
		fi, err := os.Lstat(p)
		if err != nil {
			t.Errorf("%s: %v", n.Path, err)
			return nil
		}
		st := fi.Sys().(*syscall.Stat_t)
		if got, want := fi.Mode().Type(), fileMode(n).Type(); got != want {
			t.Errorf("%s: type %v, want %v", n.Path, got, want)
		}
		if what&checkMode != 0 && n.Kind != tree.Symlink && st.Mode&0o7777 != n.Mode {
			t.Errorf("%s: mode %#o, want %#o", n.Path, st.Mode&0o7777, n.Mode)
		}
		if what&checkOwner != 0 && (st.Uid != n.UID || st.Gid != n.GID) {
			t.Errorf("%s: owner %d:%d, want %d:%d", n.Path, st.Uid, st.Gid, n.UID, n.GID)
		}
		if what&checkTime != 0 && !fi.ModTime().Equal(testEpoch) {
			t.Errorf("%s: mtime %v, want %v", n.Path, fi.ModTime(), testEpoch)
		}
		if what&checkContent != 0 {
			checkContentOf(t, n, p, st)
		}
		if what&checkXattrs != 0 {
			for name, want := range n.Xattrs {
				buf := make([]byte, 256)
				k, err := unix.Lgetxattr(p, name, buf)
				if err != nil || !bytes.Equal(buf[:k], want) {
					t.Errorf("%s: xattr %s = %q (err %v), want %q", n.Path, name, buf[:max(k, 0)], err, want)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func checkContentOf(t *testing.T, n *tree.Node, p string, st *syscall.Stat_t) {
	switch n.Kind {
	case tree.Regular:
		data, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(data, n.Data) {
			t.Errorf("%s: content differs (%d bytes, err %v; want %d)", n.Path, len(data), err, len(n.Data))
		}
	case tree.Symlink:
		if target, err := os.Readlink(p); err != nil || target != n.Target {
			t.Errorf("%s: target %q (err %v), want %q", n.Path, target, err, n.Target)
		}
	case tree.CharDev, tree.BlockDev:
		if st.Rdev != n.Rdev {
			t.Errorf("%s: rdev %#x, want %#x", n.Path, st.Rdev, n.Rdev)
		}
	}
}
