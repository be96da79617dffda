package fetch

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// dropAfterHalf serves the first half of data with the full Content-Length
// and then breaks the connection, as a flaky mirror does.
func dropAfterHalf(data []byte) func(http.ResponseWriter, *http.Request, int) bool {
	return func(w http.ResponseWriter, r *http.Request, hit int) bool {
		if hit != 1 {
			return false
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.Write(data[:len(data)/2])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}
}

func TestFetchResumesWithRange(t *testing.T) {
	srv := newFileServer(t)
	data := content(10, 1<<20)
	it := srv.add("big.deb", data)
	srv.hook = dropAfterHalf(data)
	var log syncBuffer
	f := &Fetcher{Retry: fast(4), Cache: openCache(t, t.TempDir()), HTTP: srv.Client(), Log: &log}
	path, err := f.FetchOne(context.Background(), it.Name, it.URL, it.SHA256, it.Size)
	if err != nil {
		t.Fatal(err)
	}
	checkFile(t, path, data)
	got := srv.rangeHeaders("big.deb")
	if want := []string{"", "bytes=524288-"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("Range headers = %q, want %q", got, want)
	}
	if !strings.Contains(log.String(), "fetching big.deb: resuming at byte 524288") {
		t.Errorf("log does not mention the resume:\n%s", log.String())
	}
}

// writePartial leaves a partial download as an interrupted run would.
func writePartial(t *testing.T, f *Fetcher, sha string, data []byte) {
	t.Helper()
	if err := os.WriteFile(f.Cache.PartialPath(sha), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFetchResumesAcrossRuns(t *testing.T) {
	srv := newFileServer(t)
	data := content(11, 10000)
	it := srv.add("e.deb", data)
	f := &Fetcher{Retry: fast(4), Cache: openCache(t, t.TempDir()), HTTP: srv.Client()}
	writePartial(t, f, it.SHA256, data[:3000])
	path, err := f.FetchOne(context.Background(), it.Name, it.URL, it.SHA256, it.Size)
	if err != nil {
		t.Fatal(err)
	}
	checkFile(t, path, data)
	if got := srv.rangeHeaders("e.deb"); len(got) != 1 || got[0] != "bytes=3000-" {
		t.Errorf("Range headers = %q, want [bytes=3000-]", got)
	}
	assertNoFiles(t, f.Cache.TempDir())
}

func TestFetchRangeIgnored(t *testing.T) {
	srv := newFileServer(t)
	data := content(12, 10000)
	it := srv.add("f.deb", data)
	srv.hook = func(w http.ResponseWriter, r *http.Request, hit int) bool {
		w.Write(data) // 200 with everything, whatever Range said
		return true
	}
	var log syncBuffer
	f := &Fetcher{Retry: fast(4), Cache: openCache(t, t.TempDir()), HTTP: srv.Client(), Log: &log}
	writePartial(t, f, it.SHA256, data[:3000])
	path, err := f.FetchOne(context.Background(), it.Name, it.URL, it.SHA256, it.Size)
	if err != nil {
		t.Fatal(err)
	}
	checkFile(t, path, data)
	if !strings.Contains(log.String(), "fetching f.deb: the server ignored the range request; downloading from the start") {
		t.Errorf("log:\n%s", log.String())
	}
}

func TestFetchBadPartialStartsOver(t *testing.T) {
	srv := newFileServer(t)
	data := content(13, 10000)
	it := srv.add("g.deb", data)
	f := &Fetcher{Retry: fast(4), Cache: openCache(t, t.TempDir()), HTTP: srv.Client()}
	writePartial(t, f, it.SHA256, bytes.Repeat([]byte{'z'}, 3000)) // not a prefix of data
	path, err := f.FetchOne(context.Background(), it.Name, it.URL, it.SHA256, it.Size)
	if err != nil {
		t.Fatal(err)
	}
	checkFile(t, path, data)
	if got := srv.rangeHeaders("g.deb"); strings.Join(got, "|") != "bytes=3000-|" {
		t.Errorf("Range headers = %q, want a resume then a full download", got)
	}
}

func TestFetchCompletePartialNeedsNoNetwork(t *testing.T) {
	srv := newFileServer(t)
	data := content(14, 10000)
	it := srv.add("h.deb", data)
	f := &Fetcher{Retry: fast(4), Cache: openCache(t, t.TempDir()), HTTP: srv.Client()}
	writePartial(t, f, it.SHA256, data) // downloaded, then interrupted before the rename
	path, err := f.FetchOne(context.Background(), it.Name, it.URL, it.SHA256, it.Size)
	if err != nil {
		t.Fatal(err)
	}
	checkFile(t, path, data)
	if n := srv.hitCount("h.deb"); n != 0 {
		t.Errorf("%d requests for a complete partial", n)
	}
}

func TestFetchOverlongPartialStartsOver(t *testing.T) {
	srv := newFileServer(t)
	data := content(15, 10000)
	it := srv.add("i.deb", data)
	f := &Fetcher{Retry: fast(4), Cache: openCache(t, t.TempDir()), HTTP: srv.Client()}
	writePartial(t, f, it.SHA256, append(append([]byte(nil), data...), 'x'))
	path, err := f.FetchOne(context.Background(), it.Name, it.URL, it.SHA256, it.Size)
	if err != nil {
		t.Fatal(err)
	}
	checkFile(t, path, data)
	if got := srv.rangeHeaders("i.deb"); len(got) != 1 || got[0] != "" {
		t.Errorf("Range headers = %q, want one full download", got)
	}
}

func TestFetchStalledConnection(t *testing.T) {
	old := stallTimeout
	stallTimeout = 200 * time.Millisecond
	defer func() { stallTimeout = old }()
	srv := newFileServer(t)
	data := content(16, 100000)
	it := srv.add("j.deb", data)
	srv.hook = func(w http.ResponseWriter, r *http.Request, hit int) bool {
		if hit != 1 {
			return false
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.Write(data[:40000])
		w.(http.Flusher).Flush()
		<-r.Context().Done() // hang until the client gives up
		return true
	}
	var log syncBuffer
	f := &Fetcher{Retry: fast(4), Cache: openCache(t, t.TempDir()), HTTP: srv.Client(), Log: &log}
	path, err := f.FetchOne(context.Background(), it.Name, it.URL, it.SHA256, it.Size)
	if err != nil {
		t.Fatal(err)
	}
	checkFile(t, path, data)
	if got := srv.rangeHeaders("j.deb"); len(got) != 2 || got[1] != "bytes=40000-" {
		t.Errorf("Range headers = %q, want a resume at 40000", got)
	}
	if !strings.Contains(log.String(), "no data received for 200ms; retrying") {
		t.Errorf("log:\n%s", log.String())
	}
}
