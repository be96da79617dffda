// Package readahead brings a file's pages into the page cache before the
// process that needs them runs. On a drover node every first read of the
// root filesystem is checked by dm-verity (read, then hashed); a binary that
// faults its pages in one by one waits for each. Read ahead, the same work
// runs earlier, in the kernel's workers, off the critical path.
//
// One call of POSIX_FADV_WILLNEED over a whole file is not enough: the
// kernel clamps it to the device's readahead size (mm/readahead.c,
// force_page_cache_ra: at most max(io_pages, ra_pages) pages from the
// offset), so it reads the first 128 KiB of a binary on a default device and
// returns as if it had queued all of it. Both functions here cover the
// whole file.
package readahead

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Chunk is the length of each POSIX_FADV_WILLNEED that Queue issues: the
// kernel's default readahead size (VM_READAHEAD_PAGES, 128 KiB), the least
// any block device reads per advice unless its read_ahead_kb was set
// lower.
const Chunk = 128 << 10

// Queue starts reading the whole of path into the page cache and returns
// without waiting: the reads continue after the caller execs or exits
// (drover-init uses it just before systemd). It returns the file's size.
func Queue(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	for off := int64(0); off < fi.Size(); off += Chunk {
		if err := unix.Fadvise(int(f.Fd()), off, Chunk, unix.FADV_WILLNEED); err != nil {
			return 0, fmt.Errorf("read-ahead of %s at %d: %w", path, off, err)
		}
	}
	return fi.Size(), nil
}

// Read reads path to its end and discards the bytes, so its pages are in
// the page cache when it returns. Unlike Queue it paces itself: only its
// current read is in flight, so a process faulting in its own pages
// meanwhile does not queue behind a whole binary's I/O. It returns the
// bytes read.
func Read(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	var n int64
	for {
		m, err := f.Read(buf)
		n += int64(m)
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("reading %s ahead: %w", path, err)
		}
	}
}
