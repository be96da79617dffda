package build

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"

	"github.com/drover-os/drover/image/cache"
)

// compressed keeps the root filesystem's compressed files in the
// content-addressed cache, linked from a key naming the file's sha256, the
// algorithm and the extent size (image/erofsz builds it), so a warm build
// does not compress again. Entries are verified by the cache on lookup
// like any other; a miss or a failure only costs the compression.
type compressed struct{ c *cache.Cache }

func (z compressed) Get(key string) ([]byte, bool) {
	if z.c == nil {
		return nil, false
	}
	sha, ok, err := z.c.Lookup(key)
	if err != nil || !ok {
		return nil, false
	}
	b, err := os.ReadFile(z.c.Path(sha))
	if err != nil {
		return nil, false
	}
	return b, true
}

func (z compressed) Put(key string, value []byte) {
	if z.c == nil {
		return
	}
	sum := sha256.Sum256(value)
	sha := hex.EncodeToString(sum[:])
	if _, err := z.c.Put(sha, bytes.NewReader(value)); err != nil {
		return
	}
	_ = z.c.Link(key, sha)
}
