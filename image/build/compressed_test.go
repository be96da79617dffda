package build

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/drover-os/drover/image/cache"
	"github.com/drover-os/drover/image/erofsz"
	"github.com/drover-os/drover/image/recipe"
	"github.com/drover-os/drover/image/tree"
)

// TestCompressionsParse: every compression a recipe may name is one the
// writer knows, so validation and the build cannot disagree.
func TestCompressionsParse(t *testing.T) {
	for _, name := range recipe.Compressions {
		a, err := erofsz.ParseAlgorithm(name)
		if err != nil || a.String() != name {
			t.Errorf("%s: %v, %v", name, a, err)
		}
	}
}

func TestCompressedCache(t *testing.T) {
	c, err := cache.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	z := keyed{c}
	if _, ok := z.Get("k"); ok {
		t.Fatal("hit in an empty cache")
	}
	z.Put("k", []byte("encoded"))
	if v, ok := z.Get("k"); !ok || !bytes.Equal(v, []byte("encoded")) {
		t.Fatalf("Get after Put: %q %v", v, ok)
	}
	// A blob that no longer hashes to its name is a miss.
	sha, _, _ := c.Lookup("k")
	p := c.Path(sha)
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("damaged"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := z.Get("k"); ok {
		t.Error("a damaged entry was returned")
	}
	if _, ok := (keyed{}).Get("k"); ok {
		t.Error("no cache: a hit")
	}
	keyed{}.Put("k", nil) // no cache: nothing to do, no panic
}

func TestKernelReads(t *testing.T) {
	const trixie = "CONFIG_EROFS_FS=m\nCONFIG_EROFS_FS_ZIP=y\nCONFIG_EROFS_FS_ZIP_LZMA=y\nCONFIG_EROFS_FS_ZIP_ZSTD=y\n"
	const noZstd = "CONFIG_EROFS_FS=m\nCONFIG_EROFS_FS_ZIP=y\n# CONFIG_EROFS_FS_ZIP_ZSTD is not set\n"
	const noZip = "CONFIG_EROFS_FS=y\n# CONFIG_EROFS_FS_ZIP is not set\n"
	cfg := func(s string) *tree.Node {
		return &tree.Node{Path: "/boot/config-6.12", Kind: tree.Regular, Data: []byte(s)}
	}
	for _, c := range []struct {
		config      *tree.Node
		compression string
		want        string // "" for no error
	}{
		{cfg(trixie), "zstd", ""},
		{cfg(trixie), "lz4", ""},
		{cfg(noZstd), "lz4hc", ""},
		{cfg(noZstd), "zstd", "built without CONFIG_EROFS_FS_ZIP_ZSTD=y"},
		{cfg(noZip), "lz4", "built without CONFIG_EROFS_FS_ZIP=y"},
		{cfg(noZip), "none", ""},
		{nil, "none", ""},
		{nil, "lz4", "ships no /boot/config-6.12"},
	} {
		err := kernelReads(c.config, "6.12", c.compression)
		if (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.compression, err, c.want)
		}
	}
}
