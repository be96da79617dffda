package deb

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/drover-os/drover/image/deb/debtest"
	"github.com/drover-os/drover/image/tree"
)

// benchEntries is about 16 MiB in 400 files of text-like content that
// compresses roughly as well as a package's binaries and docs.
func benchEntries() ([]debtest.Entry, int64) {
	rng := rand.New(rand.NewPCG(1, 2))
	words := make([]string, 512)
	for i := range words {
		b := make([]byte, 2+rng.IntN(10))
		for j := range b {
			b[j] = byte('a' + rng.IntN(26))
		}
		words[i] = string(b)
	}
	var entries []debtest.Entry
	var total int64
	for i := range 400 {
		var buf bytes.Buffer
		for buf.Len() < 40<<10 {
			buf.WriteString(words[rng.IntN(len(words))])
			buf.WriteByte(" \n"[rng.IntN(2)])
		}
		entries = append(entries, debtest.File(fmt.Sprintf("./usr/share/bench/%03d/file", i), 0o644, buf.String()))
		total += int64(buf.Len())
	}
	return entries, total
}

func BenchmarkExtract(b *testing.B) {
	entries, total := benchEntries()
	for _, comp := range []string{"xz", "zst", "gz"} {
		deb := buildDeb(b, "bench", comp, entries)
		b.Run(comp, func(b *testing.B) {
			b.SetBytes(total)
			for b.Loop() {
				if _, err := Extract(bytes.NewReader(deb), "bench", tree.New(), Options{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(deb))/float64(total), "compressed/raw")
		})
	}
}
