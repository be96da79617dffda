package readahead

import (
	"os"
	"path/filepath"
	"testing"
	"time"

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
	in, total, err := Resident(p)
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
	// gets further.
	var in, total int
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if in, total, err = Resident(p); err != nil {
			t.Fatal(err)
		}
		if in == total {
			return
		}
	}
	t.Fatalf("after Queue, %d of %d pages of %s are in the page cache", in, total, p)
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
	in, total, err := Resident(p)
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
