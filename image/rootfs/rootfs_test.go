package rootfs

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	erofs "github.com/erofs/go-erofs"

	"github.com/drover-os/drover/image/erofsz"
	"github.com/drover-os/drover/image/tree"
)

var testEpoch = time.Unix(1735689600, 0) // 2025-01-01

// capNetRaw is a valid VFS v2 capability (cap_net_raw, effective), the
// kernel refuses to return a malformed one.
var capNetRaw = []byte{1, 0, 0, 2, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

var testUUID = [16]byte{0x8a, 0x1b, 0x2c, 0x3d, 0x4e, 0x5f, 0x40, 0x71, 0x82, 0x93, 0xa4, 0xb5, 0xc6, 0xd7, 0xe8, 0xf9}

// sampleTree holds every node kind and the metadata that matters on a root
// filesystem: setuid/setgid/sticky, non-root owners, xattrs, a file
// spanning several blocks, a directory too large for one block.
func sampleTree(t testing.TB) *tree.Tree {
	tr := tree.New()
	big := bytes.Repeat([]byte("0123456789abcdef"), 1000) // 16000 bytes: 3 blocks + a tail
	nodes := []*tree.Node{
		{Path: "/etc", Kind: tree.Dir, Mode: 0o755},
		{Path: "/etc/shadow", Kind: tree.Regular, Mode: 0o640, GID: 42, Data: []byte("root:*:1::::::\n")},
		{Path: "/etc/empty", Kind: tree.Regular, Mode: 0o600},
		{Path: "/usr/bin/su", Kind: tree.Regular, Mode: 0o4755, Data: []byte("su binary")},
		{Path: "/usr/bin/wall", Kind: tree.Regular, Mode: 0o2755, GID: 5, Data: []byte("wall")},
		{Path: "/usr/bin/dash", Kind: tree.Regular, Mode: 0o755, Data: big},
		{Path: "/usr/bin/sh", Kind: tree.Symlink, Target: "dash"},
		{Path: "/usr/bin/ping", Kind: tree.Regular, Mode: 0o755, Data: []byte("ping"),
			Xattrs: map[string][]byte{"security.capability": capNetRaw}},
		{Path: "/tmp", Kind: tree.Dir, Mode: 0o1777},
		{Path: "/home/user", Kind: tree.Dir, Mode: 0o700, UID: 100000, GID: 100000,
			Xattrs: map[string][]byte{"user.comment": []byte("hello"), "trusted.x": []byte("")}},
		{Path: "/dev/null", Kind: tree.CharDev, Mode: 0o666, Rdev: 0x103},
		{Path: "/dev/sda", Kind: tree.BlockDev, Mode: 0o660, GID: 6, Rdev: 0x800},
		{Path: "/run/initctl", Kind: tree.FIFO, Mode: 0o600},
		{Path: "/etc/alternatives/editor", Kind: tree.Symlink, Target: "/usr/bin/" + strings.Repeat("long-name-", 30)},
	}
	for i := range 300 {
		nodes = append(nodes, &tree.Node{Path: fmt.Sprintf("/usr/share/many/entry-with-a-longish-name-%03d", i), Kind: tree.Regular, Mode: 0o644, Data: []byte(fmt.Sprint(i))})
	}
	for _, n := range nodes {
		n.Owner = "test"
		if err := tr.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

func writeImage(t testing.TB, tr *tree.Tree, opts Options) (string, *Stats) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "root.erofs")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := Write(f, tr, testEpoch, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p, st
}

func TestWriteDeterministic(t *testing.T) {
	for _, z := range []erofsz.Algorithm{erofsz.None, erofsz.LZ4} {
		t.Run(z.String(), func(t *testing.T) {
			p1, _ := writeImage(t, sampleTree(t), Options{UUID: testUUID, Label: "root", Compression: z})
			p2, _ := writeImage(t, sampleTree(t), Options{UUID: testUUID, Label: "root", Compression: z})
			a, _ := os.ReadFile(p1)
			b, _ := os.ReadFile(p2)
			if !bytes.Equal(a, b) {
				t.Fatal("two writes of the same tree differ")
			}
			// A different identity changes exactly the UUID bytes.
			other := testUUID
			other[0] ^= 0xff
			p3, _ := writeImage(t, sampleTree(t), Options{UUID: other, Label: "root", Compression: z})
			c, _ := os.ReadFile(p3)
			var diff []int
			for i := range a {
				if a[i] != c[i] {
					diff = append(diff, i)
				}
			}
			if !reflect.DeepEqual(diff, []int{uuidOffset}) {
				t.Errorf("changing the UUID changed bytes %v, want only %d", diff, uuidOffset)
			}
		})
	}
}

func TestWriteReadBack(t *testing.T) {
	tr := sampleTree(t)
	p, st := writeImage(t, tr, Options{UUID: testUUID, Label: "drover-root"})
	img, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size != int64(len(img)) || st.Size%BlockSize != 0 {
		t.Errorf("Stats.Size %d, file %d bytes: want equal and a multiple of %d", st.Size, len(img), BlockSize)
	}
	wantStats := Stats{Size: st.Size, Inodes: tr.Len(), Files: 306, Dirs: 15, Symlinks: 6, Specials: 3, DataBytes: tr.Size()}
	if *st != wantStats {
		t.Errorf("stats %+v, want %+v", *st, wantStats)
	}
	sb := img[superblockOffset:]
	if !bytes.Equal(sb[48:64], testUUID[:]) || string(bytes.TrimRight(sb[64:80], "\x00")) != "drover-root" {
		t.Errorf("superblock uuid %x label %q", sb[48:64], sb[64:80])
	}

	fsys, err := erofs.Open(bytes.NewReader(img))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	err = fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		p := "/" + name
		if name == "." {
			p = "/"
		}
		got = append(got, p)
		n := tr.Get(p)
		if n == nil || n.Path != p {
			return fmt.Errorf("%s is in the image but not in the tree", p)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		compare(t, fsys, name, n, info)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(got)
	if want := tr.Paths(); !reflect.DeepEqual(got, want) {
		t.Errorf("image has %d paths, tree %d", len(got), len(want))
	}
}

func compare(t *testing.T, fsys fs.FS, name string, n *tree.Node, info fs.FileInfo) {
	t.Helper()
	s, ok := info.Sys().(*erofs.Stat)
	if !ok {
		t.Fatalf("%s: Sys() is %T", n.Path, info.Sys())
	}
	// Stat.Mode, not info.Mode(): go-erofs 0.3.1's FileInfo.Mode leaves
	// the raw Unix type bits in and drops setuid, setgid and sticky.
	if s.Mode != fileMode(n) {
		t.Errorf("%s: mode %v, want %v", n.Path, s.Mode, fileMode(n))
	}
	if s.UID != n.UID || s.GID != n.GID {
		t.Errorf("%s: owner %d:%d, want %d:%d", n.Path, s.UID, s.GID, n.UID, n.GID)
	}
	if !info.ModTime().Equal(testEpoch) {
		t.Errorf("%s: mtime %v, want %v", n.Path, info.ModTime(), testEpoch)
	}
	wantX := map[string]string{}
	for k, v := range n.Xattrs {
		wantX[k] = string(v)
	}
	if len(s.Xattrs)+len(wantX) > 0 && !reflect.DeepEqual(s.Xattrs, wantX) {
		t.Errorf("%s: xattrs %q, want %q", n.Path, s.Xattrs, wantX)
	}
	switch n.Kind {
	case tree.Regular:
		data, err := fs.ReadFile(fsys, name)
		if err != nil || !bytes.Equal(data, n.Data) {
			t.Errorf("%s: content %d bytes (err %v), want %d", n.Path, len(data), err, len(n.Data))
		}
		if s.Nlink != 1 {
			t.Errorf("%s: nlink %d", n.Path, s.Nlink)
		}
	case tree.Symlink:
		target, err := fs.ReadLink(fsys, name)
		if err != nil || target != n.Target {
			t.Errorf("%s: target %q (err %v), want %q", n.Path, target, err, n.Target)
		}
	case tree.CharDev, tree.BlockDev:
		if uint64(s.Rdev) != n.Rdev {
			t.Errorf("%s: rdev %#x, want %#x", n.Path, s.Rdev, n.Rdev)
		}
	case tree.Dir:
		entries, err := fs.ReadDir(fsys, name)
		if err != nil {
			t.Fatal(err)
		}
		want := 2
		for _, e := range entries {
			if e.IsDir() {
				want++
			}
		}
		if s.Nlink != want {
			t.Errorf("%s: nlink %d, want %d", n.Path, s.Nlink, want)
		}
	}
}

func TestWriteErrors(t *testing.T) {
	cases := []struct {
		name string
		node *tree.Node
		opts Options
		want string
	}{
		{"label", nil, Options{Label: "a-label-longer-than-16"}, "longer than 16 bytes"},
		{"acl", &tree.Node{Path: "/x", Kind: tree.Regular, Xattrs: map[string][]byte{"system.posix_acl_access": nil}}, Options{}, `/x: xattr "system.posix_acl_access" is outside`},
		{"bare prefix", &tree.Node{Path: "/x", Kind: tree.Regular, Xattrs: map[string][]byte{"user.": nil}}, Options{}, `xattr "user." is outside`},
		{"rdev", &tree.Node{Path: "/dev/x", Kind: tree.CharDev, Rdev: 1 << 40}, Options{}, "/dev/x: device number 0x10000000000 does not fit"},
		{"mode", &tree.Node{Path: "/x", Kind: tree.Regular, Mode: 0o100644}, Options{}, "/x: mode 100644 has bits beyond 07777"},
		{"empty symlink", &tree.Node{Path: "/x", Kind: tree.Symlink, Mode: 0o777}, Options{}, "/x: symlink with an empty target"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := tree.New()
			if c.node != nil {
				if err := tr.Set(c.node); err != nil {
					t.Fatal(err)
				}
			}
			f, err := os.Create(filepath.Join(t.TempDir(), "img"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			_, err = Write(f, tr, testEpoch, c.opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// TestWriteSubsecondEpoch: the epoch is cut to whole seconds so every inode
// stays compact; the image equals the one written at the whole second.
func TestWriteSubsecondEpoch(t *testing.T) {
	p1, _ := writeImage(t, sampleTree(t), Options{})
	p := filepath.Join(t.TempDir(), "img")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Write(f, sampleTree(t), testEpoch.Add(500*time.Millisecond), Options{}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	a, _ := os.ReadFile(p1)
	b, _ := os.ReadFile(p)
	if !bytes.Equal(a, b) {
		t.Error("a sub-second epoch changed the image")
	}
}
