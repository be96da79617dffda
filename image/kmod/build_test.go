package kmod

import (
	"bytes"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// testTree is a small kernel: a uses b (twice over) and d, both of which use
// c; e is outside modules.order. The expected outputs below were worked out
// by hand from depmod's algorithm, not taken from this package.
func testTree(t *testing.T) (files map[string][]byte, builtin, builtinModinfo []byte) {
	t.Helper()
	mods := map[string]fakeModule{
		"kernel/drivers/a.ko.xz": {
			modinfo: []string{"name=a", "depends=b_mod,d", "alias=pci:v00001AF4d00001001sv*sd*bc*sc*i*", "alias=fs-a", "softdep=pre: e post: ext4"},
			needs:   []string{"d_fn", "b_fn", "printk", "b_other"},
		},
		"kernel/drivers/b-mod.ko.zst": {
			modinfo: []string{"name=b_mod", "alias=char-major-10-237", "alias=devname:bee", "softdep=post: nosuch"},
			exports: []string{"b_fn", "b_other"},
			needs:   []string{"c_fn"},
		},
		"kernel/lib/c.ko.gz": {
			modinfo: []string{"name=c", "weakdep=zstd"},
			exports: []string{"c_fn"},
		},
		"kernel/lib/d.ko": {
			modinfo: []string{"name=d", "alias=block-major-8-*", "alias=devname:dee"},
			exports: []string{"d_fn"},
			needs:   []string{"c_fn"},
		},
		"extra/e.ko.xz": {
			modinfo: []string{"name=e", "alias=foo-bar*", "alias=[unbalanced"},
			exports: []string{"e_fn"},
		},
	}
	files = map[string][]byte{
		"modules.order": []byte("kernel/drivers/a.ko\nkernel/drivers/b-mod.ko\nkernel/lib/c.ko\nkernel/lib/gone.ko\nkernel/lib/d.ko\n"),
		"kernel/README": []byte("not a module"),
		"build/x.ko":    []byte("headers, not a module"),
	}
	for p, fm := range mods {
		files[p] = compress(t, p, fm.elf())
	}
	builtin = []byte("kernel/fs/ext4/ext4.ko\nkernel/fs/jbd2/jbd2.ko\n")
	builtinModinfo = []byte("ext4.alias=fs-ext4\x00ext4.softdep=pre: crc32c\x00jbd2.license=GPL\x00ext4.alias=ext3\x00")
	return files, builtin, builtinModinfo
}

func TestBuildFiles(t *testing.T) {
	files, builtin, builtinModinfo := testTree(t)
	idx, err := Build(files, builtin, builtinModinfo, 3)
	if err != nil {
		t.Fatal(err)
	}
	out := idx.Files()

	// Module order: modules.order, then e. Topological numbering (users
	// first, LIFO of ready modules seeded a, e): e=0 a=1 b=2 d=3 c=4, so a's
	// line lists b before d although a met d's symbol first.
	wantText := map[string]string{
		"modules.dep": "kernel/drivers/a.ko.xz: kernel/drivers/b-mod.ko.zst kernel/lib/d.ko kernel/lib/c.ko.gz\n" +
			"kernel/drivers/b-mod.ko.zst: kernel/lib/c.ko.gz\n" +
			"kernel/lib/c.ko.gz:\n" +
			"kernel/lib/d.ko: kernel/lib/c.ko.gz\n" +
			"extra/e.ko.xz:\n",
		"modules.alias": "# Aliases extracted from modules themselves.\n" +
			"alias pci:v00001AF4d00001001sv*sd*bc*sc*i* a\n" +
			"alias fs-a a\n" +
			"alias char-major-10-237 b_mod\n" +
			"alias devname:bee b_mod\n" +
			"alias block-major-8-* d\n" +
			"alias devname:dee d\n" +
			"alias foo-bar* e\n" +
			"alias [unbalanced e\n",
		"modules.softdep": "# Soft dependencies extracted from modules themselves.\n" +
			"softdep a pre: e post: ext4\n" +
			"softdep b_mod post: nosuch\n",
		"modules.weakdep": "# Weak dependencies extracted from modules themselves.\n" +
			"weakdep c zstd\n",
		// d's block-major-8-* has no minor, so only b_mod has a node.
		"modules.devname": "# Device nodes to trigger on-demand module loading.\n" +
			"b_mod bee c10:237\n",
	}
	for name, want := range wantText {
		if got := string(out[name]); got != want {
			t.Errorf("%s:\n%s\nwant:\n%s", name, got, want)
		}
	}

	// modules.symbols: one line per exported symbol, in libkmod hash order.
	syms := strings.Split(strings.TrimSpace(string(out["modules.symbols"])), "\n")
	if syms[0] != "# Aliases for symbols, used by symbol_request()." {
		t.Errorf("modules.symbols header %q", syms[0])
	}
	slices.Sort(syms[1:])
	wantSyms := []string{"alias symbol:b_fn b_mod", "alias symbol:b_other b_mod", "alias symbol:c_fn c", "alias symbol:d_fn d", "alias symbol:e_fn e"}
	if !reflect.DeepEqual(syms[1:], wantSyms) {
		t.Errorf("modules.symbols lines %q, want %q", syms[1:], wantSyms)
	}

	wantBin := map[string]map[string][]trieValue{
		"modules.dep.bin": {
			"a":     {{0, "kernel/drivers/a.ko.xz: kernel/drivers/b-mod.ko.zst kernel/lib/d.ko kernel/lib/c.ko.gz"}},
			"b_mod": {{1, "kernel/drivers/b-mod.ko.zst: kernel/lib/c.ko.gz"}},
			"c":     {{2, "kernel/lib/c.ko.gz:"}},
			"d":     {{3, "kernel/lib/d.ko: kernel/lib/c.ko.gz"}},
			"e":     {{4, "extra/e.ko.xz:"}},
		},
		"modules.alias.bin": {
			"pci:v00001AF4d00001001sv*sd*bc*sc*i*": {{0, "a"}},
			"fs_a":                                 {{0, "a"}},
			"char_major_10_237":                    {{1, "b_mod"}},
			"devname:bee":                          {{1, "b_mod"}},
			"block_major_8_*":                      {{3, "d"}},
			"devname:dee":                          {{3, "d"}},
			"foo_bar*":                             {{4, "e"}},
		},
		"modules.symbols.bin": {
			"symbol:b_fn": {{1, "b_mod"}}, "symbol:b_other": {{1, "b_mod"}},
			"symbol:c_fn": {{2, "c"}}, "symbol:d_fn": {{3, "d"}}, "symbol:e_fn": {{4, "e"}},
		},
		"modules.builtin.bin": {"ext4": {{0, ""}}, "jbd2": {{0, ""}}},
		// ext4's strings come in two runs; like kmod 30, each run counts
		// as the module and brings the aliases of the first run only.
		"modules.builtin.alias.bin": {"fs_ext4": {{0, "ext4"}, {0, "ext4"}}},
	}
	for name, want := range wantBin {
		got, err := decodeIndex(out[name])
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %v\nwant %v", name, got, want)
		}
	}

	wantNames := append(slices.Collect(maps.Keys(wantText)), "modules.symbols")
	wantNames = append(wantNames, slices.Collect(maps.Keys(wantBin))...)
	if got := slices.Sorted(maps.Keys(out)); !reflect.DeepEqual(got, slices.Sorted(slices.Values(wantNames))) {
		t.Errorf("Files() names %q", got)
	}

	// The caller owns what Files returns.
	out["modules.dep"][0] = 'X'
	if idx.Files()["modules.dep"][0] == 'X' {
		t.Error("Files() shares its buffers")
	}
}

func TestBuildDeterministic(t *testing.T) {
	files, builtin, builtinModinfo := testTree(t)
	var first map[string][]byte
	for _, parallel := range []int{1, 2, 8, 0} {
		idx, err := Build(files, builtin, builtinModinfo, parallel)
		if err != nil {
			t.Fatal(err)
		}
		out := idx.Files()
		if first == nil {
			first = out
			continue
		}
		for name, data := range out {
			if !bytes.Equal(data, first[name]) {
				t.Errorf("parallel=%d: %s differs", parallel, name)
			}
		}
	}
}

func TestBuildWithoutBuiltinFiles(t *testing.T) {
	files, _, _ := testTree(t)
	idx, err := Build(files, nil, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	out := idx.Files()
	// depmod leaves these files empty when the inputs are missing.
	for _, name := range []string{"modules.builtin.bin", "modules.builtin.alias.bin"} {
		if data, ok := out[name]; !ok || len(data) != 0 {
			t.Errorf("%s = %d bytes (present %v), want an empty file", name, len(data), ok)
		}
	}
}

func TestBuildDuplicateNamePrefersUpdates(t *testing.T) {
	files := map[string][]byte{
		"kernel/fs/x.ko":    fakeModule{modinfo: []string{"name=x", "alias=from-kernel"}}.elf(),
		"updates/dkms/x.ko": fakeModule{modinfo: []string{"name=x", "alias=from-updates"}}.elf(),
		"kernel/a/y.ko":     fakeModule{modinfo: []string{"name=y", "alias=first"}}.elf(),
		"kernel/b/y.ko":     fakeModule{modinfo: []string{"name=y", "alias=second"}}.elf(),
	}
	idx, err := Build(files, nil, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := "kernel/a/y.ko:\nupdates/dkms/x.ko:\n"
	if got := string(idx.Files()["modules.dep"]); got != want {
		t.Errorf("modules.dep:\n%s\nwant:\n%s", got, want)
	}
}

func TestBuildErrors(t *testing.T) {
	cycle := map[string][]byte{
		"kernel/p.ko": fakeModule{exports: []string{"p_fn"}, needs: []string{"q_fn"}}.elf(),
		"kernel/q.ko": fakeModule{exports: []string{"q_fn"}, needs: []string{"p_fn"}}.elf(),
		"kernel/r.ko": fakeModule{needs: []string{"p_fn"}}.elf(),
	}
	for name, tc := range map[string]struct {
		files map[string][]byte
		want  string
	}{
		"cycle":      {cycle, "2 modules are in dependency cycles (p q)"},
		"corrupt":    {map[string][]byte{"kernel/bad.ko.xz": []byte(magicXZ + "junk")}, "reading module kernel/bad.ko.xz"},
		"non-ascii":  {map[string][]byte{"kernel/z.ko": fakeModule{modinfo: []string{"alias=caf\xc3\xa9"}}.elf()}, "7-bit ASCII"},
		"not an elf": {map[string][]byte{"kernel/t.ko": []byte("text")}, "reading module kernel/t.ko: not a kernel module"},
		"unclean":    {map[string][]byte{"./kernel/t.ko": fakeModule{}.elf()}, `module path "./kernel/t.ko" is not a clean path`},
		"absolute":   {map[string][]byte{"/lib/modules/6.12/kernel/t.ko": fakeModule{}.elf()}, "not a clean path relative"},
		// a remove glob took the module another one's depends= names
		"depends": {map[string][]byte{"kernel/u.ko": fakeModule{modinfo: []string{"name=u", "depends=target-core-mod"}}.elf()},
			"module kernel/u.ko depends on target_core_mod (its modinfo depends=), which the image does not have"},
	} {
		if _, err := Build(tc.files, nil, nil, 0); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Build error %v, want it to contain %q", name, err, tc.want)
		}
	}
}

func TestIsModulePath(t *testing.T) {
	for p, want := range map[string]bool{
		"kernel/fs/ext4/ext4.ko":      true,
		"kernel/fs/erofs/erofs.ko.xz": true,
		"updates/x.ko.zst":            true,
		"extra/y.ko.gz":               true,
		"modules.order":               false,
		"kernel/.ko":                  false,
		"build/include/z.ko":          false,
		"kernel/source/z.ko":          false,
		"kernel/fs/x.ko.bz2":          false,
	} {
		if got := isModulePath(p); got != want {
			t.Errorf("isModulePath(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestSuperFastHash(t *testing.T) {
	// Reference values from libkmod's hash_superfast compiled with gcc on
	// x86-64 (little-endian reads, signed char); the last key covers the
	// sign extension of a byte ≥ 0x80.
	for key, want := range map[string]uint32{
		"a": 0x115ea782, "ab": 0x516b8b44, "abc": 0xd2be198a, "abcd": 0xdad8b8db,
		"abcde": 0x51ed072e, "printk": 0x6a0863d1, "\xe9t\xe9": 0x69bdf30d,
	} {
		if got := superFastHash(key); got != want {
			t.Errorf("superFastHash(%q) = %#08x, want %#08x", key, got, want)
		}
	}
	keys := []string{"b", "a", "abc", "abcd", "abcde", "x_y_z", "printk"}
	hashOrder(keys)
	for i := 1; i < len(keys); i++ {
		bi, bj := superFastHash(keys[i-1])%symbolBuckets, superFastHash(keys[i])%symbolBuckets
		if bi > bj || bi == bj && keys[i-1] > keys[i] {
			t.Errorf("%q (bucket %d) before %q (bucket %d)", keys[i-1], bi, keys[i], bj)
		}
	}
}
