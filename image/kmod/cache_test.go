package kmod

import (
	"maps"
	"testing"
)

type mapCache struct {
	m    map[string][]byte
	hits int
}

func (c *mapCache) Get(k string) ([]byte, bool) {
	v, ok := c.m[k]
	if ok {
		c.hits++
	}
	return v, ok
}
func (c *mapCache) Put(k string, v []byte) { c.m[k] = v }

// TestBuildCached: an index built from the cache is the one built from the
// modules, a changed module misses, and an entry that does not decode is
// parsed again rather than trusted.
func TestBuildCached(t *testing.T) {
	files, builtin, builtinModinfo := testTree(t)
	want, err := Build(files, builtin, builtinModinfo, 0)
	if err != nil {
		t.Fatal(err)
	}
	c := &mapCache{m: map[string][]byte{}}
	for round := range 2 {
		got, err := BuildCached(files, builtin, builtinModinfo, 0, c)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.EqualFunc(got.Files(), want.Files(), func(a, b []byte) bool { return string(a) == string(b) }) {
			t.Errorf("round %d: the index differs from an uncached build", round)
		}
		if got.Info("a").Name != "a" || len(got.Info("b_mod").Exports) != 2 {
			t.Errorf("round %d: Info a %+v, b_mod %+v", round, got.Info("a"), got.Info("b_mod"))
		}
	}
	if c.hits != 1 || len(c.m) != 1 {
		t.Fatalf("want one entry read once, got %d entries, %d hits", len(c.m), c.hits)
	}
	// Another module's contents: another key.
	changed := maps.Clone(files)
	changed["kernel/lib/d.ko"] = fakeModule{modinfo: []string{"name=d"}, exports: []string{"d_fn", "d2"}, needs: []string{"c_fn"}}.elf()
	if _, err := BuildCached(changed, builtin, builtinModinfo, 0, c); err != nil {
		t.Fatal(err)
	}
	if len(c.m) != 2 {
		t.Errorf("a changed module reused the entry: %d entries", len(c.m))
	}
	// A corrupt entry is parsed again.
	for k := range c.m {
		c.m[k] = []byte("junk")
	}
	got, err := BuildCached(files, builtin, builtinModinfo, 0, c)
	if err != nil || string(got.Files()["modules.dep"]) != string(want.Files()["modules.dep"]) {
		t.Errorf("after a corrupt entry: %v", err)
	}
}
