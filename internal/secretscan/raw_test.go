package secretscan

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"slices"
	"testing"
	"testing/iotest"
)

// b64At is where the part of secret's encoding that depends on the secret
// alone starts, for an encoding starting at start of a stream holding the
// secret at byte o: after the o/3 whole groups before it, and the
// characters holding bits of the o%3 bytes before it in its own group.
func b64At(start, o int) int64 {
	return int64(start + 4*(o/3) + []int{0, 2, 3}[o%3])
}

// TestRawOffsets: every copy is reported once, at its exact offset, also
// across the read boundary, whichever alignment the encoding has.
func TestRawOffsets(t *testing.T) {
	node := []byte("cluster:\n  bootstrapToken: abcdef." + secret + "\n") // the secret at byte 34
	var disk bytes.Buffer
	var want []int64
	disk.Write(bytes.Repeat([]byte{0}, 5<<20-7))
	disk.WriteString("data:;base64,")
	want = append(want, b64At(disk.Len(), 34))
	disk.WriteString(base64.StdEncoding.EncodeToString(node))
	disk.Write(bytes.Repeat([]byte{0}, 4096))
	for k := range 3 {
		want = append(want, b64At(disk.Len(), 34+k))
		disk.WriteString(base64.URLEncoding.EncodeToString(append(bytes.Repeat([]byte("y"), k), node...)) + "\x00")
	}
	disk.WriteString("plain ")
	want = append(want, int64(disk.Len()))
	disk.WriteString(secret)
	hits, err := Raw(bytes.NewReader(disk.Bytes()), []byte(secret))
	slices.Sort(hits)
	if err != nil || !slices.Equal(hits, want) {
		t.Errorf("Raw = %v, %v; want %v", hits, err, want)
	}
	if hits, err := Raw(bytes.NewReader(bytes.Repeat([]byte{0}, 1<<20)), []byte(secret)); len(hits) != 0 || err != nil {
		t.Errorf("zeros: %v, %v", hits, err)
	}
}

// TestRawShortReads: a reader may return a few bytes at a time (a pipe);
// a copy that stays in the kept tail over many reads is still reported once.
func TestRawShortReads(t *testing.T) {
	data := []byte("ab " + secret + " cd " + base64.StdEncoding.EncodeToString([]byte("x:"+secret)) + " " + secret)
	want := []int64{3, b64At(23, 2), int64(len(data) - len(secret))}
	hits, err := Raw(iotest.OneByteReader(bytes.NewReader(data)), []byte(secret))
	slices.Sort(hits)
	if err != nil || !slices.Equal(hits, want) {
		t.Errorf("Raw = %v, %v; want %v", hits, err, want)
	}
}

// TestRawReadError: a failing read ends the scan with the error and the
// copies found before it.
func TestRawReadError(t *testing.T) {
	failed := errors.New("I/O error on sector 9")
	r := io.MultiReader(bytes.NewReader([]byte("xx"+secret)), iotest.ErrReader(failed), bytes.NewReader([]byte(secret)))
	hits, err := Raw(r, []byte(secret))
	if !errors.Is(err, failed) || !slices.Equal(hits, []int64{2}) {
		t.Errorf("Raw = %v, %v; want [2], %v", hits, err, failed)
	}
}
