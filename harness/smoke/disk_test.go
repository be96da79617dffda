package smoke

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestSparseCopy: the copy has the same bytes, and zero blocks take no
// space on the host.
func TestSparseCopy(t *testing.T) {
	src := make([]byte, 8<<20+123)
	copy(src[3<<20:], "superblock")
	copy(src[len(src)-5:], "tail!")
	dst := filepath.Join(t.TempDir(), "var.img")
	if err := sparseCopy(dst, bytes.NewReader(src), int64(len(src))); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(dst)
	if !bytes.Equal(got, src) {
		t.Fatalf("copy differs (%d bytes, want %d)", len(got), len(src))
	}
	fi, _ := os.Stat(dst)
	if used := fi.Sys().(*syscall.Stat_t).Blocks * 512; used > 3<<20 {
		t.Errorf("the copy takes %d bytes on disk for 2 MiB of data", used)
	}
	zeros := make([]byte, 4<<20)
	if err := sparseCopy(dst, bytes.NewReader(zeros), int64(len(zeros))); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(dst); fi.Size() != int64(len(zeros)) {
		t.Errorf("an all-zero copy is %d bytes, want %d", fi.Size(), len(zeros))
	}
}
