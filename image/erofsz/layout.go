package erofsz

import (
	"fmt"
	"math"
	"path"
	"sort"
	"strings"

	"github.com/drover-os/drover/image/tree"
)

// inode is one node's place in the image: its header, where it sits in the
// metadata (nid) and where its data blocks are.
type inode struct {
	n        *tree.Node
	hdr      inodeHeader
	xattrs   []byte
	parent   *inode
	children []*inode // directories: sorted by name

	content []byte   // what a plain or inline layout stores: file data, symlink target
	dirents []dirent // directories, "." and ".." included, sorted by name
	zenc    *Encoded // a compressed regular file
	zalg    uint8    // its algorithm's number on disk

	nid     uint64
	tail    int    // bytes of content stored inline after the inode
	blocks  int    // data blocks
	blkaddr uint32 // first data block
}

type dirent struct {
	name string
	to   *inode
}

// direntBlocks packs a directory's entries into blocks: each block holds
// whole entries, their 12-byte headers first, then the names. It returns
// each block's entry count and the directory's size: full blocks before
// the last, whose size is what it uses.
func direntBlocks(ents []dirent) (counts []int, size int) {
	used, count := 0, 0
	for _, d := range ents {
		need := direntSize + len(d.name)
		if count > 0 && used+need > BlockSize {
			counts = append(counts, count)
			used, count = 0, 0
		}
		used += need
		count++
	}
	counts = append(counts, count)
	return counts, (len(counts)-1)*BlockSize + used
}

// putDirents writes a directory's content, which its children's nids
// complete, into b (len: its size).
func putDirents(b []byte, ents []dirent) {
	counts, _ := direntBlocks(ents)
	for bi, cnt := range counts {
		blk := b[bi*BlockSize:]
		group := ents[:cnt]
		ents = ents[cnt:]
		nameoff := cnt * direntSize
		for i, d := range group {
			h := blk[i*direntSize:]
			le.PutUint64(h[0:], d.to.nid)
			le.PutUint16(h[8:], uint16(nameoff))
			h[10] = fileType(d.to.n.Kind)
			nameoff += copy(blk[nameoff:], d.name)
		}
	}
}

func fileType(k tree.Kind) uint8 {
	return map[tree.Kind]uint8{tree.Regular: ftReg, tree.Dir: ftDir, tree.Symlink: ftLink,
		tree.CharDev: ftChr, tree.BlockDev: ftBlk, tree.FIFO: ftFIFO}[k]
}

func typeBits(k tree.Kind) uint16 {
	return map[tree.Kind]uint16{tree.Regular: sIFREG, tree.Dir: sIFDIR, tree.Symlink: sIFLNK,
		tree.CharDev: sIFCHR, tree.BlockDev: sIFBLK, tree.FIFO: sIFIFO}[k]
}

// encodeXattrs is a node's inline xattr area: the ibody header, then each
// attribute, by name, as prefix index, suffix and value, 4-byte aligned.
func encodeXattrs(x map[string][]byte) ([]byte, error) {
	if len(x) == 0 {
		return nil, nil
	}
	names := make([]string, 0, len(x))
	for name := range x {
		names = append(names, name)
	}
	sort.Strings(names)
	b := make([]byte, xattrHeaderSize)
	for _, name := range names {
		idx, suffix, ok := uint8(0), "", false
		for _, p := range xattrIndexes {
			if s, found := strings.CutPrefix(name, p.prefix); found && s != "" {
				idx, suffix, ok = p.index, s, true
				break
			}
		}
		v := x[name]
		switch {
		case !ok:
			return nil, fmt.Errorf("xattr %q: erofs stores only user., trusted. and security. names", name)
		case len(suffix) > math.MaxUint8:
			return nil, fmt.Errorf("xattr %q: name longer than 255 bytes after its prefix", name)
		case len(v) > math.MaxUint16:
			return nil, fmt.Errorf("xattr %q: value of %d bytes, more than 65535", name, len(v))
		}
		e := make([]byte, xattrEntrySize, roundUp(xattrEntrySize+len(suffix)+len(v), 4))
		e[0], e[1] = uint8(len(suffix)), idx
		le.PutUint16(e[2:], uint16(len(v)))
		e = append(append(e, suffix...), v...)
		b = append(b, e[:cap(e)]...)
	}
	if len(b) > math.MaxUint16*4 {
		return nil, fmt.Errorf("xattrs: %d bytes, more than an inode holds", len(b))
	}
	return b, nil
}

// newInodes makes an inode per node (nodes: a tree's Walk order, the root
// first) and links directories to their children.
func newInodes(nodes []*tree.Node, buildTime uint64) ([]*inode, error) {
	if len(nodes) == 0 || nodes[0].Path != "/" || nodes[0].Kind != tree.Dir {
		return nil, fmt.Errorf("the tree has no root directory")
	}
	inodes := make([]*inode, len(nodes))
	byPath := make(map[string]*inode, len(nodes))
	for i, n := range nodes {
		x, err := encodeXattrs(n.Xattrs)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n.Path, err)
		}
		in := &inode{n: n, xattrs: x}
		in.hdr = inodeHeader{
			xattrLen: len(x), mode: typeBits(n.Kind) | uint16(n.Mode&0o7777), nlink: 1,
			ino: uint32(i + 1), uid: n.UID, gid: n.GID, mtime: buildTime,
		}
		switch n.Kind {
		case tree.Regular:
			in.content = n.Data
		case tree.Symlink:
			in.content = []byte(n.Target)
		case tree.CharDev, tree.BlockDev:
			in.hdr.u = uint32(n.Rdev)
		}
		in.hdr.size = uint64(len(in.content))
		inodes[i], byPath[n.Path] = in, in
		if i == 0 {
			in.parent = in
			continue
		}
		if in.parent = byPath[path.Dir(n.Path)]; in.parent == nil || in.parent.n.Kind != tree.Dir {
			return nil, fmt.Errorf("%s: parent directory is not in the tree before it", n.Path)
		}
		in.parent.children = append(in.parent.children, in)
	}
	for _, in := range inodes {
		if in.n.Kind != tree.Dir {
			continue
		}
		ents := []dirent{{".", in}, {"..", in.parent}}
		for _, c := range in.children {
			ents = append(ents, dirent{path.Base(c.n.Path), c})
			if c.n.Kind == tree.Dir {
				in.hdr.nlink++
			}
		}
		in.hdr.nlink++ // "." and the parent's entry: 2 + subdirectories
		sort.Slice(ents, func(i, j int) bool { return ents[i].name < ents[j].name })
		in.dirents = ents
		_, size := direntBlocks(ents)
		in.hdr.size = uint64(size)
	}
	for _, in := range inodes {
		h := &in.hdr
		h.extended = h.uid > math.MaxUint16 || h.gid > math.MaxUint16 || h.size > math.MaxUint32 || h.nlink > math.MaxUint16
	}
	return inodes, nil
}

// place lays the inodes out in the metadata from byte start on: each at a
// 32-byte slot (its nid), header and xattrs never across a block, an
// inline tail in the same block as its inode. A tail that does not fit
// where the inode would go moves the inode to the next block, or goes to a
// data block itself, whichever wastes fewer bytes. It returns the end.
func place(inodes []*inode, start int) int {
	pos := start
	for _, in := range inodes {
		pos = roundUp(pos, 32)
		head := in.hdr.len() + len(in.xattrs)
		if pos%BlockSize+head > BlockSize {
			pos = roundUp(pos, BlockSize)
		}
		size := int(in.hdr.size)
		switch {
		case in.zenc != nil:
			in.hdr.layout = layoutCompressedFull
			in.blocks = in.zenc.Blocks()
			nidx := (size + BlockSize - 1) / BlockSize
			in.nid = uint64(pos / 32)
			pos += fullIndexOffset(head) + mapHeaderSize + 8 + nidx*indexSize
			continue
		case in.n.Kind == tree.CharDev || in.n.Kind == tree.BlockDev || in.n.Kind == tree.FIFO:
			in.hdr.layout = layoutFlatPlain
		default:
			in.hdr.layout, in.tail = layoutFlatPlain, 0
			in.blocks = (size + BlockSize - 1) / BlockSize
			if tail := size % BlockSize; tail > 0 && head+tail <= BlockSize {
				fits := pos%BlockSize+head+tail <= BlockSize
				padWaste := BlockSize - pos%BlockSize
				if !fits && padWaste < BlockSize-tail {
					pos, fits = roundUp(pos, BlockSize), true
				}
				if fits {
					in.hdr.layout, in.tail = layoutFlatInline, tail
					in.blocks = size / BlockSize
				}
			}
		}
		in.nid = uint64(pos / 32)
		pos += head + in.tail
	}
	return pos
}

// assignBlocks gives each inode with data blocks its first block, from
// block first on, in inode order, and returns the block after the last.
func assignBlocks(inodes []*inode, first uint32) uint32 {
	blk := first
	for _, in := range inodes {
		if in.blocks == 0 {
			continue
		}
		in.blkaddr = blk
		blk += uint32(in.blocks)
		switch in.hdr.layout {
		case layoutFlatPlain, layoutFlatInline:
			in.hdr.u = in.blkaddr
		case layoutCompressedFull:
			in.hdr.u = uint32(in.blocks) // compressed_blocks
		}
	}
	return blk
}
