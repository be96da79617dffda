// Package erofsz writes EROFS images whose regular files are compressed,
// in the kernel's compressed layout: per file a map header and one 8-byte
// index per 4 KiB of content (EROFS_INODE_COMPRESSED_FULL), pointing into
// pclusters of whole blocks that each hold one extent's LZ4 or zstd
// stream. It is hand-written from the on-disk format (the kernel's
// fs/erofs/erofs_fs.h and zmap.c) because no maintained Go library writes
// compressed EROFS: github.com/erofs/go-erofs writes uncompressed images
// only.
//
// Extents are fixed-size slices of a file (64 KiB by default) rather than
// mkfs.erofs's fixed-size compressed output, which Go's LZ4 and zstd
// libraries cannot produce; a pcluster rounds its stream up to a block.
// An extent that compression does not shrink by a block is stored as it
// is, and a file that does not shrink, or is at most a block, or starts
// like an already-compressed format, is stored uncompressed, its last
// partial block inline after its inode when it fits.
//
// The image is a pure function of its inputs: nodes in the caller's order,
// timestamps from the build time, compression single-threaded per extent.
package erofsz

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"math/bits"
	"runtime"
	"sync"

	"github.com/drover-os/drover/image/tree"
)

// Options are the identity of the filesystem and how files are stored.
type Options struct {
	BuildTime   int64 // seconds since 1970: every inode's mtime
	UUID        [16]byte
	Label       string // at most 16 bytes
	Compression Algorithm
	ExtentSize  int // bytes of content per pcluster; 0: DefaultExtentSize
	// Cache, when set, keeps compressed files by content across builds.
	Cache Cache
	// Workers compress in parallel; 0: GOMAXPROCS.
	Workers int
}

// Cache stores encoded files by a key that names the content's sha256 and
// everything else the encoding depends on. Workers call it concurrently.
// A value it returns is checked against the content before it is used.
type Cache interface {
	Get(key string) ([]byte, bool)
	Put(key string, value []byte)
}

// Stats describe a written image.
type Stats struct {
	Size            int64 // bytes, a multiple of BlockSize
	Inodes          int
	Files           int
	Dirs            int
	Symlinks        int
	Specials        int   // devices and fifos
	DataBytes       int64 // content of regular files
	Compressed      int   // regular files stored compressed
	CompressedBytes int64 // their content
	CompressedDisk  int64 // their pclusters' bytes on disk
	// CacheHits counts the files whose encoding came from the cache,
	// those found not worth compressing included.
	CacheHits int
}

// Write writes nodes (a tree's Walk order: sorted paths, the root first)
// to w as an EROFS image.
func Write(w io.Writer, nodes []*tree.Node, opts Options) (*Stats, error) {
	if len(opts.Label) > maxLabel {
		return nil, fmt.Errorf("writing erofs: label %q is longer than %d bytes", opts.Label, maxLabel)
	}
	if opts.BuildTime < 0 {
		return nil, fmt.Errorf("writing erofs: build time %d is before 1970", opts.BuildTime)
	}
	if opts.ExtentSize == 0 {
		opts.ExtentSize = DefaultExtentSize
	}
	if opts.ExtentSize < 2*BlockSize || opts.ExtentSize > MaxExtentSize || bits.OnesCount(uint(opts.ExtentSize)) != 1 {
		return nil, fmt.Errorf("writing erofs: extent size %d: want a power of two from %d to %d", opts.ExtentSize, 2*BlockSize, MaxExtentSize)
	}
	inodes, err := newInodes(nodes, uint64(opts.BuildTime))
	if err != nil {
		return nil, fmt.Errorf("writing erofs: %w", err)
	}
	st := &Stats{Inodes: len(inodes)}
	if opts.Compression != None {
		if st.CacheHits, err = compressAll(inodes, opts); err != nil {
			return nil, fmt.Errorf("writing erofs: %w", err)
		}
	}

	// Plan: the superblock and its compression record, the inodes from
	// the first 32-byte slot after them, then the data blocks.
	sb := superblock{inodes: uint64(len(inodes)), buildTime: uint64(opts.BuildTime), uuid: opts.UUID, label: opts.Label}
	var cfg []byte
	if opts.Compression != None {
		sb.incompat = featureZeroPadding | featureComprCfgs
		sb.comprAlgs = 1 << opts.Compression.diskID()
		cfg = comprRecord(opts.Compression, opts.ExtentSize)
	}
	metaEnd := place(inodes, superOffset+superSize+len(cfg))
	dataStart := uint32((metaEnd + BlockSize - 1) / BlockSize)
	end := assignBlocks(inodes, dataStart)
	if inodes[0].nid > math.MaxUint16 {
		return nil, fmt.Errorf("writing erofs: root nid %d does not fit the superblock", inodes[0].nid)
	}
	sb.rootNid = uint16(inodes[0].nid)
	sb.blocks = end

	meta := make([]byte, int(dataStart)*BlockSize)
	sb.put(meta[superOffset:])
	copy(meta[superOffset+superSize:], cfg)
	for _, in := range inodes {
		if err := putInode(meta, in); err != nil {
			return nil, fmt.Errorf("writing erofs: %s: %w", in.n.Path, err)
		}
		count(st, in)
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	if _, err := bw.Write(meta); err != nil {
		return nil, fmt.Errorf("writing erofs: %w", err)
	}
	for _, in := range inodes {
		if err := writeData(bw, in); err != nil {
			return nil, fmt.Errorf("writing erofs: %s: %w", in.n.Path, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return nil, fmt.Errorf("writing erofs: %w", err)
	}
	st.Size = int64(end) * BlockSize
	return st, nil
}

// comprRecord is the algorithm's record after the superblock: a 2-byte
// length, then struct z_erofs_lz4_cfgs or z_erofs_zstd_cfgs, padded to 4.
func comprRecord(a Algorithm, extentSize int) []byte {
	if a == Zstd {
		b := make([]byte, 8)
		le.PutUint16(b, 6)
		b[3] = uint8(bits.Len(uint(extentSize)) - 1 - 10) // windowlog - 10
		return b
	}
	b := make([]byte, 16)
	le.PutUint16(b, 14)
	le.PutUint16(b[2:], math.MaxUint16)               // max_distance: LZ4's own limit
	le.PutUint16(b[4:], uint16(extentSize/BlockSize)) // max_pclusterblks
	return b
}

func count(st *Stats, in *inode) {
	switch in.n.Kind {
	case tree.Regular:
		st.Files++
		st.DataBytes += int64(len(in.n.Data))
		if in.zenc != nil {
			st.Compressed++
			st.CompressedBytes += int64(len(in.n.Data))
			st.CompressedDisk += int64(in.blocks) * BlockSize
		}
	case tree.Dir:
		st.Dirs++
	case tree.Symlink:
		st.Symlinks++
	default:
		st.Specials++
	}
}

// putInode writes an inode, its xattrs and its inline tail or compression
// indexes into the metadata.
func putInode(meta []byte, in *inode) error {
	off := int(in.nid) * 32
	b := meta[off:]
	in.hdr.put(b)
	head := in.hdr.len() + copy(b[in.hdr.len():], in.xattrs)
	if in.zenc != nil {
		idx, err := in.zenc.indexes(in.blkaddr)
		if err != nil {
			return err
		}
		h := b[fullIndexOffset(head):]
		le.PutUint16(h[4:], adviseBigPcluster1) // h_advise; h_algorithmtype, h_clusterbits: 0
		h[6] = in.zalg | in.zalg<<4
		for i, ix := range idx {
			putIndex(h[mapHeaderSize+8+i*indexSize:], ix)
		}
		return nil
	}
	if in.tail > 0 {
		copy(b[head:head+in.tail], content(in)[in.blocks*BlockSize:])
	}
	return nil
}

// content is what a plain or inline inode stores: for a directory its
// entries, which need every nid.
func content(in *inode) []byte {
	if in.n.Kind == tree.Dir && in.content == nil {
		in.content = make([]byte, in.hdr.size)
		putDirents(in.content, in.dirents)
	}
	return in.content
}

var zeros [BlockSize]byte

// writeData writes an inode's data blocks: content up to its inline tail,
// zero-filled to the block, or each pcluster, its stream at the end.
func writeData(w io.Writer, in *inode) error {
	if in.blocks == 0 {
		return nil
	}
	if in.zenc == nil {
		c := content(in)[:min(len(content(in)), in.blocks*BlockSize)]
		if _, err := w.Write(c); err != nil {
			return err
		}
		_, err := w.Write(zeros[:in.blocks*BlockSize-len(c)])
		return err
	}
	for _, x := range in.zenc.Extents {
		pad := x.Blocks()*BlockSize - len(x.Data)
		lead, trail := pad, 0
		if x.Plain { // uncompressed lclusters: the bytes first
			lead, trail = 0, pad
		}
		if _, err := w.Write(zeros[:lead]); err != nil {
			return err
		}
		if _, err := w.Write(x.Data); err != nil {
			return err
		}
		if _, err := w.Write(zeros[:trail]); err != nil {
			return err
		}
	}
	return nil
}

// compressAll encodes every regular file worth compressing, in parallel,
// looking each up in the cache first. It returns the cache hits.
func compressAll(inodes []*inode, opts Options) (int, error) {
	type job struct {
		in  *inode
		key string
	}
	var jobs []job
	for _, in := range inodes {
		if in.n.Kind == tree.Regular && len(in.n.Data) > BlockSize && !precompressed(in.n.Data) {
			jobs = append(jobs, job{in: in})
		}
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var (
		mu    sync.Mutex
		first error
		hits  int
		wg    sync.WaitGroup
		next  = make(chan job)
	)
	for range workers {
		c, err := newCompressor(opts.Compression, opts.ExtentSize)
		if err != nil {
			return 0, err
		}
		wg.Go(func() {
			for j := range next {
				enc, hit, err := encodeCached(c, j.in.n.Data, opts)
				mu.Lock()
				if err != nil && first == nil {
					first = fmt.Errorf("%s: %w", j.in.n.Path, err)
				}
				if hit {
					hits++
				}
				mu.Unlock()
				j.in.zenc = enc
				if enc != nil {
					j.in.zalg = opts.Compression.diskID()
				}
			}
		})
	}
	for _, j := range jobs {
		next <- j
	}
	close(next)
	wg.Wait()
	return hits, first
}

// encodeCached encodes data, or decodes what the cache holds for it.
func encodeCached(c compressor, data []byte, opts Options) (*Encoded, bool, error) {
	if opts.Cache == nil {
		enc, err := encode(c, data, opts.ExtentSize)
		return enc, false, err
	}
	sum := sha256.Sum256(data)
	// v2: zstd at its best level (v1 was the default level).
	key := fmt.Sprintf("erofsz/v2 %s extent=%d sha256=%s", opts.Compression, opts.ExtentSize, hex.EncodeToString(sum[:]))
	if b, ok := opts.Cache.Get(key); ok {
		if enc, err := unmarshalEncoded(b, data, opts.ExtentSize); err == nil {
			return enc, true, nil
		}
	}
	enc, err := encode(c, data, opts.ExtentSize)
	if err != nil {
		return nil, false, err
	}
	opts.Cache.Put(key, marshalEncoded(enc))
	return enc, false, nil
}
