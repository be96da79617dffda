package rootfs

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/drover-os/drover/image/tree"
)

// discard is an io.WriteSeeker that keeps nothing, so the benchmark
// measures the writer rather than the disk.
type discard struct{ pos, size int64 }

func (d *discard) Write(p []byte) (int, error) {
	d.pos += int64(len(p))
	d.size = max(d.size, d.pos)
	return len(p), nil
}

func (d *discard) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
		d.pos = off
	case io.SeekCurrent:
		d.pos += off
	case io.SeekEnd:
		d.pos = d.size + off
	}
	if d.pos < 0 {
		return 0, errors.New("negative position")
	}
	return d.pos, nil
}

// benchTree is about 200 MB in 20,000 files spread over 400 directories,
// sizes skewed small as on a real root filesystem.
func benchTree() *tree.Tree {
	rng := rand.New(rand.NewPCG(3, 4))
	tr := tree.New()
	pool := make([]byte, 4<<20)
	for i := range pool {
		pool[i] = byte(rng.Uint32())
	}
	for i := range 20000 {
		size := rng.IntN(4096)
		if i%10 == 0 {
			size = rng.IntN(160 << 10)
		}
		off := rng.IntN(len(pool) - size)
		n := &tree.Node{Path: fmt.Sprintf("/usr/lib/d%03d/f%05d", i%400, i), Kind: tree.Regular, Mode: 0o644,
			Data: pool[off : off+size], Owner: "bench"}
		if err := tr.Add(n); err != nil {
			panic(err)
		}
	}
	return tr
}

func BenchmarkWrite(b *testing.B) {
	tr := benchTree()
	b.SetBytes(tr.Size())
	var st *Stats
	for b.Loop() {
		var err error
		if st, err = Write(&discard{}, tr, testEpoch, Options{UUID: testUUID}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(st.Size)/float64(st.DataBytes), "image/data")
}
