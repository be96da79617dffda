package build

import (
	"bytes"
	"os"
	"testing"

	"github.com/drover-os/drover/image/cache"
	"github.com/drover-os/drover/image/erofsz"
	"github.com/drover-os/drover/image/recipe"
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
	z := compressed{c}
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
	if _, ok := (compressed{}).Get("k"); ok {
		t.Error("no cache: a hit")
	}
	compressed{}.Put("k", nil) // no cache: nothing to do, no panic
}
