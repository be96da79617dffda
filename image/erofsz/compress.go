package erofsz

import (
	"bytes"
	"fmt"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Algorithm is how regular files are compressed. Each is one the kernel's
// erofs decompresses and a pure-Go library compresses.
type Algorithm uint8

// The algorithms. None writes every file uncompressed.
const (
	None Algorithm = iota
	LZ4
	LZ4HC
	Zstd
)

var algorithmNames = [...]string{None: "none", LZ4: "lz4", LZ4HC: "lz4hc", Zstd: "zstd"}

func (a Algorithm) String() string {
	if int(a) < len(algorithmNames) {
		return algorithmNames[a]
	}
	return fmt.Sprintf("algorithm(%d)", uint8(a))
}

// ParseAlgorithm reads an algorithm's name.
func ParseAlgorithm(s string) (Algorithm, error) {
	for a, name := range algorithmNames {
		if s == name {
			return Algorithm(a), nil
		}
	}
	return None, fmt.Errorf("compression %q: want one of none, lz4, lz4hc, zstd", s)
}

// diskID is the algorithm's number on disk (Z_EROFS_COMPRESSION_*): LZ4HC
// writes LZ4 streams, only more slowly and smaller.
func (a Algorithm) diskID() uint8 {
	if a == Zstd {
		return 3
	}
	return 0
}

// DefaultExtentSize is how much of a file one pcluster holds before
// compression: the unit the kernel reads and decompresses whole to serve
// any byte of it, so the price of a random 4 KiB read.
const DefaultExtentSize = 64 << 10

// MaxExtentSize keeps a pcluster within Z_EROFS_PCLUSTER_MAX_SIZE (1 MiB)
// even when it stays uncompressed, and the zstd window within the
// kernel's largest.
const MaxExtentSize = 1 << 20

// compressor compresses one extent. Implementations keep state between
// calls (hash tables, an encoder) and are used by one goroutine at a time.
type compressor interface {
	compress(dst, src []byte) ([]byte, error)
}

func newCompressor(a Algorithm, extentSize int) (compressor, error) {
	switch a {
	case LZ4:
		return &lz4Fast{}, nil
	case LZ4HC:
		return &lz4HC{c: lz4.CompressorHC{Level: lz4.Level9}}, nil
	case Zstd:
		// One frame per extent: single segment (the content size stands
		// for the window, which the superblock's record caps at the
		// extent size), no checksum (dm-verity covers every byte).
		// The best level: a root is written once and read on every
		// node, the cache keeps the encodings, and decompression
		// costs the same at every level.
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression), zstd.WithEncoderConcurrency(1),
			zstd.WithSingleSegment(true), zstd.WithEncoderCRC(false), zstd.WithWindowSize(extentSize))
		if err != nil {
			return nil, fmt.Errorf("zstd encoder: %w", err)
		}
		return zstdEnc{e}, nil
	}
	return nil, fmt.Errorf("no compressor for %s", a)
}

type lz4Fast struct{ c lz4.Compressor }

func (l *lz4Fast) compress(dst, src []byte) ([]byte, error) {
	// A destination of the full bound makes the library always emit a
	// stream, even for incompressible input, rather than return 0.
	dst = grow(dst, lz4.CompressBlockBound(len(src)))
	n, err := l.c.CompressBlock(src, dst)
	return dst[:n], err
}

type lz4HC struct{ c lz4.CompressorHC }

func (l *lz4HC) compress(dst, src []byte) ([]byte, error) {
	dst = grow(dst, lz4.CompressBlockBound(len(src)))
	n, err := l.c.CompressBlock(src, dst)
	return dst[:n], err
}

type zstdEnc struct{ e *zstd.Encoder }

func (z zstdEnc) compress(dst, src []byte) ([]byte, error) {
	return z.e.EncodeAll(src, dst[:0]), nil
}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

// Encoded is a regular file cut into extents, each compressed or kept as
// it is.
type Encoded struct {
	Extents []Extent
}

// Extent is ExtentSize bytes of a file (the last one: the rest), stored in
// a pcluster of whole blocks: Data, compressed, at the pcluster's end after
// zeros (erofs's zero padding, which tells the kernel where the stream
// starts), or, when compression would not save a block, the bytes as they
// are, one uncompressed lcluster per block.
type Extent struct {
	Len   int
	Plain bool
	Data  []byte
}

// Blocks is the extent's pcluster size in blocks.
func (e Extent) Blocks() int { return (len(e.Data) + BlockSize - 1) / BlockSize }

// Blocks is the file's size on disk in blocks.
func (e *Encoded) Blocks() int {
	n := 0
	for _, x := range e.Extents {
		n += x.Blocks()
	}
	return n
}

// encode cuts data into extents of extentSize bytes and compresses each.
// Extents stay plain unless compression saves a block, and the result is
// nil unless the whole file then takes fewer blocks than its full blocks
// uncompressed (its tail may go inline, beside its inode): reading a
// pcluster costs its blocks plus the decompression, so a stream as long
// as the data gains nothing.
func encode(c compressor, data []byte, extentSize int) (*Encoded, error) {
	if len(data) <= BlockSize {
		return nil, nil // one block either way; an inline tail is cheaper still
	}
	enc := &Encoded{}
	for off := 0; off < len(data); off += extentSize {
		src := data[off:min(off+extentSize, len(data))]
		z, err := c.compress(nil, src)
		if err != nil {
			return nil, fmt.Errorf("compressing bytes %d-%d: %w", off, off+len(src), err)
		}
		rawBlocks := (len(src) + BlockSize - 1) / BlockSize
		x := Extent{Len: len(src), Data: z}
		if x.Blocks() >= rawBlocks {
			x = Extent{Len: len(src), Plain: true, Data: src}
		}
		enc.Extents = append(enc.Extents, x)
	}
	if enc.Blocks() >= len(data)/BlockSize {
		return nil, nil
	}
	return enc, nil
}

// precompressed says whether data starts like a compressed format, whose
// extents would not shrink: gzip, xz, zstd, bzip2, PNG, JPEG, zip.
func precompressed(data []byte) bool {
	for _, m := range [][]byte{
		{0x1f, 0x8b}, {0xfd, '7', 'z', 'X', 'Z', 0}, {0x28, 0xb5, 0x2f, 0xfd}, {'B', 'Z', 'h'},
		{0x89, 'P', 'N', 'G'}, {0xff, 0xd8, 0xff}, {'P', 'K', 3, 4},
	} {
		if bytes.HasPrefix(data, m) {
			return true
		}
	}
	return false
}

// indexes are a compressed file's lcluster indexes, one per BlockSize of
// content, its pclusters starting at block first.
func (e *Encoded) indexes(first uint32) ([]lindex, error) {
	var out []lindex
	blk := first
	for i, x := range e.Extents {
		n := (x.Len + BlockSize - 1) / BlockSize
		switch {
		case x.Plain:
			for j := range n {
				out = append(out, lindex{typ: lclusterPlain, blkaddr: blk + uint32(j)})
			}
		case n == 1 && x.Blocks() != 1:
			// The block count lives in the first NONHEAD lcluster; an
			// extent of one lcluster has none and is one block.
			return nil, fmt.Errorf("extent %d: %d bytes in %d blocks", i, x.Len, x.Blocks())
		default:
			out = append(out, lindex{typ: lclusterHead1, blkaddr: blk})
			for j := 1; j < n; j++ {
				d0 := uint16(j)
				if j == 1 {
					d0 = d0Cblkcnt | uint16(x.Blocks())
				}
				out = append(out, lindex{typ: lclusterNonhead, delta0: d0, delta1: uint16(n - j)})
			}
		}
		blk += uint32(x.Blocks())
	}
	return out, nil
}
