// Package verity computes dm-verity hash trees and superblocks in Go, byte for
// byte as `veritysetup format` (cryptsetup) writes them for format version 1
// with a superblock and sha256, so the builder needs neither root, loop
// devices nor cryptsetup. It also verifies a data/hash pair against a root
// hash, renders the dm-verity table line for the initrd, and derives the
// partition UUIDs the Discoverable Partitions Specification ties to the root
// hash.
//
// Hash area layout (identical to veritysetup's):
//
//	block 0            superblock (512 bytes, zero-padded to one hash block)
//	block 1 …          top-most tree level (a single hash block)
//	…                  lower levels, each after the one above it
//	… end              level 0: the digests of the data blocks
//
// Each digest is sha256(salt || block); a hash block holds
// HashBlockSize/32 digests and is zero-padded. The root hash is the digest of
// the top-most hash block, or of the only data block when there is just one
// (then the tree has no levels and the hash area is the superblock alone).
package verity

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/bits"
)

// DefaultBlockSize is the data and hash block size used when Params leaves
// them zero; it matches veritysetup's default and the page size the kernel
// verifies in.
const DefaultBlockSize = 4096

// Algorithm is the only hash algorithm this package writes and verifies.
const Algorithm = "sha256"

// digestSize is the size of a sha256 digest, which is already a power of two,
// so a hash block holds exactly HashBlockSize/digestSize digests.
const digestSize = sha256.Size

// hashStartBlock is the hash block at which the tree begins: the superblock
// takes block 0 of the hash area.
const hashStartBlock = 1

// Block size bounds accepted by cryptsetup (512 B … 512 KiB, powers of two).
const (
	minBlockSize = 512
	maxBlockSize = 512 * 1024
	maxSaltSize  = 256
)

// Params are the inputs of a hash tree besides the data itself. The builder
// has no randomness: Salt and UUID come from DeriveSalt and DeriveUUID.
type Params struct {
	DataBlockSize uint32 // 0 means DefaultBlockSize
	HashBlockSize uint32 // 0 means DefaultBlockSize
	Salt          []byte // 1–256 bytes; drover uses 32 (DeriveSalt)
	UUID          [16]byte
}

// withDefaults fills zero block sizes and checks everything veritysetup
// would refuse.
func (p Params) withDefaults() (Params, error) {
	if p.DataBlockSize == 0 {
		p.DataBlockSize = DefaultBlockSize
	}
	if p.HashBlockSize == 0 {
		p.HashBlockSize = DefaultBlockSize
	}
	return p, p.validate()
}

func (p Params) validate() error {
	if err := p.validateBlockSizes(); err != nil {
		return err
	}
	if len(p.Salt) == 0 || len(p.Salt) > maxSaltSize {
		return fmt.Errorf("verity salt of %d bytes is invalid: pass 1 to %d bytes, normally DeriveSalt(contentDigest)",
			len(p.Salt), maxSaltSize)
	}
	if p.UUID == [16]byte{} {
		return errors.New("verity superblock UUID is all zero: set it, normally with DeriveUUID(contentDigest)")
	}
	return nil
}

// validateBlockSizes is the part of validate that also holds for trees made
// by others: veritysetup allows an empty salt and keeps a zero UUID.
func (p Params) validateBlockSizes() error {
	for _, b := range []struct {
		name string
		size uint32
	}{{"data block size", p.DataBlockSize}, {"hash block size", p.HashBlockSize}} {
		if b.size < minBlockSize || b.size > maxBlockSize || bits.OnesCount32(b.size) != 1 {
			return fmt.Errorf("verity %s %d is invalid: use a power of two between %d and %d (normally %d)",
				b.name, b.size, minBlockSize, maxBlockSize, DefaultBlockSize)
		}
	}
	return nil
}

// Level is one level of the hash tree inside the hash area.
type Level struct {
	Offset int64  // byte offset in the hash area
	Blocks uint64 // number of hash blocks
}

// Layout is where everything goes in the hash area for a given data size:
// the plan Write carries out, available before any data is read.
type Layout struct {
	DataBlockSize uint32
	HashBlockSize uint32
	DataBlocks    uint64
	// Levels[0] holds the digests of the data blocks; the last level is the
	// top-most and has a single block. Empty when there is one data block.
	Levels   []Level
	HashSize int64 // bytes of hash area, superblock included
}

// PlanLayout computes the hash area layout for dataSize bytes of data. The
// data size must be a positive multiple of the data block size; salt and
// UUID are not needed yet.
func PlanLayout(dataSize int64, p Params) (Layout, error) {
	p, _ = p.withDefaults()
	if err := p.validateBlockSizes(); err != nil {
		return Layout{}, err
	}
	if dataSize <= 0 || dataSize%int64(p.DataBlockSize) != 0 {
		return Layout{}, fmt.Errorf("verity data size %d is not a positive multiple of the data block size %d: pad the filesystem image to a whole block",
			dataSize, p.DataBlockSize)
	}
	return layoutFor(uint64(dataSize/int64(p.DataBlockSize)), p.DataBlockSize, p.HashBlockSize), nil
}

// layoutFor mirrors cryptsetup's hash_levels(): each level has
// ceil(items below / digests per block) blocks, levels are added until one
// block remains, and they are stored top-most first starting at block 1.
func layoutFor(dataBlocks uint64, dataBlockSize, hashBlockSize uint32) Layout {
	perBlock := uint64(hashBlockSize / digestSize)
	l := Layout{DataBlockSize: dataBlockSize, HashBlockSize: hashBlockSize, DataBlocks: dataBlocks}
	for n := dataBlocks; n > 1; {
		n = (n + perBlock - 1) / perBlock
		l.Levels = append(l.Levels, Level{Blocks: n})
	}
	pos := uint64(hashStartBlock)
	for i := len(l.Levels) - 1; i >= 0; i-- {
		l.Levels[i].Offset = int64(pos) * int64(hashBlockSize)
		pos += l.Levels[i].Blocks
	}
	l.HashSize = int64(pos) * int64(hashBlockSize)
	return l
}

// HashSize is the number of bytes Write will write for dataSize bytes of
// data, so a caller can size the verity partition before hashing. A dataSize
// that is not a whole number of data blocks is rounded up (Write itself
// refuses it). Salt and UUID do not affect the size and may still be unset.
// It returns 0 when the block sizes are invalid; Write reports why.
func HashSize(dataSize int64, p Params) int64 {
	p, _ = p.withDefaults()
	if p.validateBlockSizes() != nil || dataSize <= 0 {
		return 0
	}
	bs := int64(p.DataBlockSize)
	return layoutFor(uint64((dataSize+bs-1)/bs), p.DataBlockSize, p.HashBlockSize).HashSize
}

// Result describes a written hash area: everything the initrd's table line,
// the GPT and the manifest need.
type Result struct {
	RootHash      []byte
	HashSize      int64 // bytes written to the hash area, superblock included
	DataBlocks    uint64
	DataBlockSize uint32
	HashBlockSize uint32
	Salt          []byte
	UUID          [16]byte
}

// DataSectors is the length of the verity device in 512-byte sectors, the
// <length> of the device-mapper table line that precedes Table's output.
func (r *Result) DataSectors() uint64 {
	return r.DataBlocks * uint64(r.DataBlockSize) / 512
}

// Write hashes dataSize bytes of data and writes the superblock and the hash
// tree to hash, starting at offset 0. The whole tree is kept in memory while
// it is built (about 1/127 of the data size); data is read in large chunks by
// one worker per CPU.
func Write(data io.ReaderAt, dataSize int64, hash io.WriterAt, p Params) (*Result, error) {
	p, err := p.withDefaults()
	if err != nil {
		return nil, err
	}
	l, err := PlanLayout(dataSize, p)
	if err != nil {
		return nil, err
	}
	levels, root, err := buildTree(data, l, p.Salt)
	if err != nil {
		return nil, err
	}
	for i, lv := range l.Levels {
		if _, err := hash.WriteAt(levels[i], lv.Offset); err != nil {
			return nil, fmt.Errorf("writing verity hash level %d at hash offset %d: %w", i, lv.Offset, err)
		}
	}
	// The superblock goes last so that an interrupted write never leaves a
	// valid-looking superblock in front of an incomplete tree.
	sb := Superblock{
		Version:       1,
		HashType:      1,
		UUID:          p.UUID,
		Algorithm:     Algorithm,
		DataBlockSize: p.DataBlockSize,
		HashBlockSize: p.HashBlockSize,
		DataBlocks:    l.DataBlocks,
		Salt:          p.Salt,
	}
	raw, err := sb.MarshalBinary()
	if err != nil {
		return nil, err
	}
	block := make([]byte, p.HashBlockSize)
	copy(block, raw)
	if _, err := hash.WriteAt(block, 0); err != nil {
		return nil, fmt.Errorf("writing verity superblock: %w", err)
	}
	return &Result{
		RootHash:      root,
		HashSize:      l.HashSize,
		DataBlocks:    l.DataBlocks,
		DataBlockSize: p.DataBlockSize,
		HashBlockSize: p.HashBlockSize,
		Salt:          bytes.Clone(p.Salt),
		UUID:          p.UUID,
	}, nil
}

// buildTree computes every level (lowest first, each zero-padded to whole
// hash blocks) and the root hash.
func buildTree(data io.ReaderAt, l Layout, salt []byte) (levels [][]byte, root []byte, err error) {
	below, belowBlocks, belowSize := data, l.DataBlocks, int(l.DataBlockSize)
	for _, lv := range l.Levels {
		buf := make([]byte, lv.Blocks*uint64(l.HashBlockSize))
		// Only level 0 reads the data; higher levels read memory and cannot fail.
		if err := digestBlocks(below, belowBlocks, belowSize, salt, buf); err != nil {
			return nil, nil, err
		}
		levels = append(levels, buf)
		below, belowBlocks, belowSize = bytes.NewReader(buf), lv.Blocks, int(l.HashBlockSize)
	}
	root = make([]byte, digestSize)
	if err := digestBlocks(below, 1, belowSize, salt, root); err != nil {
		return nil, nil, fmt.Errorf("computing verity root hash: %w", err)
	}
	return levels, root, nil
}
