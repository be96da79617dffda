package build

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
	"os"
	"path/filepath"

	"github.com/drover-os/drover/image/cache"
)

// unpacked keeps each .deb's decompressed data.tar in the content-addressed
// cache, linked from the .deb's sha256 (the name of its cache file), so a
// warm build reads plain tar instead of decoding xz again. Entries are
// verified by the cache on lookup like any other.
type unpacked struct{ c *cache.Cache }

func (u unpacked) key(debPath string) string { return "deb data.tar " + filepath.Base(debPath) }

func (u unpacked) Get(debPath string) (io.ReadCloser, bool) {
	sha, ok, err := u.c.Lookup(u.key(debPath))
	if err != nil || !ok {
		return nil, false
	}
	f, err := os.Open(u.c.Path(sha))
	if err != nil {
		return nil, false
	}
	return f, true
}

func (u unpacked) Put(debPath string) (io.Writer, func(ok bool)) {
	f, err := os.CreateTemp(u.c.TempDir(), "data-tar-*")
	if err != nil {
		return io.Discard, func(bool) {}
	}
	h := sha256.New()
	return io.MultiWriter(f, h), func(ok bool) { u.commit(debPath, f, h, ok) }
}

// commit moves a complete copy into the cache; a failure only costs the
// next build the decompression again.
func (u unpacked) commit(debPath string, f *os.File, h hash.Hash, ok bool) {
	if err := f.Close(); err != nil || !ok {
		os.Remove(f.Name())
		return
	}
	sha := hex.EncodeToString(h.Sum(nil))
	if _, err := u.c.Commit(sha, f.Name()); err != nil {
		os.Remove(f.Name())
		return
	}
	_ = u.c.Link(u.key(debPath), sha)
}
