package ignition

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func remoteConfig(url string, body []byte) string {
	sum := sha256.Sum256(body)
	return `{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/opt/app.conf","contents":{"source":"` + url +
		`","verification":{"hash":"sha256-` + hex.EncodeToString(sum[:]) + `"}}}]}}`
}

// TestRemoteContentsFetchedOnce: contents verified on the first boot are
// stored by their hash and served from there on later boots; a damaged
// stored copy is fetched again.
func TestRemoteContentsFetchedOnce(t *testing.T) {
	body := []byte("listen = 8080\n")
	var gets atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gets.Add(1)
		w.Write(body)
	}))
	defer srv.Close()
	cfg := remoteConfig(srv.URL+"/app.conf", body)
	cache := DirCache(filepath.Join(t.TempDir(), "contents"))
	boot := func() {
		t.Helper()
		plan, err := Prepare(context.Background(), []byte(cfg), Options{Fetcher: &HTTPFetcher{Client: srv.Client()}, Contents: cache})
		must(t, err)
		root := newRoot(t)
		_, err = Apply(plan, root)
		must(t, err)
		if b, _ := os.ReadFile(filepath.Join(root, "etc/opt/app.conf")); string(b) != string(body) {
			t.Fatalf("/etc/opt/app.conf = %q", b)
		}
	}
	boot()
	boot()
	if n := gets.Load(); n != 1 {
		t.Errorf("%d requests for two boots, want 1", n)
	}
	sum := sha256.Sum256(body)
	stored := filepath.Join(string(cache), "sha256-"+hex.EncodeToString(sum[:]))
	fi, err := os.Stat(stored)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("stored copy %s: %v %v", stored, fi, err)
	}
	must(t, os.WriteFile(stored, []byte("damaged"), 0o600))
	boot()
	if n := gets.Load(); n != 2 {
		t.Errorf("a damaged stored copy was used (%d requests)", n)
	}
	if b, _ := os.ReadFile(stored); string(b) != string(body) {
		t.Errorf("stored copy not repaired: %q", b)
	}
}

// TestRemoteClientIgnoresProxyEnvironment: a proxy named by the
// environment is never used (the node file configures the node, not the
// agent's environment).
func TestRemoteClientIgnoresProxyEnvironment(t *testing.T) {
	var proxied atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Add(1)
		w.Write([]byte("from the proxy"))
	}))
	defer proxy.Close()
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("HTTPS_PROXY", proxy.URL)
	t.Setenv("NO_PROXY", "")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// files.example.test never resolves: only a proxy could answer.
	b, err := (&HTTPFetcher{}).Get(ctx, "http://files.example.test/motd")
	if err == nil || proxied.Load() != 0 {
		t.Fatalf("fetched %q through the environment's proxy (%d requests, err %v)", b, proxied.Load(), err)
	}
}

func TestRemoteClientLimits(t *testing.T) {
	var hops atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/loop":
			hops.Add(1)
			http.Redirect(w, r, "/loop", http.StatusFound)
		default:
			w.Write(make([]byte, 60))
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	client := clientAdmitting(t, srv.Listener.Addr())
	_, err := (&HTTPFetcher{Client: client}).Get(ctx, srv.URL+"/loop")
	if err == nil || !strings.Contains(err.Error(), "stopped after 3 redirects") || hops.Load() != 4 {
		t.Errorf("redirect loop: %d requests, %v", hops.Load(), err)
	}
	f := &HTTPFetcher{Client: client, MaxTotal: 100}
	if _, err := f.Get(ctx, srv.URL+"/a"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Get(ctx, srv.URL+"/b"); err == nil || !strings.Contains(err.Error(), "together are larger than 100 bytes") {
		t.Errorf("total limit: %v", err)
	}
	c := RemoteClient()
	tr := c.Transport.(*http.Transport)
	if c.Timeout <= 0 || tr.ResponseHeaderTimeout <= 0 || tr.TLSHandshakeTimeout <= 0 || tr.Proxy != nil {
		t.Errorf("RemoteClient: timeout %v, header %v, handshake %v, proxy set %v", c.Timeout, tr.ResponseHeaderTimeout, tr.TLSHandshakeTimeout, tr.Proxy != nil)
	}
}
