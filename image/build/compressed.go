package build

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"github.com/drover-os/drover/image/cache"
	"github.com/drover-os/drover/image/tree"
)

// keyed keeps derived data in the content-addressed cache, linked from a
// key that names everything it was derived from: the root filesystem's
// compressed files (image/erofsz: the file's sha256, the algorithm and the
// extent size) and the kernel modules' parsed contents (image/kmod), so a
// warm build does neither again. Entries are verified by the cache on
// lookup like any other; a miss or a failure only costs the work.
type keyed struct{ c *cache.Cache }

func (z keyed) Get(key string) ([]byte, bool) {
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

func (z keyed) Put(key string, value []byte) {
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

// kernelReads checks that the kernel kver, whose build configuration is
// config (/boot/config-<kver>, which Debian's kernel packages ship), can
// mount a root written with compression: erofs's decompression
// (CONFIG_EROFS_FS_ZIP, which brings LZ4) and for zstd
// CONFIG_EROFS_FS_ZIP_ZSTD (Linux 6.10 and later). A root the kernel
// cannot read would fail only at boot.
func kernelReads(config *tree.Node, kver, compression string) error {
	var want []string
	switch compression {
	case "", "none":
		return nil
	case "zstd":
		want = []string{"CONFIG_EROFS_FS_ZIP", "CONFIG_EROFS_FS_ZIP_ZSTD"}
	default:
		want = []string{"CONFIG_EROFS_FS_ZIP"}
	}
	if config == nil || config.Kind != tree.Regular {
		return fmt.Errorf("image.rootfs.compression %s: the kernel package ships no /boot/config-%s to tell whether %s reads a compressed erofs; use a kernel package that does, or compression none", compression, kver, kver)
	}
	set := map[string]bool{}
	for _, line := range strings.Split(string(config.Data), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && v == "y" {
			set[k] = true
		}
	}
	for _, sym := range want {
		if !set[sym] {
			return fmt.Errorf("image.rootfs.compression %s: kernel %s is built without %s=y, so it cannot mount the root; choose another compression (docs/recipes.md) or none", compression, kver, sym)
		}
	}
	return nil
}
