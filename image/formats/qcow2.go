package formats

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

const (
	// 64 KiB clusters: qemu-img's default, and what ECS import documents.
	clusterBits   = 16
	clusterSize   = 1 << clusterBits
	l2Entries     = clusterSize / 8
	refcountOrder = 4 // 16-bit refcounts, the only width qcow2 version 2 readers know
	refsPerBlock  = clusterSize * 8 / (1 << refcountOrder)
	// headerLength is the version 3 header without the optional
	// compression_type field: absent means zlib (deflate).
	headerLength = 104

	l2Copied     = uint64(1) << 63 // refcount is exactly one
	l2Compressed = uint64(1) << 62
	// Compressed cluster descriptor: x = 62 - (cluster_bits - 8) bits of
	// host byte offset, then the count of additional 512-byte sectors.
	compressedOffsetBits = 62 - (clusterBits - 8)
)

// WriteQCOW2 writes the size-byte raw image src to dst as a qcow2 version 3
// image (compat 1.1) with 64 KiB clusters. All-zero clusters stay
// unallocated; with compress, every other cluster is stored deflated when
// that makes it smaller, else stored as is. dst must be positioned at its
// start and be empty; WriteQCOW2 writes the data clusters first and the
// mapping and refcount tables after them, then seeks back to write the
// header, and leaves dst positioned at the end.
func WriteQCOW2(dst io.WriteSeeker, src io.ReaderAt, size int64, compress bool) error {
	if size <= 0 || size%512 != 0 {
		return fmt.Errorf("writing qcow2: image size %d is not a positive multiple of 512 bytes", size)
	}
	if pos, err := dst.Seek(0, io.SeekCurrent); err != nil || pos != 0 {
		return fmt.Errorf("writing qcow2: the output must be positioned at its start (at %d, %v)", pos, err)
	}
	w := &qcowWriter{dst: dst}
	guestClusters := (size + clusterSize - 1) / clusterSize
	w.l2 = make([]uint64, guestClusters)

	// Cluster 0 is the header, written last once the table offsets are known.
	if err := w.write(make([]byte, clusterSize)); err != nil {
		return err
	}
	w.ref(0, 1)
	err := compressClusters(src, size, compress, func(index int64, data []byte, compressed bool) error {
		if compressed {
			return w.compressedCluster(index, data)
		}
		return w.rawCluster(index, data)
	})
	if err != nil {
		return fmt.Errorf("writing qcow2: %w", err)
	}
	if err := w.writeTables(size); err != nil {
		return fmt.Errorf("writing qcow2: %w", err)
	}
	return nil
}

// qcowWriter lays host clusters out sequentially and counts references the
// way `qemu-img check` does.
type qcowWriter struct {
	dst  io.WriteSeeker
	pos  int64    // next host byte offset
	l2   []uint64 // L2 entry of every guest cluster
	refs []uint32 // refcount of every host cluster
}

func (w *qcowWriter) write(b []byte) error {
	if _, err := w.dst.Write(b); err != nil {
		return fmt.Errorf("writing %d bytes at offset %d: %w", len(b), w.pos, err)
	}
	w.pos += int64(len(b))
	return nil
}

// ref adds n references to every host cluster overlapping [off, off+length).
func (w *qcowWriter) ref(off, length int64) {
	for c := off / clusterSize; c <= (off+length-1)/clusterSize; c++ {
		for int64(len(w.refs)) <= c {
			w.refs = append(w.refs, 0)
		}
		w.refs[c]++
	}
}

// align pads the output to the next cluster boundary.
func (w *qcowWriter) align() error {
	if pad := (clusterSize - w.pos%clusterSize) % clusterSize; pad > 0 {
		return w.write(make([]byte, pad))
	}
	return nil
}

func (w *qcowWriter) rawCluster(index int64, data []byte) error {
	if err := w.align(); err != nil {
		return err
	}
	w.l2[index] = l2Copied | uint64(w.pos)
	w.ref(w.pos, clusterSize)
	return w.write(data)
}

// compressedCluster packs deflated data right after the previous one,
// sharing host clusters, as qemu-img convert -c does.
func (w *qcowWriter) compressedCluster(index int64, data []byte) error {
	off := w.pos
	// The descriptor counts the 512-byte sectors the data touches beyond
	// the first; readers fetch whole sectors from off rounded down.
	extra := (off+int64(len(data))-1)/512 - off/512
	w.l2[index] = l2Compressed | uint64(extra)<<compressedOffsetBits | uint64(off)
	w.ref(off, int64(len(data)))
	return w.write(data)
}

// writeTables appends the L2 tables, the L1 table, the refcount table and
// blocks, then writes the header into cluster 0.
func (w *qcowWriter) writeTables(size int64) error {
	if err := w.align(); err != nil {
		return err
	}
	l1 := make([]uint64, (int64(len(w.l2))+l2Entries-1)/l2Entries)
	for i := range l1 {
		table := w.l2[i*l2Entries : min((i+1)*l2Entries, len(w.l2))]
		if allZero(table) {
			continue // no L2 table: the whole range reads as zeros
		}
		l1[i] = l2Copied | uint64(w.pos)
		w.ref(w.pos, clusterSize)
		if err := w.write(tableBytes(table, clusterSize)); err != nil {
			return err
		}
	}
	l1Offset := w.pos
	l1Bytes := tableBytes(l1, roundUp(int64(len(l1))*8, clusterSize))
	w.ref(w.pos, int64(len(l1Bytes)))
	if err := w.write(l1Bytes); err != nil {
		return err
	}

	// The refcount structures must count themselves: grow the table and
	// block counts until they cover every cluster including their own.
	used := w.pos / clusterSize
	tableClusters, blocks := int64(0), int64(0)
	for {
		total := used + tableClusters + blocks
		b := (total + refsPerBlock - 1) / refsPerBlock
		t := (b*8 + clusterSize - 1) / clusterSize
		if b == blocks && t == tableClusters {
			break
		}
		blocks, tableClusters = b, t
	}
	for c, n := range w.refs {
		if n == 0 || n > 0xFFFF {
			return fmt.Errorf("internal error: host cluster %d has refcount %d", c, n)
		}
	}
	rtOffset := w.pos
	w.ref(rtOffset, (tableClusters+blocks)*clusterSize)
	rt := make([]uint64, tableClusters*clusterSize/8)
	for i := range blocks {
		rt[i] = uint64(rtOffset + (tableClusters+i)*clusterSize)
	}
	if err := w.write(tableBytes(rt, tableClusters*clusterSize)); err != nil {
		return err
	}
	block := make([]byte, clusterSize)
	for i := range blocks {
		clear(block)
		for j := range int64(refsPerBlock) {
			c := i*refsPerBlock + j
			if c >= int64(len(w.refs)) {
				break
			}
			binary.BigEndian.PutUint16(block[2*j:], uint16(w.refs[c]))
		}
		if err := w.write(block); err != nil {
			return err
		}
	}

	header := qcowHeader(size, len(l1), l1Offset, rtOffset, tableClusters)
	if _, err := w.dst.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("seeking back to the header: %w", err)
	}
	if _, err := w.dst.Write(header); err != nil {
		return fmt.Errorf("writing the header: %w", err)
	}
	if _, err := w.dst.Seek(w.pos, io.SeekStart); err != nil {
		return fmt.Errorf("seeking to the end: %w", err)
	}
	return nil
}

func qcowHeader(size int64, l1Size int, l1Offset, rtOffset, rtClusters int64) []byte {
	h := make([]byte, headerLength+8) // + the end-of-extensions marker (zeros)
	copy(h[0:4], "QFI\xfb")
	be := binary.BigEndian
	be.PutUint32(h[4:], 3)
	be.PutUint32(h[20:], clusterBits)
	be.PutUint64(h[24:], uint64(size))
	be.PutUint32(h[36:], uint32(l1Size))
	be.PutUint64(h[40:], uint64(l1Offset))
	be.PutUint64(h[48:], uint64(rtOffset))
	be.PutUint32(h[56:], uint32(rtClusters))
	be.PutUint32(h[96:], refcountOrder)
	be.PutUint32(h[100:], headerLength)
	return h
}

func tableBytes(entries []uint64, size int64) []byte {
	b := make([]byte, size)
	for i, e := range entries {
		binary.BigEndian.PutUint64(b[8*i:], e)
	}
	return b
}

func allZero[T comparable](s []T) bool {
	var zero T
	for _, v := range s {
		if v != zero {
			return false
		}
	}
	return true
}

func roundUp(n, to int64) int64 { return (n + to - 1) / to * to }

var zeroCluster = make([]byte, clusterSize)

func isZero(b []byte) bool { return bytes.Equal(b, zeroCluster[:len(b)]) }

var errShortRead = errors.New("the raw image is shorter than its size")
