package fetch

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
)

func BenchmarkWarmFetch(b *testing.B) {
	const n, size = 200, 512 << 10
	srv := newFileServer(b)
	srv.hook = func(w http.ResponseWriter, r *http.Request, hit int) bool {
		b.Errorf("warm fetch went to the network: %s", r.URL.Path)
		return false
	}
	c := openCache(b, b.TempDir())
	var items []Item
	for i := range n {
		data := content(i, size)
		it := Item{Name: itemName(i), URL: srv.URL + "/" + itemName(i), SHA256: sum(data), Size: size}
		if _, err := c.Put(it.SHA256, bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
		items = append(items, it)
	}
	f := &Fetcher{Retry: fast(4), Cache: c, HTTP: srv.Client()}
	b.SetBytes(n * size)
	b.ResetTimer()
	for b.Loop() {
		paths, err := f.Fetch(context.Background(), items)
		if err != nil || len(paths) != n {
			b.Fatalf("Fetch: %d paths, %v", len(paths), err)
		}
	}
}

// The bar itself only draws on a terminal; this drives the same reporter
// into a buffer to check it stays coherent with logs interleaved.
func TestReporterBar(t *testing.T) {
	var out bytes.Buffer
	r := newReporter(&out, true, 2, 2000)
	it := Item{Name: "a.deb", Size: 1000}
	r.progress(it, 600)
	r.logf("cache: a.deb is corrupt; fetching it again")
	r.progress(it, -600) // a restart gives bytes back
	r.progress(it, 1000)
	r.done(it, 1000)
	r.skip(Item{Name: "b.deb", Size: 1000})
	r.finish()
	s := out.String()
	for _, want := range []string{"cache: a.deb is corrupt; fetching it again\n", "fetched 1 file (1000 B)\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%q", want, s)
		}
	}
	if strings.Contains(s, "fetched a.deb") {
		t.Errorf("per-file line printed while a bar is shown:\n%q", s)
	}
}
