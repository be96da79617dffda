package erofsz

import "encoding/binary"

// The on-disk format, as the kernel's fs/erofs/erofs_fs.h defines it. Only
// what this writer emits is named here.

// BlockSize is the filesystem block size and the logical cluster size of
// compressed files: 4 KiB, the page size the kernel mounts with and the
// dm-verity data block size.
const (
	BlockSize = 4096
	blockBits = 12
)

const (
	superOffset = 1024 // EROFS_SUPER_OFFSET
	superSize   = 128  // struct erofs_super_block
	magic       = 0xE0F5E1E2

	// feature_incompat bits.
	featureZeroPadding = 0x1 // compressed data ends at its pcluster's end, zeros in front
	featureComprCfgs   = 0x2 // per-algorithm records follow the superblock; also BIG_PCLUSTER

	maxLabel = 16
)

// Inode data layouts (i_format bits 1-3).
const (
	layoutFlatPlain      = 0
	layoutCompressedFull = 1 // full (8-byte) lcluster indexes
	layoutFlatInline     = 2
)

const (
	compactInodeSize  = 32
	extendedInodeSize = 64
	xattrHeaderSize   = 12 // struct erofs_xattr_ibody_header without shared ids
	xattrEntrySize    = 4
	direntSize        = 12
	indexSize         = 8 // struct z_erofs_lcluster_index
	mapHeaderSize     = 8 // struct z_erofs_map_header
)

// Logical cluster types (di_advise bits 0-1) and flags.
const (
	lclusterPlain   = 0
	lclusterHead1   = 1
	lclusterNonhead = 2
	d0Cblkcnt       = 1 << 11 // first NONHEAD's delta[0] holds the pcluster's block count

	adviseBigPcluster1 = 0x2 // HEAD1 pclusters may be longer than one block
)

// Unix file type bits and the dirent file types (FT_*).
const (
	sIFIFO = 0o010000
	sIFCHR = 0o020000
	sIFDIR = 0o040000
	sIFBLK = 0o060000
	sIFREG = 0o100000
	sIFLNK = 0o120000
	ftReg  = 1
	ftDir  = 2
	ftChr  = 3
	ftBlk  = 4
	ftFIFO = 5
	ftLink = 7
)

// xattr name indexes (EROFS_XATTR_INDEX_*) by the prefix they stand for.
var xattrIndexes = []struct {
	prefix string
	index  uint8
}{
	{"user.", 1},
	{"trusted.", 4},
	{"security.", 6},
}

var le = binary.LittleEndian

// superblock is what the writer sets in struct erofs_super_block.
type superblock struct {
	rootNid     uint16
	inodes      uint64
	buildTime   uint64
	blocks      uint32
	metaBlkaddr uint32
	uuid        [16]byte
	label       string
	incompat    uint32
	comprAlgs   uint16 // bitmap of algorithms with a record after the superblock
}

func (s *superblock) put(b []byte) {
	b = b[:superSize]
	le.PutUint32(b[0:], magic)
	b[12] = blockBits
	le.PutUint16(b[14:], s.rootNid)
	le.PutUint64(b[16:], s.inodes)
	le.PutUint64(b[24:], s.buildTime)
	le.PutUint32(b[36:], s.blocks)
	le.PutUint32(b[40:], s.metaBlkaddr)
	copy(b[48:64], s.uuid[:])
	copy(b[64:80], s.label)
	le.PutUint32(b[80:], s.incompat)
	le.PutUint16(b[84:], s.comprAlgs)
}

// inodeHeader is the part of an on-disk inode the writer fills in.
type inodeHeader struct {
	extended bool
	layout   uint8
	xattrLen int // bytes of the inline xattr area, header included
	mode     uint16
	nlink    uint32
	size     uint64
	u        uint32 // raw_blkaddr, compressed_blocks or rdev
	ino      uint32
	uid, gid uint32
	mtime    uint64 // extended inodes only; compact ones take the build time
}

func (h *inodeHeader) len() int {
	if h.extended {
		return extendedInodeSize
	}
	return compactInodeSize
}

func (h *inodeHeader) put(b []byte) {
	format := uint16(h.layout) << 1
	if h.extended {
		format |= 1
	}
	le.PutUint16(b[0:], format)
	if h.xattrLen > 0 {
		le.PutUint16(b[2:], uint16((h.xattrLen-xattrHeaderSize)/4+1))
	}
	le.PutUint16(b[4:], h.mode)
	if !h.extended {
		le.PutUint16(b[6:], uint16(h.nlink))
		le.PutUint32(b[8:], uint32(h.size))
		le.PutUint32(b[16:], h.u)
		le.PutUint32(b[20:], h.ino)
		le.PutUint16(b[24:], uint16(h.uid))
		le.PutUint16(b[26:], uint16(h.gid))
		return
	}
	le.PutUint64(b[8:], h.size)
	le.PutUint32(b[16:], h.u)
	le.PutUint32(b[20:], h.ino)
	le.PutUint32(b[24:], h.uid)
	le.PutUint32(b[28:], h.gid)
	le.PutUint64(b[32:], h.mtime)
	le.PutUint32(b[44:], h.nlink)
}

// putIndex writes one struct z_erofs_lcluster_index.
func putIndex(b []byte, ix lindex) {
	le.PutUint16(b[0:], ix.typ)
	if ix.typ == lclusterNonhead {
		le.PutUint16(b[4:], ix.delta0)
		le.PutUint16(b[6:], ix.delta1)
		return
	}
	le.PutUint32(b[4:], ix.blkaddr)
}

// lindex is one logical cluster's index entry. Extents start on lcluster
// boundaries, so a HEAD's or PLAIN's clusterofs is always 0.
type lindex struct {
	typ     uint16
	blkaddr uint32 // HEAD1 and PLAIN
	delta0  uint16 // NONHEAD: distance back to the HEAD, or d0Cblkcnt|blocks
	delta1  uint16 // NONHEAD: distance on to the next HEAD
}

// fullIndexOffset is where a compressed inode's map header starts, relative
// to the inode: after the inode and its xattrs, 8-byte aligned. The
// lcluster indexes follow 16 bytes later (Z_EROFS_FULL_INDEX_ALIGN: the
// 8-byte header and 8 reserved bytes).
func fullIndexOffset(inodeAndXattrs int) int { return (inodeAndXattrs + 7) &^ 7 }

func roundUp(n, to int) int { return (n + to - 1) / to * to }
