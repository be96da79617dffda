package verity

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestParamsLimits: the salt and block sizes veritysetup accepts at both
// ends of their ranges are accepted, and one step past them is refused
// with a message naming the value.
func TestParamsLimits(t *testing.T) {
	p := testParams()
	tests := []struct {
		name string
		p    Params
		want string // "" for accepted
	}{
		{"salt of 1 byte", Params{Salt: []byte{7}, UUID: p.UUID}, ""},
		{"salt of 256 bytes", Params{Salt: bytes.Repeat([]byte{7}, 256), UUID: p.UUID}, ""},
		{"salt of 257 bytes", Params{Salt: bytes.Repeat([]byte{7}, 257), UUID: p.UUID}, "verity salt of 257 bytes is invalid"},
		{"512-byte blocks", Params{DataBlockSize: 512, HashBlockSize: 512, Salt: p.Salt, UUID: p.UUID}, ""},
		{"256-byte data blocks", Params{DataBlockSize: 256, Salt: p.Salt, UUID: p.UUID}, "verity data block size 256 is invalid"},
		{"512 KiB blocks", Params{DataBlockSize: 512 << 10, HashBlockSize: 512 << 10, Salt: p.Salt, UUID: p.UUID}, ""},
		{"1 MiB hash blocks", Params{HashBlockSize: 1 << 20, Salt: p.Salt, UUID: p.UUID}, "verity hash block size 1048576 is invalid"},
		{"not a power of two", Params{DataBlockSize: 4096 + 512, Salt: p.Salt, UUID: p.UUID}, "verity data block size 4608 is invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bs := int64(DefaultBlockSize)
			if tt.p.DataBlockSize != 0 {
				bs = int64(tt.p.DataBlockSize)
			}
			data := randomData(int(bs))
			var h memFile
			res, err := Write(bytes.NewReader(data), bs, &h, tt.p)
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("Write error = %v, want one mentioning %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Write: %v", err)
			}
			if err := Verify(bytes.NewReader(data), bs, bytes.NewReader(h.b), res.RootHash); err != nil {
				t.Errorf("Verify of the written tree: %v", err)
			}
			sb, err := ReadSuperblock(bytes.NewReader(h.b))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(sb.Salt, tt.p.Salt) {
				t.Errorf("superblock salt = %x, want %x", sb.Salt, tt.p.Salt)
			}
		})
	}
}

// TestHashSizeOfNothing: no data needs no hash area, and a size under one
// block still needs one (rounded up).
func TestHashSizeOfNothing(t *testing.T) {
	for _, tt := range []struct {
		size int64
		want int64
	}{{-4096, 0}, {0, 0}, {1, 4096}, {4096, 4096}, {4097, 2 * 4096}} {
		if got := HashSize(tt.size, Params{}); got != tt.want {
			t.Errorf("HashSize(%d) = %d, want %d", tt.size, got, tt.want)
		}
	}
	if _, err := PlanLayout(-4096, Params{}); err == nil || !strings.Contains(err.Error(), "verity data size -4096 is not a positive multiple") {
		t.Errorf("PlanLayout(-4096) error = %v", err)
	}
	if _, err := PlanLayout(4096, Params{DataBlockSize: 100}); err == nil || !strings.Contains(err.Error(), "data block size 100 is invalid") {
		t.Errorf("PlanLayout with 100-byte blocks: error = %v", err)
	}
}

// TestWriteAtChunkBoundaries: data that fills the workers' read chunks
// exactly, or one block past them, hashes to the same tree as veritysetup's
// layout says, and verifies.
func TestWriteAtChunkBoundaries(t *testing.T) {
	perChunk := chunkBytes / DefaultBlockSize
	for _, blocks := range []int{perChunk - 1, perChunk, perChunk + 1, 2 * perChunk} {
		data := randomData(blocks * DefaultBlockSize)
		res, hash := write(t, data, testParams())
		if res.DataBlocks != uint64(blocks) {
			t.Errorf("%d blocks: DataBlocks = %d", blocks, res.DataBlocks)
		}
		if err := Verify(bytes.NewReader(data), int64(len(data)), bytes.NewReader(hash), res.RootHash); err != nil {
			t.Errorf("%d blocks: Verify: %v", blocks, err)
		}
		// Spot-check the last data digest against sha256(salt || block).
		l, err := PlanLayout(int64(len(data)), testParams())
		if err != nil {
			t.Fatal(err)
		}
		last := data[(blocks-1)*DefaultBlockSize:]
		want := digestOf(testParams().Salt, last)
		at := l.Levels[0].Offset + int64(blocks-1)*digestSize
		if got := hash[at : at+digestSize]; !bytes.Equal(got, want) {
			t.Errorf("%d blocks: digest of the last block = %x, want %x", blocks, got, want)
		}
	}
}

func digestOf(salt, block []byte) []byte {
	out := make([]byte, digestSize)
	if err := digestBlocks(bytes.NewReader(block), 1, len(block), salt, out); err != nil {
		panic(err)
	}
	return out
}

func TestSuperblockMarshalLimits(t *testing.T) {
	base := Superblock{Version: 1, HashType: 1, UUID: testParams().UUID, Algorithm: "sha256",
		DataBlockSize: 4096, HashBlockSize: 4096, DataBlocks: 9}
	tests := []struct {
		name string
		edit func(*Superblock)
		want string
	}{
		{"31-byte algorithm name", func(s *Superblock) { s.Algorithm = strings.Repeat("a", 31) }, ""},
		{"32-byte algorithm name", func(s *Superblock) { s.Algorithm = strings.Repeat("a", 32) }, "is longer than 31 bytes"},
		{"no salt", func(s *Superblock) { s.Salt = nil }, ""},
		{"256-byte salt", func(s *Superblock) { s.Salt = bytes.Repeat([]byte{0x5a}, 256) }, ""},
		{"257-byte salt", func(s *Superblock) { s.Salt = bytes.Repeat([]byte{0x5a}, 257) }, "salt of 257 bytes exceeds 256"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := base
			tt.edit(&s)
			b, err := s.MarshalBinary()
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("MarshalBinary error = %v, want one mentioning %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("MarshalBinary: %v", err)
			}
			if len(b) != SuperblockSize {
				t.Fatalf("MarshalBinary gave %d bytes, want %d", len(b), SuperblockSize)
			}
			var got Superblock
			if err := got.UnmarshalBinary(b); err != nil {
				t.Fatalf("UnmarshalBinary: %v", err)
			}
			if got.Algorithm != s.Algorithm || !bytes.Equal(got.Salt, s.Salt) || got.UUID != s.UUID ||
				got.DataBlocks != s.DataBlocks || got.DataBlockSize != s.DataBlockSize || got.HashBlockSize != s.HashBlockSize {
				t.Errorf("round trip = %+v, want %+v", got, s)
			}
		})
	}
}

func TestSuperblockUnmarshalRefuses(t *testing.T) {
	good, err := (&Superblock{Version: 1, HashType: 1, Algorithm: "sha256", DataBlockSize: 4096,
		HashBlockSize: 4096, DataBlocks: 1, Salt: []byte{1}}).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	tests := []struct {
		name string
		b    []byte
		want string // "" for accepted
	}{
		{"exactly 512 bytes", good, ""},
		{"511 bytes", good[:511], "verity superblock is 511 bytes, want 512"},
		{"version 2", patch(good, func(b []byte) { le.PutUint32(b[sbOffVersion:], 2) }), "version 2 is not supported"},
		{"version 0", patch(good, func(b []byte) { le.PutUint32(b[sbOffVersion:], 0) }), "version 0 is not supported"},
		{"hash type 0 (Chrome OS)", patch(good, func(b []byte) { le.PutUint32(b[sbOffHashType:], 0) }), ""},
		{"hash type 2", patch(good, func(b []byte) { le.PutUint32(b[sbOffHashType:], 2) }), "hash type 2 is not supported"},
		{"salt size 256", patch(good, func(b []byte) { le.PutUint16(b[sbOffSaltSize:], 256) }), ""},
		{"salt size 257", patch(good, func(b []byte) { le.PutUint16(b[sbOffSaltSize:], 257) }), "salt size 257 exceeds 256"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s Superblock
			err := s.UnmarshalBinary(tt.b)
			if tt.want == "" {
				if err != nil {
					t.Errorf("UnmarshalBinary: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("UnmarshalBinary error = %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

func patch(b []byte, edit func([]byte)) []byte {
	b = bytes.Clone(b)
	edit(b)
	return b
}

// TestVerifyRefusesForeignSuperblocks: a tree this package cannot check, or
// a superblock that cannot describe the data, is an error that says so, not
// a corruption report.
func TestVerifyRefusesForeignSuperblocks(t *testing.T) {
	data := randomData(20 * 4096)
	res, hash := write(t, data, testParams())
	le := binary.LittleEndian
	tests := []struct {
		name string
		edit func([]byte)
		want string
	}{
		{"other algorithm", func(b []byte) { copy(b[sbOffAlgorithm:], "sha512") },
			"verity superblock uses sha512 with hash type 1: only sha256 with hash type 1 can be verified here"},
		{"Chrome OS hash type", func(b []byte) { le.PutUint32(b[sbOffHashType:], 0) },
			"verity superblock uses sha256 with hash type 0"},
		{"bad data block size", func(b []byte) { le.PutUint32(b[sbOffDataBlockSize:], 4000) },
			"verity superblock is unusable: verity data block size 4000 is invalid"},
		{"bad hash block size", func(b []byte) { le.PutUint32(b[sbOffHashBlockSize:], 1<<20) },
			"verity superblock is unusable: verity hash block size 1048576 is invalid"},
		{"no data blocks", func(b []byte) { le.PutUint64(b[sbOffDataBlocks:], 0) },
			"verity superblock declares 0 data blocks"},
		{"one block too many", func(b []byte) { le.PutUint64(b[sbOffDataBlocks:], 21) },
			"verity data is 81920 bytes but the superblock covers 21 data blocks of 4096 bytes"},
		{"size overflows", func(b []byte) { le.PutUint64(b[sbOffDataBlocks:], 1<<52) },
			"superblock covers 4503599627370496 data blocks of 4096 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := patch(hash, tt.edit)
			err := Verify(bytes.NewReader(data), int64(len(data)), bytes.NewReader(h), res.RootHash)
			var ce *CorruptionError
			if err == nil || errors.As(err, &ce) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Verify error = %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

// TestVerifyOneLevel: a tree whose only level is its top (2 to 128 data
// blocks) is checked through that level, not as a single data block.
func TestVerifyOneLevel(t *testing.T) {
	data := randomData(100 * 4096)
	res, hash := write(t, data, testParams())
	l, err := PlanLayout(int64(len(data)), testParams())
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Levels) != 1 {
		t.Fatalf("levels = %+v, want one", l.Levels)
	}
	if err := Verify(bytes.NewReader(data), int64(len(data)), bytes.NewReader(hash), res.RootHash); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	for _, block := range []int{0, 99} {
		d := bytes.Clone(data)
		d[block*4096+1] ^= 0x10
		var ce *CorruptionError
		err := Verify(bytes.NewReader(d), int64(len(d)), bytes.NewReader(hash), res.RootHash)
		if !errors.As(err, &ce) || !ce.Data || ce.Level != -1 || ce.Block != uint64(block) || ce.Offset != int64(block)*4096 {
			t.Errorf("flipped data block %d: Verify = %v (%+v)", block, err, ce)
			continue
		}
		if want := digestOf(testParams().Salt, d[block*4096:(block+1)*4096]); !bytes.Equal(ce.Got, want) {
			t.Errorf("flipped data block %d: Got = %x, want %x", block, ce.Got, want)
		}
		if want := hash[l.Levels[0].Offset+int64(block)*digestSize:][:digestSize]; !bytes.Equal(ce.Want, want) {
			t.Errorf("flipped data block %d: Want = %x, want the stored %x", block, ce.Want, want)
		}
	}
}

// TestVerifyReadErrors: a failing data or hash device is reported with its
// own error, not as corruption.
func TestVerifyReadErrors(t *testing.T) {
	data := randomData(300 * 4096)
	res, hash := write(t, data, testParams())
	err := Verify(failingReader{bytes.NewReader(data), 250 * 4096}, int64(len(data)), bytes.NewReader(hash), res.RootHash)
	if !errors.Is(err, errDisk) {
		t.Errorf("Verify with a failing data device = %v, want %v", err, errDisk)
	}
	err = Verify(bytes.NewReader(data), int64(len(data)), failingReader{bytes.NewReader(hash), 4096 + 1}, res.RootHash)
	if !errors.Is(err, errDisk) || !strings.Contains(err.Error(), "reading verity hash level") {
		t.Errorf("Verify with a failing hash device = %v, want %v", err, errDisk)
	}
}

func TestPartitionUUIDsOfSixteenBytes(t *testing.T) {
	h := mustHex(t, "00112233445566778899aabbccddeeff")
	r, v := PartitionUUIDs(h)
	if !bytes.Equal(r[:], h) || !bytes.Equal(v[:], h) {
		t.Errorf("PartitionUUIDs(16 bytes) = %x, %x, want both %x", r, v, h)
	}
	if r, v := PartitionUUIDs(h[:15]); r != ([16]byte{}) || v != ([16]byte{}) {
		t.Errorf("PartitionUUIDs(15 bytes) = %x, %x, want zero", r, v)
	}
}

func TestContentDigestShortData(t *testing.T) {
	_, err := ContentDigest(bytes.NewReader(make([]byte, 100)), 200)
	if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "read 100 of 200 bytes") {
		t.Errorf("ContentDigest of short data = %v, want unexpected EOF after 100 of 200 bytes", err)
	}
	got, err := ContentDigest(bytes.NewReader(append([]byte("abc"), 0xff)), 3)
	if err != nil || !bytes.Equal(got, mustHex(t, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")) {
		t.Errorf("ContentDigest(\"abc\") = %x, %v; want sha256(\"abc\")", got, err)
	}
}

// TestVerifyMessages: what Verify says names the sizes the caller must fix.
func TestVerifyMessages(t *testing.T) {
	data := randomData(4096)
	res, hash := write(t, data, testParams())
	err := Verify(bytes.NewReader(data), 4096, bytes.NewReader(hash), append(bytes.Clone(res.RootHash), 0))
	if want := "verity root hash is 33 bytes, want 32: pass the 64 hex digits from the manifest"; err == nil || err.Error() != want {
		t.Errorf("Verify with a 33-byte root hash = %v, want %s", err, want)
	}
	// The only data block of a levelless tree is checked against the root.
	data[0] ^= 1
	var ce *CorruptionError
	err = Verify(bytes.NewReader(data), 4096, bytes.NewReader(hash), res.RootHash)
	if !errors.As(err, &ce) {
		t.Fatalf("Verify = %v, want a CorruptionError", err)
	}
	want := CorruptionError{Data: true, Level: -1, Block: 0, Offset: 0, Want: res.RootHash, Got: digestOf(testParams().Salt, data)}
	if ce.Data != want.Data || ce.Level != want.Level || ce.Block != want.Block || ce.Offset != want.Offset ||
		!bytes.Equal(ce.Want, want.Want) || !bytes.Equal(ce.Got, want.Got) {
		t.Errorf("CorruptionError = %+v, want %+v", *ce, want)
	}
}

// TestReadSuperblockKeepsTheDeviceError: a failing device's own error is
// kept; only a short read becomes io.ErrUnexpectedEOF.
func TestReadSuperblockKeepsTheDeviceError(t *testing.T) {
	_, hash := write(t, randomData(4096), testParams())
	if _, err := ReadSuperblock(failingReader{bytes.NewReader(hash), 0}); !errors.Is(err, errDisk) || errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("ReadSuperblock(failing) = %v, want %v", err, errDisk)
	}
	if _, err := ReadSuperblock(shortReader{}); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("ReadSuperblock(short, no error) = %v, want unexpected EOF", err)
	}
}

// shortReader reads 10 bytes and reports no error, as a ReaderAt must not.
type shortReader struct{}

func (shortReader) ReadAt(p []byte, _ int64) (int, error) { return min(len(p), 10), nil }
