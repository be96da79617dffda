// Package rootfs writes the image tree as an EROFS filesystem, the
// read-only root that dm-verity protects.
//
// The image is reproducible: entries are written in sorted path order, every
// timestamp is the build epoch, and the filesystem UUID and label come from
// the caller (the UUID is derived from content). Uncompressed, the writer
// is github.com/erofs/go-erofs, which writes uncompressed images only (its
// reader cannot read compressed ones either); compressed, it is
// image/erofsz. Neither knows hard links, so a hard-linked file is stored
// once per name. Blocks are 4 KiB, so the image size is a whole number of
// dm-verity data blocks.
package rootfs

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	erofs "github.com/erofs/go-erofs"

	"github.com/drover-os/drover/image/erofsz"
	"github.com/drover-os/drover/image/tree"
)

// BlockSize is the EROFS block size; it equals the page size the kernel
// mounts with and the dm-verity data block size.
const BlockSize = 4096

// Superblock field offsets (struct erofs_super_block, which starts 1024
// bytes into the image). go-erofs leaves UUID and volume name zero and sets
// no superblock checksum, so both are filled in after it has written.
const (
	superblockOffset = 1024
	uuidOffset       = superblockOffset + 48 // then volume_name[16]
	maxLabel         = 16
)

// Options are the identity of the filesystem and how files are stored.
type Options struct {
	UUID  [16]byte
	Label string // at most 16 bytes
	// Compression is how regular files are compressed (erofsz.None: not).
	Compression erofsz.Algorithm
	// ExtentSize is the bytes of a file per compressed extent (0: erofsz's
	// default).
	ExtentSize int
	// Cache keeps compressed files across builds (with Compression).
	Cache erofsz.Cache
}

// Stats describe a written image; the compression counts stay zero
// without compression.
type Stats = erofsz.Stats

// xattrPrefixes are the namespaces go-erofs encodes the way the kernel
// reads them. Others (POSIX ACLs among them: go-erofs expects a "." after
// "system.posix_acl_access") would come out with an index the kernel does
// not resolve, so they are refused rather than silently lost.
var xattrPrefixes = []string{"user.", "trusted.", "security."}

// Write writes t to w as an EROFS image with every timestamp set to epoch
// (whole seconds: EROFS compact inodes carry none of their own and take
// the superblock's build time, which keeps inodes at 32 bytes).
func Write(w io.WriteSeeker, t *tree.Tree, epoch time.Time, opts Options) (*Stats, error) {
	if len(opts.Label) > maxLabel {
		return nil, fmt.Errorf("writing erofs: label %q is longer than %d bytes", opts.Label, maxLabel)
	}
	if epoch.Unix() < 0 {
		return nil, fmt.Errorf("writing erofs: epoch %s is before 1970", epoch)
	}
	epoch = time.Unix(epoch.Unix(), 0)

	var nodes []*tree.Node
	if err := t.Walk(func(n *tree.Node) error {
		nodes = append(nodes, n)
		return checkNode(n)
	}); err != nil {
		return nil, fmt.Errorf("writing erofs: %w", err)
	}
	if len(nodes) == 0 || nodes[0].Path != "/" || nodes[0].Kind != tree.Dir {
		return nil, fmt.Errorf("writing erofs: the tree has no root directory")
	}

	if opts.Compression != erofsz.None {
		return writeCompressed(w, nodes, epoch, opts)
	}
	ew := erofs.Create(w, erofs.WithBlockSize(BlockSize), erofs.WithBuildTime(uint64(epoch.Unix()), 0))
	if err := ew.CopyFrom(newTreeFS(nodes, epoch)); err != nil {
		return nil, fmt.Errorf("writing erofs: %w", err)
	}
	st := &Stats{Inodes: len(nodes)}
	subdirs := subdirCounts(nodes)
	for _, n := range nodes {
		if err := setMeta(ew, n, epoch, subdirs[n.Path], st); err != nil {
			return nil, fmt.Errorf("writing erofs: %s: %w", n.Path, err)
		}
	}
	if err := ew.Close(); err != nil {
		return nil, fmt.Errorf("writing erofs: %w", err)
	}

	size, err := w.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, fmt.Errorf("writing erofs: %w", err)
	}
	if size%BlockSize != 0 {
		return nil, fmt.Errorf("writing erofs: image size %d is not a multiple of %d", size, BlockSize)
	}
	if err := writeIdentity(w, opts); err != nil {
		return nil, fmt.Errorf("writing erofs superblock: %w", err)
	}
	if _, err := w.Seek(size, io.SeekStart); err != nil {
		return nil, fmt.Errorf("writing erofs: %w", err)
	}
	st.Size = size
	return st, nil
}

// writeCompressed writes the image with image/erofsz, which lays out the
// whole filesystem itself.
func writeCompressed(w io.WriteSeeker, nodes []*tree.Node, epoch time.Time, opts Options) (*Stats, error) {
	return erofsz.Write(w, nodes, erofsz.Options{BuildTime: epoch.Unix(), UUID: opts.UUID, Label: opts.Label,
		Compression: opts.Compression, ExtentSize: opts.ExtentSize, Cache: opts.Cache})
}

// checkNode rejects what EROFS cannot store faithfully.
func checkNode(n *tree.Node) error {
	if n.Mode&^0o7777 != 0 {
		return fmt.Errorf("%s: mode %o has bits beyond 07777", n.Path, n.Mode)
	}
	switch n.Kind {
	case tree.Regular, tree.Dir, tree.FIFO:
	case tree.Symlink:
		if n.Target == "" {
			return fmt.Errorf("%s: symlink with an empty target", n.Path)
		}
	case tree.CharDev, tree.BlockDev:
		// EROFS keeps the kernel's 32-bit encoding: 12-bit major, 20-bit minor.
		if n.Rdev > math.MaxUint32 {
			return fmt.Errorf("%s: device number %#x does not fit EROFS's 32 bits", n.Path, n.Rdev)
		}
	default:
		return fmt.Errorf("%s: unknown node kind %d", n.Path, n.Kind)
	}
	for name := range n.Xattrs {
		if !hasXattrPrefix(name) {
			return fmt.Errorf("%s: xattr %q is outside the namespaces EROFS stores (%s)", n.Path, name, strings.Join(xattrPrefixes, ", "))
		}
	}
	return nil
}

func hasXattrPrefix(name string) bool {
	for _, p := range xattrPrefixes {
		if strings.HasPrefix(name, p) && len(name) > len(p) {
			return true
		}
	}
	return false
}

// subdirCounts counts each directory's subdirectories, for link counts.
func subdirCounts(nodes []*tree.Node) map[string]uint32 {
	m := map[string]uint32{}
	for _, n := range nodes {
		if n.Kind == tree.Dir && n.Path != "/" {
			m[parentOf(n.Path)]++
		}
	}
	return m
}

func parentOf(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i == 0 {
		return "/"
	}
	return p[:i]
}

// setMeta gives a node what the fs.FS view cannot carry: owner, time,
// directory link count, xattrs, and for devices and fifos the node itself.
func setMeta(ew *erofs.Writer, n *tree.Node, epoch time.Time, subdirs uint32, st *Stats) error {
	switch n.Kind {
	case tree.Regular:
		st.Files++
		st.DataBytes += int64(len(n.Data))
	case tree.Dir:
		st.Dirs++
		if err := ew.SetNlink(n.Path, 2+subdirs); err != nil {
			return err
		}
	case tree.Symlink:
		st.Symlinks++
	case tree.CharDev, tree.BlockDev, tree.FIFO:
		st.Specials++
		typ := map[tree.Kind]uint16{tree.CharDev: 0o020000, tree.BlockDev: 0o060000, tree.FIFO: 0o010000}[n.Kind]
		if err := ew.Mknod(n.Path, typ|uint16(n.Mode), uint32(n.Rdev)); err != nil {
			return err
		}
	}
	if err := ew.Chown(n.Path, int(n.UID), int(n.GID)); err != nil {
		return err
	}
	if err := ew.Chtimes(n.Path, epoch, epoch); err != nil {
		return err
	}
	for name, v := range n.Xattrs { // go-erofs sorts them when writing
		if err := ew.Setxattr(n.Path, name, string(v)); err != nil {
			return err
		}
	}
	return nil
}

// writeIdentity fills in the superblock's UUID and volume name.
func writeIdentity(w io.WriteSeeker, opts Options) error {
	var buf [32]byte
	copy(buf[:16], opts.UUID[:])
	copy(buf[16:], opts.Label)
	if _, err := w.Seek(uuidOffset, io.SeekStart); err != nil {
		return err
	}
	_, err := w.Write(buf[:])
	return err
}
