package fetch

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
)

func TestGetRetries(t *testing.T) {
	srv := newFileServer(t)
	data := []byte("-----BEGIN PGP SIGNED MESSAGE-----\n")
	srv.add("InRelease", data)
	srv.hook = func(w http.ResponseWriter, r *http.Request, hit int) bool {
		if hit == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return true
		}
		return false
	}
	got, err := Get(context.Background(), srv.Client(), fast(4), srv.URL+"/InRelease")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get = %q, %v", got, err)
	}
	if n := srv.hitCount("InRelease"); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

func TestGet404(t *testing.T) {
	srv := newFileServer(t)
	_, err := Get(context.Background(), srv.Client(), fast(4), srv.URL+"/dists/nope/InRelease")
	wantContains(t, err, srv.URL+"/dists/nope/InRelease returned 404 Not Found")
	if n := srv.hitCount("dists/nope/InRelease"); n != 1 {
		t.Errorf("404 retried: %d requests", n)
	}
}

func TestDownloadResumes(t *testing.T) {
	srv := newFileServer(t)
	data := content(20, 300000)
	srv.add("tool.tar.gz", data)
	srv.hook = dropAfterHalf(data)
	var out bytes.Buffer
	sha, n, err := Download(context.Background(), srv.Client(), fast(4), srv.URL+"/tool.tar.gz", &out)
	if err != nil {
		t.Fatal(err)
	}
	if sha != sum(data) || n != int64(len(data)) || !bytes.Equal(out.Bytes(), data) {
		t.Errorf("Download = %s, %d (%d bytes written); want %s, %d", sha, n, out.Len(), sum(data), len(data))
	}
	if got := srv.rangeHeaders("tool.tar.gz"); strings.Join(got, "|") != "|bytes=150000-" {
		t.Errorf("Range headers = %q", got)
	}
}

func TestDownloadRangeIgnored(t *testing.T) {
	srv := newFileServer(t)
	data := content(21, 300000)
	srv.add("tool.tar.gz", data)
	drop := dropAfterHalf(data)
	srv.hook = func(w http.ResponseWriter, r *http.Request, hit int) bool {
		if drop(w, r, hit) {
			return true
		}
		w.Write(data) // ignores Range
		return true
	}
	var out bytes.Buffer
	sha, n, err := Download(context.Background(), srv.Client(), fast(4), srv.URL+"/tool.tar.gz", &out)
	if err != nil {
		t.Fatal(err)
	}
	if sha != sum(data) || n != int64(len(data)) || !bytes.Equal(out.Bytes(), data) {
		t.Errorf("Download = %s, %d (%d bytes written); want %s, %d", sha, n, out.Len(), sum(data), len(data))
	}
}
