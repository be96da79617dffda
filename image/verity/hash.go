package verity

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
)

// chunkBytes is how much each worker reads at once: large enough for
// sequential throughput on disks and page cache, small enough that the
// workers' buffers stay a few MiB.
const chunkBytes = 4 << 20

// digestBlocks computes sha256(salt || block) for blocks 0…n-1 of r (each
// blockSize bytes) and stores the digests back to back in out, which must
// hold at least n*digestSize bytes. Because a hash block holds exactly
// blockSize/digestSize digests, back-to-back digests are also the on-disk
// layout of a tree level.
//
// Workers claim chunks in increasing order, so the reads stay close to
// sequential while every CPU hashes.
func digestBlocks(r io.ReaderAt, n uint64, blockSize int, salt []byte, out []byte) error {
	perChunk := uint64(max(1, chunkBytes/blockSize))
	chunks := (n + perChunk - 1) / perChunk
	workers := int(min(uint64(runtime.GOMAXPROCS(0)), chunks))

	var (
		next    atomic.Uint64
		failed  atomic.Bool
		errOnce sync.Once
		first   error
		wg      sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			buf := make([]byte, perChunk*uint64(blockSize))
			h := sha256.New()
			for !failed.Load() {
				c := next.Add(1) - 1
				if c >= chunks {
					return
				}
				start := c * perChunk
				count := min(perChunk, n-start)
				if err := digestChunk(r, start, count, blockSize, salt, buf, h, out); err != nil {
					errOnce.Do(func() { first = err })
					failed.Store(true)
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// digestChunk reads blocks start…start+count-1 into buf and hashes them.
func digestChunk(r io.ReaderAt, start, count uint64, blockSize int, salt, buf []byte, h hash.Hash, out []byte) error {
	off := int64(start) * int64(blockSize)
	b := buf[:count*uint64(blockSize)]
	nr, err := r.ReadAt(b, off)
	if nr < len(b) {
		// A ReaderAt may return io.EOF together with a full read; only a
		// short read is an error.
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		bad := start + uint64(nr)/uint64(blockSize)
		return fmt.Errorf("reading data block %d at offset %d: %w", bad, int64(bad)*int64(blockSize), err)
	}
	for i := range count {
		h.Reset()
		h.Write(salt)
		h.Write(b[i*uint64(blockSize) : (i+1)*uint64(blockSize)])
		d := (start + i) * digestSize
		h.Sum(out[d : d : d+digestSize])
	}
	return nil
}
