package erofsz

import (
	"bytes"
	"reflect"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// TestIndexes spells out the lcluster indexes of erofs_fs.h for a file of
// three extents: 16 lclusters in a 5-block pcluster, 16 uncompressed
// lclusters, and a tail of 3 lclusters in 1 block.
func TestIndexes(t *testing.T) {
	enc := &Encoded{Extents: []Extent{
		{Len: 65536, Data: make([]byte, 5*BlockSize-100)},
		{Len: 65536, Plain: true, Data: make([]byte, 65536)},
		{Len: 9000, Data: make([]byte, 700)},
	}}
	got, err := enc.indexes(100)
	if err != nil {
		t.Fatal(err)
	}
	var want []lindex
	want = append(want, lindex{typ: lclusterHead1, blkaddr: 100},
		lindex{typ: lclusterNonhead, delta0: d0Cblkcnt | 5, delta1: 15})
	for j := 2; j < 16; j++ {
		want = append(want, lindex{typ: lclusterNonhead, delta0: uint16(j), delta1: uint16(16 - j)})
	}
	for j := range 16 {
		want = append(want, lindex{typ: lclusterPlain, blkaddr: 105 + uint32(j)})
	}
	want = append(want, lindex{typ: lclusterHead1, blkaddr: 121},
		lindex{typ: lclusterNonhead, delta0: d0Cblkcnt | 1, delta1: 2},
		lindex{typ: lclusterNonhead, delta0: 2, delta1: 1})
	if !reflect.DeepEqual(got, want) {
		t.Errorf("indexes\n got %v\nwant %v", got, want)
	}
	if enc.Blocks() != 22 {
		t.Errorf("Blocks() = %d, want 22", enc.Blocks())
	}

	// One lcluster has no NONHEAD to carry a block count.
	bad := &Encoded{Extents: []Extent{{Len: 4000, Data: make([]byte, 5000)}}}
	if _, err := bad.indexes(0); err == nil {
		t.Error("a one-lcluster extent in two blocks was accepted")
	}

	var b [indexSize]byte
	putIndex(b[:], lindex{typ: lclusterNonhead, delta0: d0Cblkcnt | 5, delta1: 15})
	if want := []byte{2, 0, 0, 0, 5, 8, 15, 0}; !bytes.Equal(b[:], want) {
		t.Errorf("NONHEAD on disk % x, want % x", b, want)
	}
	putIndex(b[:], lindex{typ: lclusterHead1, blkaddr: 0x01020304})
	if want := []byte{1, 0, 0, 0, 4, 3, 2, 1}; !bytes.Equal(b[:], want) {
		t.Errorf("HEAD1 on disk % x, want % x", b, want)
	}
}

// decompress inverts an extent with the libraries' own decoders.
func decompress(t *testing.T, a Algorithm, x Extent) []byte {
	t.Helper()
	if x.Plain {
		return x.Data
	}
	if a == Zstd {
		d, err := zstd.NewReader(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		out, err := d.DecodeAll(x.Data, nil)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	out := make([]byte, x.Len)
	n, err := lz4.UncompressBlock(x.Data, out)
	if err != nil || n != x.Len {
		t.Fatalf("lz4: %d bytes, %v", n, err)
	}
	return out
}

func TestEncode(t *testing.T) {
	mixed := append(append(text(65536, 1), random(65536, 2)...), text(20000, 3)...)
	for _, a := range []Algorithm{LZ4, LZ4HC, Zstd} {
		c, err := newCompressor(a, DefaultExtentSize)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name  string
			data  []byte
			plain []bool // nil: the file stays uncompressed
		}{
			{"one block", text(BlockSize, 4), nil},
			{"random", random(200000, 5), nil},
			{"two blocks", bytes.Repeat([]byte("0123456789abcdef"), 2*BlockSize/16), []bool{false}},
			{"zeros", make([]byte, 300000), []bool{false, false, false, false, false}},
			{"mixed", mixed, []bool{false, true, false}},
		} {
			enc, err := encode(c, tc.data, DefaultExtentSize)
			if err != nil {
				t.Fatalf("%s %s: %v", a, tc.name, err)
			}
			if tc.plain == nil {
				if enc != nil {
					t.Errorf("%s %s: compressed, want it stored as it is", a, tc.name)
				}
				continue
			}
			if enc == nil {
				t.Fatalf("%s %s: not compressed", a, tc.name)
			}
			var plain []bool
			var back []byte
			for _, x := range enc.Extents {
				plain = append(plain, x.Plain)
				if !x.Plain && (x.Data[0] == 0 || x.Blocks() >= (x.Len+BlockSize-1)/BlockSize) {
					t.Errorf("%s %s: a stream starting %#x in %d blocks for %d bytes", a, tc.name, x.Data[0], x.Blocks(), x.Len)
				}
				back = append(back, decompress(t, a, x)...)
			}
			if !reflect.DeepEqual(plain, tc.plain) {
				t.Errorf("%s %s: plain extents %v, want %v", a, tc.name, plain, tc.plain)
			}
			if !bytes.Equal(back, tc.data) {
				t.Errorf("%s %s: extents decompress to other bytes", a, tc.name)
			}
		}
	}
}

func TestPrecompressed(t *testing.T) {
	for _, c := range []struct {
		data []byte
		want bool
	}{
		{gzipped([]byte("x")), true},
		{[]byte{0xfd, '7', 'z', 'X', 'Z', 0, 1}, true},
		{[]byte{0x28, 0xb5, 0x2f, 0xfd, 0}, true},
		{[]byte("\x7fELF\x02\x01\x01"), false},
		{[]byte("#!/bin/sh\n"), false},
		{nil, false},
	} {
		if got := precompressed(c.data); got != c.want {
			t.Errorf("precompressed(% x) = %v, want %v", c.data[:min(len(c.data), 6)], got, c.want)
		}
	}
}

func TestMarshalEncoded(t *testing.T) {
	data := append(append(text(65536, 1), random(65536, 2)...), text(20000, 3)...)
	c, _ := newCompressor(LZ4, DefaultExtentSize)
	enc, err := encode(c, data, DefaultExtentSize)
	if err != nil || enc == nil {
		t.Fatal(enc, err)
	}
	b := marshalEncoded(enc)
	back, err := unmarshalEncoded(b, data, DefaultExtentSize)
	if err != nil || !reflect.DeepEqual(back, enc) {
		t.Fatalf("round trip: %v", err)
	}
	if back, err := unmarshalEncoded(marshalEncoded(nil), data, DefaultExtentSize); back != nil || err != nil {
		t.Errorf("nil round trip: %v %v", back, err)
	}
	for name, bad := range map[string][]byte{
		"truncated":     b[:len(b)-1],
		"trailing":      append(append([]byte(nil), b...), 0),
		"empty":         nil,
		"other extents": marshalEncoded(&Encoded{Extents: enc.Extents[:2]}),
	} {
		if _, err := unmarshalEncoded(bad, data, DefaultExtentSize); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := unmarshalEncoded(b, data, 2*DefaultExtentSize); err == nil {
		t.Error("an encoding for another extent size was accepted")
	}
}

// memCache is an in-memory Cache.
type memCache struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (c *memCache) Get(k string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *memCache) Put(k string, v []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[k] = v
}

func TestWriteCache(t *testing.T) {
	tr := testTree(t)
	cache := &memCache{m: map[string][]byte{}}
	opts := Options{BuildTime: testTime, Compression: LZ4, Cache: cache}
	cold, st := writeBytes(t, tr, opts)
	if st.CacheHits != 0 || len(cache.m) == 0 {
		t.Fatalf("cold: %d hits, %d entries", st.CacheHits, len(cache.m))
	}
	warm, st := writeBytes(t, tr, opts)
	if st.CacheHits != len(cache.m) || !bytes.Equal(cold, warm) {
		t.Errorf("warm: %d hits of %d entries, same image %v", st.CacheHits, len(cache.m), bytes.Equal(cold, warm))
	}
	// A damaged entry is a miss, not a damaged image.
	for k := range cache.m {
		cache.m[k] = []byte{9, 9, 9}
	}
	again, st := writeBytes(t, tr, opts)
	if st.CacheHits != 0 || !bytes.Equal(cold, again) {
		t.Errorf("damaged cache: %d hits, same image %v", st.CacheHits, bytes.Equal(cold, again))
	}
	// Another algorithm does not take LZ4's entries.
	opts.Compression = Zstd
	if _, st := writeBytes(t, tr, opts); st.CacheHits != 0 {
		t.Errorf("zstd took %d of lz4's entries", st.CacheHits)
	}
}

func TestDirentBlocks(t *testing.T) {
	name := func(n int) dirent { return dirent{name: string(bytes.Repeat([]byte("n"), n))} }
	// 12+100 bytes each: 36 fill 4032 bytes, the 37th opens a block.
	var ents []dirent
	for range 37 {
		ents = append(ents, name(100))
	}
	counts, size := direntBlocks(ents)
	if !reflect.DeepEqual(counts, []int{36, 1}) || size != BlockSize+112 {
		t.Errorf("counts %v size %d", counts, size)
	}
	// Exactly a block: 2 entries of 12+2036.
	counts, size = direntBlocks([]dirent{name(2036), name(2036)})
	if !reflect.DeepEqual(counts, []int{2}) || size != BlockSize {
		t.Errorf("full block: counts %v size %d", counts, size)
	}
}

func TestEncodeXattrs(t *testing.T) {
	b, err := encodeXattrs(map[string][]byte{"user.ab": []byte("xyz"), "security.capability": {1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // header
		10, 6, 2, 0, 'c', 'a', 'p', 'a', 'b', 'i', 'l', 'i', 't', 'y', 1, 2, // security. index 6, 16 bytes
		2, 1, 3, 0, 'a', 'b', 'x', 'y', 'z', 0, 0, 0, // user. index 1, 9 bytes padded to 12
	}
	if !bytes.Equal(b, want) {
		t.Errorf("xattrs\n got % x\nwant % x", b, want)
	}
	for _, bad := range []map[string][]byte{
		{"system.posix_acl_access": nil},
		{"user.": nil},
		{"user.x": make([]byte, 70000)},
	} {
		if _, err := encodeXattrs(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
