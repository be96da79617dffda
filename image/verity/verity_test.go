package verity

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
)

// memFile is an in-memory hash area: an io.WriterAt that grows.
type memFile struct{ b []byte }

func (m *memFile) WriteAt(p []byte, off int64) (int, error) {
	if end := int(off) + len(p); end > len(m.b) {
		m.b = append(m.b, make([]byte, end-len(m.b))...)
	}
	return copy(m.b[off:], p), nil
}

// patterned returns n blocks of size bs, block i filled with byte f(i).
func patterned(n, bs int, f func(int) byte) []byte {
	b := make([]byte, 0, n*bs)
	for i := range n {
		b = append(b, bytes.Repeat([]byte{f(i)}, bs)...)
	}
	return b
}

func randomData(size int) []byte {
	b := make([]byte, size)
	_, _ = rand.NewChaCha8([32]byte{1, 2, 3}).Read(b)
	return b
}

func testParams() Params { return DeriveParams(sha256.New().Sum(nil)) }

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func write(t testing.TB, data []byte, p Params) (*Result, []byte) {
	t.Helper()
	var h memFile
	res, err := Write(bytes.NewReader(data), int64(len(data)), &h, p)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	if int64(len(h.b)) != res.HashSize {
		t.Fatalf("wrote %d bytes, Result.HashSize says %d", len(h.b), res.HashSize)
	}
	return res, h.b
}

func TestHashSize(t *testing.T) {
	p := testParams()
	const bs = 4096
	tests := []struct {
		name     string
		dataSize int64
		p        Params
		want     int64
	}{
		{"one block: superblock only", bs, p, bs},
		{"one full hash block of digests", 128 * bs, p, 2 * bs},
		{"one more block adds a level", 129 * bs, p, (1 + 1 + 2) * bs},
		{"two full levels", 128 * 128 * bs, p, (1 + 1 + 128) * bs},
		{"three levels", (128*128 + 1) * bs, p, (1 + 1 + 2 + 129) * bs},
		{"partial block rounds up", bs + 1, p, 2 * bs},
		{"512-byte blocks", 257 * 512, Params{DataBlockSize: 512, HashBlockSize: 512, Salt: p.Salt, UUID: p.UUID}, 10752},
		{"invalid block size", bs, Params{DataBlockSize: 3000, Salt: p.Salt, UUID: p.UUID}, 0},
		{"salt and UUID not needed yet", 129 * bs, Params{}, (1 + 1 + 2) * bs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := HashSize(tt.dataSize, tt.p); got != tt.want {
				t.Errorf("HashSize(%d) = %d, want %d", tt.dataSize, got, tt.want)
			}
		})
	}
}

func TestPlanLayoutOrdersLevelsTopFirst(t *testing.T) {
	l, err := PlanLayout((128*128+1)*4096, testParams())
	if err != nil {
		t.Fatal(err)
	}
	// Stored top-most first: superblock, level 2 (1 block), level 1 (2), level 0 (129).
	want := []Level{{Offset: 4 * 4096, Blocks: 129}, {Offset: 2 * 4096, Blocks: 2}, {Offset: 1 * 4096, Blocks: 1}}
	if len(l.Levels) != 3 {
		t.Fatalf("levels = %+v, want 3", l.Levels)
	}
	for i := range want {
		if l.Levels[i] != want[i] {
			t.Errorf("level %d = %+v, want %+v", i, l.Levels[i], want[i])
		}
	}
}

// The golden values below were produced by veritysetup 2.6.1:
//
//	veritysetup format --salt=aa…aa --uuid=01234567-89ab-4def-8123-456789abcdef \
//	    [--data-block-size=512 --hash-block-size=512] data hash
func TestWriteMatchesVeritysetupGolden(t *testing.T) {
	salt := bytes.Repeat([]byte{0xaa}, 32)
	uuid := [16]byte{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0x4d, 0xef, 0x81, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef}
	tests := []struct {
		name       string
		data       []byte
		bs         uint32
		root, file string
	}{
		{"129 blocks of 4096", patterned(129, 4096, func(i int) byte { return byte(i) }), 4096,
			"4fd728c2bb2b8e83f4dba27fb63e105340a7a6f9ad24513cb4747d92212e8f59",
			"2de95eaf8ee7ee7dd53722e76afea73fff9ff5b1009ab129b1094f11729c5f1b"},
		{"257 blocks of 512", patterned(257, 512, func(i int) byte { return byte(i * 7) }), 512,
			"2535b40b34b4052d5bcf21ac55e4e9942545032c97b229ce22b82f518c8d9453",
			"d8d7238136fa4650000c740d48347cbed46a0f80e60432ba9e0545b392507dc0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, hash := write(t, tt.data, Params{DataBlockSize: tt.bs, HashBlockSize: tt.bs, Salt: salt, UUID: uuid})
			if got := hex.EncodeToString(res.RootHash); got != tt.root {
				t.Errorf("root hash = %s, want %s", got, tt.root)
			}
			sum := sha256.Sum256(hash)
			if got := hex.EncodeToString(sum[:]); got != tt.file {
				t.Errorf("sha256 of hash area = %s, want %s", got, tt.file)
			}
		})
	}
}

func TestWriteSingleBlockRootIsBlockDigest(t *testing.T) {
	p := testParams()
	data := randomData(4096)
	res, hash := write(t, data, p)
	want := sha256.Sum256(append(bytes.Clone(p.Salt), data...))
	if !bytes.Equal(res.RootHash, want[:]) {
		t.Errorf("root hash = %x, want sha256(salt||block) = %x", res.RootHash, want)
	}
	if len(hash) != 4096 {
		t.Errorf("hash area is %d bytes, want the superblock block only", len(hash))
	}
}

func TestWriteRejectsBadInput(t *testing.T) {
	p := testParams()
	tests := []struct {
		name string
		size int64
		p    Params
		want string
	}{
		{"partial block", 4097, p, "not a positive multiple"},
		{"empty", 0, p, "not a positive multiple"},
		{"no salt", 4096, Params{UUID: p.UUID}, "DeriveSalt"},
		{"zero uuid", 4096, Params{Salt: p.Salt}, "DeriveUUID"},
		{"odd hash block", 4096, Params{HashBlockSize: 1000, Salt: p.Salt, UUID: p.UUID}, "power of two"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Write(bytes.NewReader(make([]byte, 8192)), tt.size, &memFile{}, tt.p)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Write error = %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

func TestWriteReportsShortData(t *testing.T) {
	data := make([]byte, 3*4096)
	_, err := Write(bytes.NewReader(data), 5*4096, &memFile{}, testParams())
	if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "data block 3 at offset 12288") {
		t.Errorf("Write error = %v, want unexpected EOF at data block 3", err)
	}
}

func TestWriteIsDeterministic(t *testing.T) {
	data := randomData(300*4096 + 0)
	digest := sha256.Sum256(data)
	r1, h1 := write(t, data, DeriveParams(digest[:]))
	r2, h2 := write(t, data, DeriveParams(digest[:]))
	if !bytes.Equal(h1, h2) || !bytes.Equal(r1.RootHash, r2.RootHash) {
		t.Fatal("two writes of the same data differ")
	}
	cd, err := ContentDigest(bytes.NewReader(data), int64(len(data)))
	if err != nil || !bytes.Equal(cd, digest[:]) {
		t.Fatalf("ContentDigest = %x, %v; want %x", cd, err, digest)
	}
	other := sha256.Sum256([]byte("other"))
	if bytes.Equal(DeriveSalt(digest[:]), DeriveSalt(other[:])) || DeriveUUID(digest[:]) == DeriveUUID(other[:]) {
		t.Error("different content derived the same salt or UUID")
	}
	u := DeriveUUID(digest[:])
	if u[6]>>4 != 4 || u[8]>>6 != 2 {
		t.Errorf("DeriveUUID = %x, want RFC 9562 version 4 / variant 10 bits", u)
	}
}

func TestReadSuperblock(t *testing.T) {
	p := testParams()
	res, hash := write(t, randomData(10*4096), p)
	sb, err := ReadSuperblock(bytes.NewReader(hash))
	if err != nil {
		t.Fatal(err)
	}
	want := Superblock{Version: 1, HashType: 1, UUID: p.UUID, Algorithm: "sha256",
		DataBlockSize: 4096, HashBlockSize: 4096, DataBlocks: res.DataBlocks, Salt: p.Salt}
	if sb.Version != want.Version || sb.HashType != want.HashType || sb.UUID != want.UUID ||
		sb.Algorithm != want.Algorithm || sb.DataBlockSize != want.DataBlockSize ||
		sb.HashBlockSize != want.HashBlockSize || sb.DataBlocks != 10 || !bytes.Equal(sb.Salt, want.Salt) {
		t.Errorf("ReadSuperblock = %+v, want %+v", sb, want)
	}
	if !bytes.Equal(hash[SuperblockSize:4096], make([]byte, 4096-SuperblockSize)) {
		t.Error("superblock block is not zero-padded")
	}
	if _, err := ReadSuperblock(bytes.NewReader(make([]byte, 4096))); err == nil || !strings.Contains(err.Error(), "signature") {
		t.Errorf("ReadSuperblock(zeros) error = %v, want missing signature", err)
	}
	if _, err := ReadSuperblock(bytes.NewReader(hash[:100])); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("ReadSuperblock(short) error = %v, want unexpected EOF", err)
	}
}

func BenchmarkWrite(b *testing.B) {
	const size = 256 << 20
	data := randomData(size)
	p := testParams()
	h := &memFile{b: make([]byte, 0, HashSize(size, p))}
	b.SetBytes(size)
	b.ResetTimer()
	for b.Loop() {
		h.b = h.b[:0]
		if _, err := Write(bytes.NewReader(data), size, h, p); err != nil {
			b.Fatal(err)
		}
	}
}
