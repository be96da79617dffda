package formats

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"io"
	"math/rand"
	"testing"

	kflate "github.com/klauspost/compress/flate"
)

// memFile is an in-memory io.WriteSeeker and io.ReaderAt.
type memFile struct {
	b   []byte
	pos int64
}

func (m *memFile) Write(p []byte) (int, error) {
	if need := m.pos + int64(len(p)); need > int64(len(m.b)) {
		m.b = append(m.b, make([]byte, need-int64(len(m.b)))...)
	}
	copy(m.b[m.pos:], p)
	m.pos += int64(len(p))
	return len(p), nil
}

func (m *memFile) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
		m.pos = off
	case io.SeekCurrent:
		m.pos += off
	case io.SeekEnd:
		m.pos = int64(len(m.b)) + off
	}
	return m.pos, nil
}

func (m *memFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(m.b)) {
		return 0, io.EOF
	}
	n := copy(p, m.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// testRaw is an image with random (incompressible), patterned
// (compressible), tiny and zero regions, and data in its last sector.
func testRaw(size int) []byte {
	raw := make([]byte, size)
	r := rand.New(rand.NewSource(42))
	r.Read(raw[0 : size/8])
	for i := size / 4; i < size/2; i++ {
		raw[i] = byte(i % 251)
	}
	for i := 5 * size / 8; i < 5*size/8+100; i++ {
		raw[i] = 1
	}
	raw[size-1] = 0x5A
	return raw
}

func toQCOW2(t testing.TB, raw []byte, compress bool) []byte {
	t.Helper()
	var out memFile
	if err := WriteQCOW2(&out, bytes.NewReader(raw), int64(len(raw)), compress); err != nil {
		t.Fatal(err)
	}
	if out.pos != int64(len(out.b)) {
		t.Fatalf("left positioned at %d of %d", out.pos, len(out.b))
	}
	return out.b
}

type header struct {
	version, clusterBits, l1Size, rtClusters, refcountOrder, headerLength uint32
	size, l1Offset, rtOffset, incompatible, compatible, autoclear         uint64
}

func parseHeader(t *testing.T, img []byte) header {
	t.Helper()
	if string(img[0:4]) != "QFI\xfb" {
		t.Fatalf("magic = %q", img[0:4])
	}
	be := binary.BigEndian
	return header{
		version: be.Uint32(img[4:]), clusterBits: be.Uint32(img[20:]), size: be.Uint64(img[24:]),
		l1Size: be.Uint32(img[36:]), l1Offset: be.Uint64(img[40:]), rtOffset: be.Uint64(img[48:]),
		rtClusters: be.Uint32(img[56:]), incompatible: be.Uint64(img[72:]), compatible: be.Uint64(img[80:]),
		autoclear: be.Uint64(img[88:]), refcountOrder: be.Uint32(img[96:]), headerLength: be.Uint32(img[100:]),
	}
}

func TestQCOW2Header(t *testing.T) {
	raw := testRaw(3<<20 + 512) // not a whole cluster: the last one is partial
	img := toQCOW2(t, raw, true)
	h := parseHeader(t, img)
	want := header{version: 3, clusterBits: 16, size: uint64(len(raw)), l1Size: 1, refcountOrder: 4, headerLength: 104}
	if h.version != want.version || h.clusterBits != want.clusterBits || h.size != want.size || h.l1Size != want.l1Size ||
		h.refcountOrder != want.refcountOrder || h.headerLength != want.headerLength || h.incompatible|h.compatible|h.autoclear != 0 {
		t.Errorf("header = %+v, want %+v with offsets", h, want)
	}
	for name, off := range map[string]uint64{"L1 table": h.l1Offset, "refcount table": h.rtOffset} {
		if off == 0 || off%clusterSize != 0 || off >= uint64(len(img)) {
			t.Errorf("%s at %d: not a cluster-aligned offset inside the %d-byte file", name, off, len(img))
		}
	}
	if len(img)%clusterSize != 0 {
		t.Errorf("file size %d is not whole clusters", len(img))
	}
	if !bytes.Equal(img[104:112], make([]byte, 8)) {
		t.Error("no end-of-extensions marker after the header")
	}
}

// TestQCOW2ReadsBack decodes the image with an independent reader (the
// standard library's inflate) and recounts every reference as
// `qemu-img check` does.
func TestQCOW2ReadsBack(t *testing.T) {
	raw := testRaw(4 << 20)
	for _, compress := range []bool{true, false} {
		img := toQCOW2(t, raw, compress)
		got, refs, stats := decodeQCOW2(t, img)
		if !bytes.Equal(got, raw) {
			t.Fatalf("compress=%v: decoded image differs from the raw one", compress)
		}
		stored := readRefcounts(t, img)
		for c := range max(len(refs), len(stored)) {
			var want, have uint16
			if c < len(refs) {
				want = refs[c]
			}
			if c < len(stored) {
				have = stored[c]
			}
			if want != have {
				t.Errorf("compress=%v: host cluster %d: refcount %d, referenced %d times", compress, c, have, want)
			}
		}
		t.Logf("compress=%v: %d bytes, %d compressed and %d raw clusters, %d unallocated",
			compress, len(img), stats.compressed, stats.raw, stats.zero)
		if compress && stats.compressed == 0 || !compress && stats.compressed != 0 || stats.zero == 0 {
			t.Errorf("compress=%v: unexpected cluster kinds %+v", compress, stats)
		}
	}
}

type clusterStats struct{ compressed, raw, zero int }

func decodeQCOW2(t *testing.T, img []byte) (data []byte, refs []uint16, stats clusterStats) {
	t.Helper()
	h := parseHeader(t, img)
	be := binary.BigEndian
	refs = make([]uint16, len(img)/clusterSize)
	refRange := func(off, n uint64) {
		for c := off / clusterSize; c <= (off+n-1)/clusterSize; c++ {
			refs[c]++
		}
	}
	refRange(0, clusterSize)
	refRange(h.l1Offset, uint64(h.l1Size)*8)
	refRange(h.rtOffset, uint64(h.rtClusters)*clusterSize)
	for i := uint64(0); i < uint64(h.rtClusters)*clusterSize/8; i++ {
		if b := be.Uint64(img[h.rtOffset+8*i:]); b != 0 {
			refRange(b, clusterSize)
		}
	}
	data = make([]byte, h.size)
	for i := uint64(0); i < uint64(h.l1Size); i++ {
		l1 := be.Uint64(img[h.l1Offset+8*i:])
		l2Off := l1 &^ (l2Copied | 0x1FF)
		if l2Off == 0 {
			continue
		}
		if l1&l2Copied == 0 {
			t.Errorf("L1 entry %d lacks the copied flag", i)
		}
		refRange(l2Off, clusterSize)
		for j := uint64(0); j < l2Entries; j++ {
			guest := (i*l2Entries + j) * clusterSize
			if guest >= h.size {
				break
			}
			e := be.Uint64(img[l2Off+8*j:])
			dst := data[guest:min(guest+clusterSize, h.size)]
			switch {
			case e == 0:
				stats.zero++
			case e&l2Compressed != 0:
				stats.compressed++
				if e&l2Copied != 0 {
					t.Errorf("compressed guest cluster %d has the copied flag", guest/clusterSize)
				}
				off := e & (1<<compressedOffsetBits - 1)
				sectors := (e>>compressedOffsetBits)&0xFF + 1
				n := sectors*512 - off%512
				refRange(off, n)
				end := min(off+n, uint64(len(img)))
				cluster, err := io.ReadAll(flate.NewReader(bytes.NewReader(img[off:end])))
				if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) || len(cluster) != clusterSize {
					t.Fatalf("inflating guest cluster %d: %d bytes, %v", guest/clusterSize, len(cluster), err)
				}
				copy(dst, cluster)
			default:
				stats.raw++
				off := e &^ (l2Copied | 0x1FF)
				if e&l2Copied == 0 || off%clusterSize != 0 {
					t.Errorf("raw guest cluster %d: bad entry %#x", guest/clusterSize, e)
				}
				refRange(off, clusterSize)
				copy(dst, img[off:])
			}
		}
	}
	return data, refs, stats
}

func readRefcounts(t *testing.T, img []byte) []uint16 {
	t.Helper()
	h := parseHeader(t, img)
	be := binary.BigEndian
	var out []uint16
	for i := uint64(0); i < uint64(h.rtClusters)*clusterSize/8; i++ {
		block := be.Uint64(img[h.rtOffset+8*i:])
		if block == 0 {
			break
		}
		for j := uint64(0); j < refsPerBlock && len(out) < len(img)/clusterSize; j++ {
			out = append(out, be.Uint16(img[block+2*j:]))
		}
	}
	return out
}

func TestQCOW2IsDeterministic(t *testing.T) {
	raw := testRaw(8 << 20)
	a, b := toQCOW2(t, raw, true), toQCOW2(t, raw, true)
	if !bytes.Equal(a, b) {
		t.Fatal("two conversions of the same image differ")
	}
}

// TestReusedCompressorMatchesFresh guards the assumption that makes the
// parallel output deterministic: a worker's flate writer, reset between
// clusters, produces what a new writer would.
func TestReusedCompressorMatchesFresh(t *testing.T) {
	raw := testRaw(1 << 20)
	compress := func(w *kflate.Writer, data []byte) []byte {
		var buf bytes.Buffer
		w.Reset(&buf)
		w.Write(data)
		w.Close()
		return buf.Bytes()
	}
	reused, _ := kflate.NewWriterWindow(nil, deflateWindow)
	for i := 0; i < len(raw); i += clusterSize {
		cluster := raw[i : i+clusterSize]
		fresh, _ := kflate.NewWriterWindow(nil, deflateWindow)
		if !bytes.Equal(compress(reused, cluster), compress(fresh, cluster)) {
			t.Fatalf("cluster %d compresses differently with a reused writer", i/clusterSize)
		}
	}
}

func TestQCOW2AllZero(t *testing.T) {
	var out memFile
	if err := WriteQCOW2(&out, zeros{}, 1<<30, true); err != nil {
		t.Fatal(err)
	}
	img := out.b
	// header, L1, refcount table, one refcount block: no data, no L2.
	if len(img) != 4*clusterSize {
		t.Errorf("an all-zero 1 GiB image takes %d bytes, want 4 clusters", len(img))
	}
	h := parseHeader(t, img)
	if h.l1Size != 2 || binary.BigEndian.Uint64(img[h.l1Offset:]) != 0 {
		t.Errorf("L1: %d entries, first %#x; want 2 empty ones", h.l1Size, binary.BigEndian.Uint64(img[h.l1Offset:]))
	}
}

func TestQCOW2Errors(t *testing.T) {
	var out memFile
	if err := WriteQCOW2(&out, bytes.NewReader(make([]byte, 1000)), 1000, true); err == nil {
		t.Error("size 1000 accepted; want a multiple of 512")
	}
	out = memFile{}
	err := WriteQCOW2(&out, bytes.NewReader(make([]byte, 1<<20)), 2<<20, true)
	if !errors.Is(err, errShortRead) {
		t.Errorf("short source: err = %v, want errShortRead", err)
	}
}

func BenchmarkQCOW2(b *testing.B) {
	const size = 256 << 20
	raw := make([]byte, size)
	r := rand.New(rand.NewSource(1))
	// The first half is data: alternating 1 MiB of random bytes and of
	// low-entropy bytes (like program text); the second half is zeros.
	for off := 0; off < size/2; off += 2 << 20 {
		r.Read(raw[off : off+1<<20])
		for i := off + 1<<20; i < off+2<<20; i++ {
			raw[i] = "drover node image "[r.Intn(18)]
		}
	}
	b.SetBytes(size)
	b.ResetTimer()
	for b.Loop() {
		var out discardSeeker
		if err := WriteQCOW2(&out, bytes.NewReader(raw), size, true); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(out.end)/size, "out/in")
	}
}

type discardSeeker struct{ pos, end int64 }

func (d *discardSeeker) Write(p []byte) (int, error) {
	d.pos += int64(len(p))
	d.end = max(d.end, d.pos)
	return len(p), nil
}

func (d *discardSeeker) Seek(off int64, whence int) (int64, error) {
	if whence == io.SeekStart {
		d.pos = off
	}
	return d.pos, nil
}

type zeros struct{}

func (zeros) ReadAt(p []byte, _ int64) (int, error) {
	clear(p)
	return len(p), nil
}
