package filehash

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSHA256(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	// FIPS 180-2's example.
	sum, n, err := SHA256(p)
	if err != nil || n != 3 || sum != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Errorf("got %s %d %v", sum, n, err)
	}
	if _, _, err := SHA256(p + ".missing"); err == nil {
		t.Error("a missing file has a digest")
	}
}
