package fetch

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
)

func TestFetchParallel(t *testing.T) {
	srv := newFileServer(t)
	var items []Item
	want := map[string][]byte{}
	for i := range 40 {
		data := content(i, 64<<10+i)
		it := srv.add(itemName(i), data)
		items = append(items, it)
		want[it.SHA256] = data
	}
	var log syncBuffer
	f := &Fetcher{Retry: fast(4), Cache: openCache(t, t.TempDir()), HTTP: srv.Client(), Log: &log, Progress: true}
	paths, err := f.Fetch(context.Background(), items)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != len(items) {
		t.Fatalf("got %d paths, want %d", len(paths), len(items))
	}
	for i, it := range items {
		checkFile(t, paths[it.SHA256], want[it.SHA256])
		if n := srv.hitCount(itemName(i)); n != 1 {
			t.Errorf("%s downloaded %d times", it.Name, n)
		}
	}
	// Log is not a terminal: one plain line per download.
	if n := strings.Count(log.String(), "\nfetched ") + 1; !strings.HasPrefix(log.String(), "fetched ") || n != len(items) {
		t.Errorf("log has %d 'fetched' lines, want %d:\n%s", n, len(items), log.String())
	}
	if !strings.Contains(log.String(), "fetched pkg007_1.0_amd64.deb (64.0 KiB)") {
		t.Errorf("log lacks the line for pkg007:\n%s", log.String())
	}

	// Warm: nothing downloaded, nothing said.
	log = syncBuffer{}
	paths2, err := f.Fetch(context.Background(), items)
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range items {
		if paths2[it.SHA256] != paths[it.SHA256] {
			t.Errorf("%s: warm path %s, cold %s", it.Name, paths2[it.SHA256], paths[it.SHA256])
		}
		if n := srv.hitCount(itemName(i)); n != 1 {
			t.Errorf("%s: %d requests after a warm fetch, want 1", it.Name, n)
		}
	}
	if log.String() != "" {
		t.Errorf("warm fetch logged:\n%s", log.String())
	}
}

func TestFetchCorruptEntry(t *testing.T) {
	srv := newFileServer(t)
	data := content(1, 300<<10)
	it := srv.add("containerd_1.7.24~ds1-6_amd64.deb", data)
	c := openCache(t, t.TempDir())
	path, err := c.Put(it.SHA256, strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	bad := append([]byte(nil), data...)
	bad[12345] ^= 0x40
	os.Chmod(path, 0o644)
	if err := os.WriteFile(path, bad, 0o644); err != nil {
		t.Fatal(err)
	}

	var log syncBuffer
	f := &Fetcher{Retry: fast(4), Cache: c, HTTP: srv.Client(), Log: &log}
	got, err := f.FetchOne(context.Background(), it.Name, it.URL, it.SHA256, it.Size)
	if err != nil {
		t.Fatal(err)
	}
	checkFile(t, got, data)
	line := "cache: containerd_1.7.24~ds1-6_amd64.deb is corrupt (want sha256 " + it.SHA256 + ", got " + sum(bad) + "); fetching it again\n"
	if !strings.HasPrefix(log.String(), line) {
		t.Errorf("log:\n%s\nwant it to start with:\n%s", log.String(), line)
	}
	if n := srv.hitCount(it.Name); n != 1 {
		t.Errorf("downloaded %d times, want 1", n)
	}
}

func TestFetchRetriesServerErrors(t *testing.T) {
	srv := newFileServer(t)
	it := srv.add("a.deb", content(2, 1000))
	srv.hook = func(w http.ResponseWriter, r *http.Request, hit int) bool {
		if hit <= 2 {
			http.Error(w, "try later", http.StatusInternalServerError)
			return true
		}
		return false
	}
	var log syncBuffer
	f := &Fetcher{Retry: fast(4), Cache: openCache(t, t.TempDir()), HTTP: srv.Client(), Log: &log}
	if _, err := f.Fetch(context.Background(), []Item{it}); err != nil {
		t.Fatal(err)
	}
	if n := srv.hitCount("a.deb"); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
	if c := strings.Count(log.String(), "500 Internal Server Error; retrying in"); c != 2 {
		t.Errorf("log has %d retry lines, want 2:\n%s", c, log.String())
	}
}

func TestFetchGivesUpAfterRetries(t *testing.T) {
	srv := newFileServer(t)
	it := srv.add("a.deb", content(2, 1000))
	srv.hook = func(w http.ResponseWriter, r *http.Request, hit int) bool {
		w.WriteHeader(http.StatusTooManyRequests)
		return true
	}
	f := &Fetcher{Cache: openCache(t, t.TempDir()), HTTP: srv.Client(), Retry: fast(2)}
	_, err := f.Fetch(context.Background(), []Item{it})
	wantContains(t, err, "fetching a.deb: ", "429 Too Many Requests", "gave up after 3 attempts")
	if n := srv.hitCount("a.deb"); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
}

func TestFetch404(t *testing.T) {
	srv := newFileServer(t)
	it := Item{Name: "gone_1.0_amd64.deb", URL: srv.URL + "/pool/gone_1.0_amd64.deb", SHA256: sum([]byte("x")), Size: 1}
	c := openCache(t, t.TempDir())
	f := &Fetcher{Retry: fast(4), Cache: c, HTTP: srv.Client()}
	_, err := f.Fetch(context.Background(), []Item{it})
	wantContains(t, err, "fetching gone_1.0_amd64.deb: "+it.URL+" returned 404 Not Found; the lock may be stale (run drover lock)")
	var se *StatusError
	if !errors.As(err, &se) || se.StatusCode != 404 {
		t.Errorf("error does not unwrap to a 404 StatusError: %v", err)
	}
	if n := srv.hitCount("pool/gone_1.0_amd64.deb"); n != 1 {
		t.Errorf("404 requested %d times; it must not be retried", n)
	}
	assertNoFiles(t, c.TempDir())
}

func TestFetchSHAMismatch(t *testing.T) {
	srv := newFileServer(t)
	served := content(3, 5000)
	it := srv.add("b.deb", served)
	it.SHA256 = sum([]byte("what the lock expected"))
	c := openCache(t, t.TempDir())
	f := &Fetcher{Retry: fast(4), Cache: c, HTTP: srv.Client()}
	_, err := f.Fetch(context.Background(), []Item{it})
	wantContains(t, err, "fetching b.deb from "+it.URL+": sha256 mismatch: want "+it.SHA256+", got "+sum(served))
	if n := srv.hitCount("b.deb"); n != 1 {
		t.Errorf("mismatch retried: %d requests", n)
	}
	assertNoFiles(t, c.Dir()+"/sha256")
	assertNoFiles(t, c.TempDir())
}

func TestFetchOversize(t *testing.T) {
	srv := newFileServer(t)
	it := srv.add("c.deb", content(4, 5000))
	it.Size = 4000
	c := openCache(t, t.TempDir())
	f := &Fetcher{Retry: fast(4), Cache: c, HTTP: srv.Client()}
	_, err := f.Fetch(context.Background(), []Item{it})
	wantContains(t, err, "fetching c.deb from "+it.URL+": the server sent more than the 4000 bytes")
	assertNoFiles(t, c.TempDir())
}

func TestFetchJoinsAllErrors(t *testing.T) {
	srv := newFileServer(t)
	good := srv.add("good.deb", content(5, 100))
	items := []Item{
		{Name: "missing1.deb", URL: srv.URL + "/missing1.deb", SHA256: sum([]byte("1"))},
		good,
		{Name: "missing2.deb", URL: srv.URL + "/missing2.deb", SHA256: sum([]byte("2"))},
		{Name: "badsha.deb", URL: srv.URL + "/x", SHA256: "XYZ"},
		{Name: "ftp.deb", URL: "ftp://example.invalid/x", SHA256: sum([]byte("3"))},
	}
	f := &Fetcher{Retry: fast(4), Cache: openCache(t, t.TempDir()), HTTP: srv.Client()}
	paths, err := f.Fetch(context.Background(), items)
	wantContains(t, err, "missing1.deb", "missing2.deb", "badsha.deb", "ftp.deb: ", "only http and https")
	if paths[good.SHA256] == "" || len(paths) != 1 {
		t.Errorf("paths = %v; want just good.deb", paths)
	}
}

func TestFetchDuplicateSHA(t *testing.T) {
	srv := newFileServer(t)
	it := srv.add("d.deb", content(6, 100))
	dup := it
	dup.Name = "d-again.deb"
	f := &Fetcher{Retry: fast(4), Cache: openCache(t, t.TempDir()), HTTP: srv.Client()}
	paths, err := f.Fetch(context.Background(), []Item{it, dup})
	if err != nil || len(paths) != 1 || srv.hitCount("d.deb") != 1 {
		t.Errorf("paths=%v err=%v hits=%d; want one download", paths, err, srv.hitCount("d.deb"))
	}
}

func TestFetchCancelled(t *testing.T) {
	srv := newFileServer(t)
	var items []Item
	for i := range 5 {
		items = append(items, srv.add(itemName(i), content(i, 100)))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f := &Fetcher{Retry: fast(4), Cache: openCache(t, t.TempDir()), HTTP: srv.Client()}
	_, err := f.Fetch(ctx, items)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if strings.Count(err.Error(), "canceled") != 1 {
		t.Errorf("cancellation reported more than once: %v", err)
	}
	for i := range items {
		if srv.hitCount(itemName(i)) != 0 {
			t.Errorf("%s requested after cancel", itemName(i))
		}
	}
}

func TestFetchCancelMidDownload(t *testing.T) {
	srv := newFileServer(t)
	it := srv.add("slow.deb", content(7, 1<<20))
	ctx, cancel := context.WithCancel(context.Background())
	srv.hook = func(w http.ResponseWriter, r *http.Request, hit int) bool {
		w.Header().Set("Content-Length", "1048576")
		w.Write(make([]byte, 1000))
		w.(http.Flusher).Flush()
		cancel()
		<-r.Context().Done()
		return true
	}
	c := openCache(t, t.TempDir())
	f := &Fetcher{Retry: fast(4), Cache: c, HTTP: srv.Client()}
	_, err := f.Fetch(ctx, []Item{it})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if srv.hitCount("slow.deb") != 1 {
		t.Errorf("retried after cancel: %d requests", srv.hitCount("slow.deb"))
	}
	// The partial stays for the next run to resume; the final path is empty.
	if _, err := os.Stat(c.Path(it.SHA256)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("final path exists after a cancelled download: %v", err)
	}
}

func TestTwoFetchersShareCache(t *testing.T) {
	srv := newFileServer(t)
	var items []Item
	for i := range 30 {
		items = append(items, srv.add(itemName(i), content(i, 100<<10)))
	}
	dir := t.TempDir()
	var wg sync.WaitGroup
	results := make([]map[string]string, 2)
	errs := make([]error, 2)
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each goroutine opens the cache itself, as a second process would.
			c, err := openCacheErr(dir)
			if err != nil {
				errs[g] = err
				return
			}
			f := &Fetcher{Retry: fast(4), Cache: c, HTTP: srv.Client(), Parallel: 3}
			results[g], errs[g] = f.Fetch(context.Background(), items)
		}()
	}
	wg.Wait()
	c := openCache(t, dir)
	for g := range 2 {
		if errs[g] != nil {
			t.Fatalf("fetcher %d: %v", g, errs[g])
		}
		if len(results[g]) != len(items) {
			t.Errorf("fetcher %d got %d paths", g, len(results[g]))
		}
	}
	for i, it := range items {
		if n := srv.hitCount(itemName(i)); n != 1 {
			t.Errorf("%s downloaded %d times, want once", it.Name, n)
		}
		if ok, actual, err := c.Check(it.SHA256); !ok || err != nil {
			t.Errorf("%s: cache entry does not verify (got %s, %v)", it.Name, actual, err)
		}
	}
	assertNoFiles(t, c.TempDir())
}
