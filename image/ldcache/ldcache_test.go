package ldcache

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/drover-os/drover/image/tree"
)

func TestLibCompare(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		sign int
	}{
		{"libfoo.so.10", "libfoo.so.9", 1},
		{"libfoo.so.1", "libfoo.so.1", 0},
		{"libfoo.so", "libfoo.so.1", -1},
		{"libfoo.so.1a", "libfoo.so.1", 1},
		{"liba.so", "libb.so", -1},
		{"libz.so.1", "libzstd.so.1", -1}, // '.' < 's'
		{"libz3.so.4", "libzstd.so.1", 1}, // a digit sorts after a non-digit
	} {
		got := LibCompare(tc.a, tc.b)
		if (got > 0) != (tc.sign > 0) || (got < 0) != (tc.sign < 0) {
			t.Errorf("LibCompare(%q, %q) = %d, want sign %d", tc.a, tc.b, got, tc.sign)
		}
	}
}

func TestStringTableSharesSuffixes(t *testing.T) {
	table, off := stringTable([]string{"libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6", "c.so.6", "libm.so.6"})
	// Sorted by reversed bytes, descending: "...m.so.6" before "...c.so.6";
	// libc.so.6 and c.so.6 are suffixes of the path and share its bytes.
	if string(table) != "libm.so.6\x00/lib/x86_64-linux-gnu/libc.so.6\x00" {
		t.Errorf("table %q", table)
	}
	if off["libm.so.6"] != 0 || off["/lib/x86_64-linux-gnu/libc.so.6"] != 10 || off["libc.so.6"] != 32 || off["c.so.6"] != 35 {
		t.Errorf("offsets %v", off)
	}
}

func sampleTree(t *testing.T) *tree.Tree {
	tr := tree.New()
	add := func(n *tree.Node) {
		t.Helper()
		if err := tr.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	dir := "/usr/lib/x86_64-linux-gnu/"
	reg := func(name string, data []byte) {
		add(&tree.Node{Path: dir + name, Kind: tree.Regular, Mode: 0o644, Data: data, Owner: "t"})
	}
	link := func(name, target string) {
		add(&tree.Node{Path: dir + name, Kind: tree.Symlink, Target: target, Owner: "t"})
	}
	reg("libc.so.6", FakeLibrary(elf.EM_X86_64, elf.ET_DYN, "libc.so.6"))
	reg("libz.so.1.3", FakeLibrary(elf.EM_X86_64, elf.ET_DYN, "libz.so.1"))
	link("libz.so.1", "libz.so.1.3")
	link("libz.so", "/lib/x86_64-linux-gnu/libz.so.1.3") // development link: its own entry
	reg("libc.so", []byte("/* GNU ld script */\nGROUP ( libc.so.6 )\n"))
	reg("libnoname.so", FakeLibrary(elf.EM_X86_64, elf.ET_DYN, ""))
	reg("libarm.so.1", FakeLibrary(elf.EM_AARCH64, elf.ET_DYN, "libarm.so.1"))
	reg("libexec.so.1", FakeLibrary(elf.EM_X86_64, elf.ET_EXEC, "libexec.so.1"))
	reg("notalib.so", FakeLibrary(elf.EM_X86_64, elf.ET_DYN, "notalib.so"))
	link("libgone.so.2", "libgone.so.2.0.0")
	add(&tree.Node{Path: "/usr/lib/libold.so.5", Kind: tree.Regular, Mode: 0o644, Data: FakeLibrary(elf.EM_X86_64, elf.ET_DYN, "libold.so.5"), Owner: "t"})
	add(&tree.Node{Path: "/usr/lib/libz.so.1", Kind: tree.Regular, Mode: 0o644, Data: FakeLibrary(elf.EM_X86_64, elf.ET_DYN, "libz.so.1"), Owner: "t"})
	return tr
}

func TestBuild(t *testing.T) {
	entries, dirs, err := Build(sampleTree(t), "amd64")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/lib/x86_64-linux-gnu", "/lib"}; !reflect.DeepEqual(dirs, want) {
		t.Errorf("scanned %v, want %v (each real directory once, under its first name)", dirs, want)
	}
	f := int32(FlagELFLibc6 | FlagX8664Lib64)
	want := []Entry{
		{"libz.so.1", "/lib/x86_64-linux-gnu/libz.so.1", f},
		{"libz.so.1", "/lib/libz.so.1", f},
		{"libz.so", "/lib/x86_64-linux-gnu/libz.so", f},
		{"libold.so.5", "/lib/libold.so.5", f},
		{"libnoname.so", "/lib/x86_64-linux-gnu/libnoname.so", f},
		{"libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6", f},
	}
	if !reflect.DeepEqual(entries, want) {
		t.Errorf("entries:\n got %v\nwant %v", entries, want)
	}
}

func TestEncodeDecode(t *testing.T) {
	entries, _, err := Build(sampleTree(t), "amd64")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cache{Entries: entries, Generator: "drover test"}
	data := c.Encode()
	if !bytes.HasPrefix(data, []byte("glibc-ld.so.cache1.1")) {
		t.Fatalf("magic %q", data[:20])
	}
	if ext := binary.LittleEndian.Uint32(data[32:]); ext%4 != 0 || binary.LittleEndian.Uint32(data[ext:]) != extensionMagic {
		t.Errorf("extension directory at %d not found or misaligned", ext)
	}
	got, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, c)
	}
	if _, err := Decode(data[:40]); err == nil {
		t.Error("a truncated cache must not decode")
	}
}

func TestBuildRefusesHwcaps(t *testing.T) {
	tr := sampleTree(t)
	tr.Add(&tree.Node{Path: "/usr/lib/x86_64-linux-gnu/glibc-hwcaps/x86-64-v3/libz.so.1", Kind: tree.Regular, Data: FakeLibrary(elf.EM_X86_64, elf.ET_DYN, "libz.so.1"), Owner: "t"})
	if _, _, err := Build(tr, "amd64"); err == nil {
		t.Error("glibc-hwcaps must be refused, not silently left out")
	}
}
