package readahead

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// coldFile writes a file larger than any readahead window a host has
// (read_ahead_kb of 8 MiB is common on cloud disks) on a disk-backed
// filesystem (the package directory, not a possibly tmpfs TMPDIR), and
// drops its pages from the cache.
func coldFile(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp(".", "readahead-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := filepath.Join(dir, "blob")
	data := make([]byte, 64<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	drop(t, p)
	return p
}

// drop writes the file's pages back and evicts them (POSIX_FADV_DONTNEED
// drops clean pages only, hence the fsync).
func drop(t *testing.T, p string) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	in, total, err := resident(p)
	if err != nil {
		t.Fatal(err)
	}
	if in > total/10 {
		t.Fatalf("%s: %d of %d pages still cached after POSIX_FADV_DONTNEED: the test needs a disk-backed directory", p, in, total)
	}
}

func TestQueueReadsTheWholeFile(t *testing.T) {
	p := coldFile(t)
	n, err := Queue(p)
	if err != nil {
		t.Fatal(err)
	}
	if n != 64<<20 {
		t.Fatalf("Queue returned size %d, want %d", n, 64<<20)
	}
	// The reads complete in the kernel's time; a whole-file advice clamped
	// to the readahead window stops at its first megabytes and never
	// gets further. Pages are counted if seen in the page cache at any
	// sample: where the page cache is small (a sandbox's memory cgroup
	// held 34 MB of it), pages read early are reclaimed while later ones
	// are still being read, and one snapshot missed 14 of 16384 that had
	// been read.
	//
	// Readahead is advice: the kernel may drop part of it (its page
	// allocations do not retry, a busy device may fail a readahead bio),
	// and a CI machine once never read 16 pages (one 64 KiB folio) of
	// 16384. What Queue promises, and what its bugs would break, is that
	// every 128 KiB advice is issued: so every chunk must show pages in
	// the cache, and all but a few pages must be seen. The clamped advice
	// leaves all but the first chunks empty; a loop that stops one chunk
	// early leaves the last one empty; a skipping stride, every other one.
	const pagesPerChunk = Chunk / 4096
	var seen []bool
	complete := func() (in int, emptyChunk int) {
		emptyChunk = -1
		for i, ok := range seen {
			if ok {
				in++
			}
			if i%pagesPerChunk == 0 && !slices.Contains(seen[i:min(i+pagesPerChunk, len(seen))], true) && emptyChunk < 0 {
				emptyChunk = i / pagesPerChunk
			}
		}
		return in, emptyChunk
	}
	in, empty := 0, 0
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		now, err := residentPages(p)
		if err != nil {
			t.Fatal(err)
		}
		if seen == nil {
			seen = make([]bool, len(now))
		}
		for i, r := range now {
			seen[i] = seen[i] || r
		}
		if in, empty = complete(); in == len(seen) {
			return
		}
	}
	if empty >= 0 || in < len(seen)*99/100 {
		t.Fatalf("after Queue, %d of %d pages of %s were ever seen in the page cache; first chunk of %d KiB with none: %d (-1: none)",
			in, len(seen), p, Chunk>>10, empty)
	}
	t.Logf("after Queue, %d of %d pages were seen in the page cache, some in every %d KiB chunk: the kernel dropped part of the advice (the first missing: page %d)",
		in, len(seen), Chunk>>10, slices.Index(seen, false))
}

func TestReadReadsTheWholeFile(t *testing.T) {
	p := coldFile(t)
	n, err := Read(p)
	if err != nil {
		t.Fatal(err)
	}
	if n != 64<<20 {
		t.Fatalf("Read returned %d bytes, want %d", n, 64<<20)
	}
	in, total, err := resident(p)
	if err != nil {
		t.Fatal(err)
	}
	if in != total {
		t.Fatalf("after Read, %d of %d pages of %s are in the page cache", in, total, p)
	}
}

func TestMissingFile(t *testing.T) {
	if _, err := Queue("/nonexistent/drover"); !os.IsNotExist(err) {
		t.Fatalf("Queue of a missing file: %v, want not-exist", err)
	}
	if _, err := Read("/nonexistent/drover"); !os.IsNotExist(err) {
		t.Fatalf("Read of a missing file: %v, want not-exist", err)
	}
}

// resident returns how many of path's pages are in the page cache and how
// many it has.
func resident(path string) (in, total int, err error) {
	pages, err := residentPages(path)
	for _, r := range pages {
		if r {
			in++
		}
	}
	return in, len(pages), err
}

// residentPages says of each of path's pages whether it is in the page
// cache (mincore(2) over a read-only mapping).
func residentPages(path string) ([]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return nil, err
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapping %s: %w", path, err)
	}
	defer unix.Munmap(m)
	page := os.Getpagesize()
	vec := make([]byte, (len(m)+page-1)/page)
	// x/sys/unix has no mincore wrapper on Linux.
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		return nil, fmt.Errorf("mincore %s: %w", path, e)
	}
	pages := make([]bool, len(vec))
	for i, v := range vec {
		pages[i] = v&1 != 0
	}
	return pages, nil
}
