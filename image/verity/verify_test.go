package verity

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestVerify(t *testing.T) {
	p := testParams()
	// 300 blocks: level 0 has 3 hash blocks (the last partly padding), level 1 one.
	data := randomData(300 * 4096)
	res, hash := write(t, data, p)
	l, err := PlanLayout(int64(len(data)), p)
	if err != nil {
		t.Fatal(err)
	}
	level0, level1 := l.Levels[0].Offset, l.Levels[1].Offset

	if err := Verify(bytes.NewReader(data), int64(len(data)), bytes.NewReader(hash), res.RootHash); err != nil {
		t.Fatalf("Verify of a fresh tree: %v", err)
	}
	// A data partition larger than the filesystem it holds is fine.
	padded := append(bytes.Clone(data), make([]byte, 8192)...)
	if err := Verify(bytes.NewReader(padded), int64(len(padded)), bytes.NewReader(hash), res.RootHash); err != nil {
		t.Fatalf("Verify with trailing space on the data device: %v", err)
	}

	tests := []struct {
		name     string
		dataByte int64 // offset to flip in data, or -1
		hashByte int64 // offset to flip in hash, or -1
		root     []byte
		want     CorruptionError
		text     string
	}{
		{"data byte", 200*4096 + 17, -1, nil,
			CorruptionError{Data: true, Level: -1, Block: 200, Offset: 200 * 4096}, "data block 200 at data offset 819200"},
		{"level 0 digest", -1, level0 + 4096 + 5, nil,
			CorruptionError{Level: 0, Block: 1, Offset: level0 + 4096}, "hash block 1 of level 0 at hash offset"},
		{"level 0 padding", -1, level0 + 2*4096 + 4000, nil,
			CorruptionError{Level: 0, Block: 2, Offset: level0 + 2*4096}, "hash block 2 of level 0"},
		{"top level", -1, level1 + 1, nil,
			CorruptionError{Level: 1, Block: 0, Offset: level1}, "hash block 0 of level 1"},
		{"salt in superblock", -1, sbOffSalt, nil,
			CorruptionError{Level: 1, Block: 0, Offset: level1}, "hash block 0 of level 1"},
		{"wrong root hash", -1, -1, bytes.Repeat([]byte{1}, 32),
			CorruptionError{Level: 1, Block: 0, Offset: level1}, "want 0101"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, h, root := bytes.Clone(data), bytes.Clone(hash), res.RootHash
			if tt.dataByte >= 0 {
				d[tt.dataByte] ^= 0x01
			}
			if tt.hashByte >= 0 {
				h[tt.hashByte] ^= 0x01
			}
			if tt.root != nil {
				root = tt.root
			}
			err := Verify(bytes.NewReader(d), int64(len(d)), bytes.NewReader(h), root)
			var ce *CorruptionError
			if !errors.As(err, &ce) {
				t.Fatalf("Verify error = %v, want a CorruptionError", err)
			}
			if ce.Data != tt.want.Data || ce.Level != tt.want.Level || ce.Block != tt.want.Block || ce.Offset != tt.want.Offset {
				t.Errorf("CorruptionError = data %v level %d block %d offset %d, want data %v level %d block %d offset %d",
					ce.Data, ce.Level, ce.Block, ce.Offset, tt.want.Data, tt.want.Level, tt.want.Block, tt.want.Offset)
			}
			if !strings.Contains(err.Error(), tt.text) {
				t.Errorf("error text %q does not mention %q", err, tt.text)
			}
		})
	}
}

func TestVerifySingleBlock(t *testing.T) {
	data := randomData(4096)
	res, hash := write(t, data, testParams())
	if err := Verify(bytes.NewReader(data), 4096, bytes.NewReader(hash), res.RootHash); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	data[4095] ^= 0x80
	var ce *CorruptionError
	if err := Verify(bytes.NewReader(data), 4096, bytes.NewReader(hash), res.RootHash); !errors.As(err, &ce) || !ce.Data || ce.Block != 0 {
		t.Errorf("Verify of a flipped single block = %v, want data block 0 corrupt", err)
	}
}

func TestVerifyRejectsUnusableInput(t *testing.T) {
	data := randomData(130 * 4096)
	res, hash := write(t, data, testParams())
	tests := []struct {
		name string
		data []byte
		hash []byte
		root []byte
		want string
	}{
		{"data too short", data[:129*4096], hash, res.RootHash, "covers 130 data blocks"},
		{"hash area truncated", data, hash[:len(hash)-1], res.RootHash, "hash area must be"},
		{"no superblock", data, make([]byte, len(hash)), res.RootHash, "signature"},
		{"short root hash", data, hash, res.RootHash[:16], "root hash is 16 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Verify(bytes.NewReader(tt.data), int64(len(tt.data)), bytes.NewReader(tt.hash), tt.root)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Verify error = %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

// failingReader fails every read at or after a given offset.
type failingReader struct {
	r    io.ReaderAt
	from int64
}

var errDisk = errors.New("disk on fire")

func (f failingReader) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > f.from {
		return 0, errDisk
	}
	return f.r.ReadAt(p, off)
}

func TestReadErrorsAreWrapped(t *testing.T) {
	data := randomData(2048 * 4096) // two 4 MiB chunks
	_, err := Write(failingReader{bytes.NewReader(data), 1024 * 4096}, int64(len(data)), &memFile{}, testParams())
	if !errors.Is(err, errDisk) || !strings.Contains(err.Error(), "data block 1024 at offset") {
		t.Errorf("Write error = %v, want the reader's error at data block 1024", err)
	}
}
