//go:build integration || vmtest

package erofsz

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/drover-os/drover/image/tree"
)

// checkDir compares every node of tr with what is under root.
func checkDir(t *testing.T, tr *tree.Tree, root string, xattrs bool) {
	t.Helper()
	err := tr.Walk(func(n *tree.Node) error {
		p := filepath.Join(root, n.Path)
		fi, err := os.Lstat(p)
		if err != nil {
			t.Errorf("%s: %v", n.Path, err)
			return nil
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Mode&syscall.S_IFMT != uint32(typeBits(n.Kind)) {
			t.Errorf("%s: type %#o, want %#o", n.Path, st.Mode&syscall.S_IFMT, typeBits(n.Kind))
		}
		// fsck.erofs chowns after chmod, so the kernel clears setuid
		// and setgid of what it extracts: compare those on mounts.
		perm := uint32(0o1777)
		if xattrs {
			perm = 0o7777
		}
		if n.Kind != tree.Symlink && st.Mode&perm != n.Mode&perm {
			t.Errorf("%s: mode %#o, want %#o", n.Path, st.Mode&0o7777, n.Mode)
		}
		if st.Uid != n.UID || st.Gid != n.GID {
			t.Errorf("%s: owner %d:%d, want %d:%d", n.Path, st.Uid, st.Gid, n.UID, n.GID)
		}
		if n.Kind != tree.Symlink && st.Mtim.Sec != testTime {
			t.Errorf("%s: mtime %d, want %d", n.Path, st.Mtim.Sec, testTime)
		}
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
		if xattrs {
			for name, want := range n.Xattrs {
				buf := make([]byte, 1024)
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
