package erofsz

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	erofs "github.com/erofs/go-erofs"

	"github.com/drover-os/drover/image/tree"
)

const testTime = 1735689600 // 2025-01-01

var testUUID = [16]byte{0x8a, 0x1b, 0x2c, 0x3d, 0x4e, 0x5f, 0x40, 0x71, 0x82, 0x93, 0xa4, 0xb5, 0xc6, 0xd7, 0xe8, 0xf9}

// capNetRaw is a valid VFS v2 capability, which the kernel returns as is.
var capNetRaw = []byte{1, 0, 0, 2, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

// text is compressible: lines of words, no two alike.
func text(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	words := strings.Fields("the node image root erofs verity block cluster kernel boot read write lazy snapshot extent")
	var b bytes.Buffer
	for b.Len() < n {
		fmt.Fprintf(&b, "%s %s %d\n", words[rng.IntN(len(words))], words[rng.IntN(len(words))], rng.IntN(1000))
	}
	return b.Bytes()[:n]
}

func random(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func gzipped(b []byte) []byte {
	var out bytes.Buffer
	w := gzip.NewWriter(&out)
	w.Write(b)
	w.Close()
	return out.Bytes()
}

// testTree holds what a root filesystem has and what the compressed layout
// finds hard: sizes on either side of the block and extent sizes, empty
// and one-byte files, zeros, incompressible and half-compressible data, a
// file of many extents, an already-compressed file, a directory of
// several blocks, long and short symlinks, devices, a fifo, xattrs and
// owners beyond 16 bits (extended inodes).
func testTree(t testing.TB) *tree.Tree {
	tr := tree.New()
	add := func(n *tree.Node) {
		t.Helper()
		n.Owner = "test"
		if n.Mode == 0 {
			n.Mode = 0o644
		}
		if err := tr.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	for _, size := range []int{0, 1, 100, 4095, 4096, 4097, 8191, 8192, 8193, 12288, 65535, 65536, 65537, 65536 + 4096, 131072, 200000} {
		add(&tree.Node{Path: fmt.Sprintf("/text/%06d", size), Kind: tree.Regular, Data: text(size, uint64(size))})
		add(&tree.Node{Path: fmt.Sprintf("/random/%06d", size), Kind: tree.Regular, Data: random(size, uint64(size))})
		add(&tree.Node{Path: fmt.Sprintf("/zeros/%06d", size), Kind: tree.Regular, Data: make([]byte, size)})
	}
	// Alternating compressible and incompressible extents: both kinds of
	// pcluster in one file.
	var mixed []byte
	for i := range 9 {
		if i%2 == 0 {
			mixed = append(mixed, text(DefaultExtentSize, uint64(i))...)
		} else {
			mixed = append(mixed, random(DefaultExtentSize, uint64(i))...)
		}
	}
	add(&tree.Node{Path: "/mixed", Kind: tree.Regular, Data: append(mixed, text(5000, 99)...)})
	add(&tree.Node{Path: "/usr/bin/big", Kind: tree.Regular, Mode: 0o755, Data: text(5<<20+123, 7)})
	add(&tree.Node{Path: "/usr/share/doc/changelog.gz", Kind: tree.Regular, Data: gzipped(text(300000, 8))})
	add(&tree.Node{Path: "/usr/bin/ping", Kind: tree.Regular, Mode: 0o4755, Data: text(30000, 9),
		Xattrs: map[string][]byte{"security.capability": capNetRaw}})
	add(&tree.Node{Path: "/usr/bin/wall", Kind: tree.Regular, Mode: 0o2755, GID: 5, Data: text(100, 10),
		Xattrs: map[string][]byte{"user.a": []byte("1"), "trusted.overlay.x": []byte("yes"), "user.long": bytes.Repeat([]byte("v"), 300)}})
	add(&tree.Node{Path: "/home/user", Kind: tree.Dir, Mode: 0o700, UID: 100000, GID: 100000})
	add(&tree.Node{Path: "/home/user/data", Kind: tree.Regular, Mode: 0o600, UID: 100000, GID: 100000, Data: text(70000, 11)})
	add(&tree.Node{Path: "/tmp", Kind: tree.Dir, Mode: 0o1777})
	add(&tree.Node{Path: "/usr/bin/sh", Kind: tree.Symlink, Mode: 0o777, Target: "dash"})
	add(&tree.Node{Path: "/etc/alternatives/long", Kind: tree.Symlink, Mode: 0o777, Target: "/usr/" + strings.Repeat("long-name/", 300)})
	add(&tree.Node{Path: "/dev/null", Kind: tree.CharDev, Mode: 0o666, Rdev: 0x103})
	add(&tree.Node{Path: "/dev/sda", Kind: tree.BlockDev, Mode: 0o660, GID: 6, Rdev: 0x800})
	add(&tree.Node{Path: "/run/initctl", Kind: tree.FIFO, Mode: 0o600})
	for i := range 400 {
		add(&tree.Node{Path: fmt.Sprintf("/usr/share/many/an-entry-with-a-rather-long-name-%04d", i), Kind: tree.Regular, Data: []byte(fmt.Sprint(i))})
	}
	return tr
}

func nodesOf(tr *tree.Tree) []*tree.Node {
	var nodes []*tree.Node
	tr.Walk(func(n *tree.Node) error { nodes = append(nodes, n); return nil })
	return nodes
}

func writeBytes(t testing.TB, tr *tree.Tree, opts Options) ([]byte, *Stats) {
	t.Helper()
	var b bytes.Buffer
	st, err := Write(&b, nodesOf(tr), opts)
	if err != nil {
		t.Fatal(err)
	}
	if int64(b.Len()) != st.Size || st.Size%BlockSize != 0 {
		t.Fatalf("wrote %d bytes, Stats.Size %d: want equal and a multiple of %d", b.Len(), st.Size, BlockSize)
	}
	return b.Bytes(), st
}

var algorithms = []Algorithm{None, LZ4, LZ4HC, Zstd}

func TestWriteDeterministic(t *testing.T) {
	tr := testTree(t)
	for _, a := range algorithms {
		t.Run(a.String(), func(t *testing.T) {
			opts := Options{BuildTime: testTime, UUID: testUUID, Label: "root", Compression: a}
			one, _ := writeBytes(t, tr, opts)
			opts.Workers = 1 // another schedule of the same work
			two, _ := writeBytes(t, tr, opts)
			if !bytes.Equal(one, two) {
				t.Fatal("two writes of the same tree differ")
			}
		})
	}
}

// TestWriteUncompressedReadBack reads the uncompressed layout (metadata,
// inline tails, directories, xattrs) with go-erofs's reader, an
// implementation independent of this one.
func TestWriteUncompressedReadBack(t *testing.T) {
	tr := testTree(t)
	img, st := writeBytes(t, tr, Options{BuildTime: testTime, UUID: testUUID, Label: "drover-root"})
	if st.Compressed != 0 || st.Files != 3*16+406 || st.Inodes != tr.Len() {
		t.Errorf("stats %+v", *st)
	}
	fsys, err := erofs.Open(bytes.NewReader(img))
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	err = fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		p := "/" + name
		if name == "." {
			p = "/"
		}
		n := tr.Get(p)
		if n == nil {
			return fmt.Errorf("%s is in the image, not in the tree", p)
		}
		seen++
		info, err := d.Info()
		if err != nil {
			return err
		}
		s := info.Sys().(*erofs.Stat)
		if s.UID != n.UID || s.GID != n.GID || uint32(s.Mode.Perm()) != n.Mode&0o777 {
			t.Errorf("%s: owner %d:%d mode %v, want %d:%d %o", p, s.UID, s.GID, s.Mode, n.UID, n.GID, n.Mode)
		}
		if info.ModTime().Unix() != testTime {
			t.Errorf("%s: mtime %v", p, info.ModTime())
		}
		want := map[string]string{}
		for k, v := range n.Xattrs {
			want[k] = string(v)
		}
		if len(s.Xattrs)+len(want) > 0 && !reflect.DeepEqual(s.Xattrs, want) {
			t.Errorf("%s: xattrs %q, want %q", p, s.Xattrs, want)
		}
		switch n.Kind {
		case tree.Regular:
			if data, err := fs.ReadFile(fsys, name); err != nil || !bytes.Equal(data, n.Data) {
				t.Errorf("%s: %d bytes (%v), want %d", p, len(data), err, len(n.Data))
			}
		case tree.Symlink:
			if target, err := fs.ReadLink(fsys, name); err != nil || target != n.Target {
				t.Errorf("%s: target %q (%v)", p, target, err)
			}
		case tree.CharDev, tree.BlockDev:
			if uint64(s.Rdev) != n.Rdev {
				t.Errorf("%s: rdev %#x, want %#x", p, s.Rdev, n.Rdev)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen != tr.Len() {
		t.Errorf("walked %d paths, the tree has %d", seen, tr.Len())
	}
}

// TestWriteSuperblock checks the fields the kernel reads before any inode.
func TestWriteSuperblock(t *testing.T) {
	tr := testTree(t)
	for _, c := range []struct {
		a       Algorithm
		feat    uint32
		algs    uint16
		record  []byte
		minComp int
	}{
		{None, 0, 0, nil, 0},
		{LZ4, 3, 1, []byte{14, 0, 0xff, 0xff, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 20},
		{Zstd, 3, 8, []byte{6, 0, 0, 6, 0, 0, 0, 0}, 20},
	} {
		img, st := writeBytes(t, tr, Options{BuildTime: testTime, UUID: testUUID, Label: "root", Compression: c.a})
		sb := img[superOffset:]
		if le.Uint32(sb) != magic || sb[12] != blockBits || le.Uint32(sb[36:])*BlockSize != uint32(len(img)) {
			t.Errorf("%s: magic %#x blkszbits %d blocks %d", c.a, le.Uint32(sb), sb[12], le.Uint32(sb[36:]))
		}
		if !bytes.Equal(sb[48:64], testUUID[:]) || string(bytes.TrimRight(sb[64:80], "\x00")) != "root" {
			t.Errorf("%s: uuid %x label %q", c.a, sb[48:64], sb[64:80])
		}
		if le.Uint64(sb[16:]) != uint64(tr.Len()) || le.Uint64(sb[24:]) != testTime {
			t.Errorf("%s: inodes %d build time %d", c.a, le.Uint64(sb[16:]), le.Uint64(sb[24:]))
		}
		if le.Uint32(sb[80:]) != c.feat || le.Uint16(sb[84:]) != c.algs {
			t.Errorf("%s: features %#x algorithms %#x, want %#x %#x", c.a, le.Uint32(sb[80:]), le.Uint16(sb[84:]), c.feat, c.algs)
		}
		if got := sb[superSize : superSize+len(c.record)]; !bytes.Equal(got, c.record) {
			t.Errorf("%s: record % x, want % x", c.a, got, c.record)
		}
		if st.Compressed < c.minComp {
			t.Errorf("%s: %d files compressed, want at least %d", c.a, st.Compressed, c.minComp)
		}
	}
}

func TestWriteErrors(t *testing.T) {
	one := func(n *tree.Node) []*tree.Node {
		return []*tree.Node{{Path: "/", Kind: tree.Dir, Mode: 0o755}, n}
	}
	for _, c := range []struct {
		name  string
		nodes []*tree.Node
		opts  Options
		want  string
	}{
		{"label", one(&tree.Node{Path: "/x", Kind: tree.Regular}), Options{Label: "a-label-longer-than-16"}, "longer than 16 bytes"},
		{"no root", []*tree.Node{{Path: "/x", Kind: tree.Regular}}, Options{}, "no root directory"},
		{"orphan", one(&tree.Node{Path: "/a/x", Kind: tree.Regular}), Options{}, "/a/x: parent directory"},
		{"acl", one(&tree.Node{Path: "/x", Kind: tree.Regular, Xattrs: map[string][]byte{"system.posix_acl_access": nil}}), Options{}, `/x: xattr "system.posix_acl_access"`},
		{"extent", one(&tree.Node{Path: "/x", Kind: tree.Regular}), Options{Compression: LZ4, ExtentSize: 12288}, "extent size 12288"},
		{"epoch", one(&tree.Node{Path: "/x", Kind: tree.Regular}), Options{BuildTime: -1}, "before 1970"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			if _, err := Write(&b, c.nodes, c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}
