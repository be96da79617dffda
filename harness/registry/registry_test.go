package registry

import (
	"bytes"
	"context"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// syncBuffer is a log sink the server goroutines may write while the test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestStartPushPullClose(t *testing.T) {
	ctx := context.Background()
	var logBuf syncBuffer
	reg, err := Start(ctx, "0.0.0.0:0", &logBuf)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(reg.Addr(), "127.0.0.1:") || reg.Port() == 0 {
		t.Fatalf("Addr() = %q, Port() = %d; want 127.0.0.1:<nonzero port> for a wildcard listener", reg.Addr(), reg.Port())
	}

	img, err := random.Image(1024, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := Push(ctx, reg, "some/repo", "t1", img); err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewTag(reg.Addr()+"/some/repo:t1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	got, err := remote.Image(ref, remote.WithContext(ctx))
	if err != nil {
		t.Fatalf("pulling back %s: %v", ref, err)
	}
	want, _ := img.Digest()
	if d, err := got.Digest(); err != nil || d != want {
		t.Fatalf("pulled digest = %v (err %v), want %v", d, err, want)
	}
	if !strings.Contains(logBuf.String(), "registry: ") || !strings.Contains(logBuf.String(), "/v2/some/repo/manifests/t1") {
		t.Errorf("request log lacks the manifest request:\n%s", logBuf.String())
	}

	addr := reg.Addr()
	if err := reg.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if resp, err := http.Get("http://" + addr + "/v2/"); err == nil {
		resp.Body.Close()
		t.Fatalf("registry still answers after Close: %s", resp.Status)
	}
}

func TestPushRejectsBadReference(t *testing.T) {
	reg, err := Start(context.Background(), "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	img, err := random.Image(16, 1)
	if err != nil {
		t.Fatal(err)
	}
	err = Push(context.Background(), reg, "Upper/Case", "v1", img)
	if err == nil || !strings.Contains(err.Error(), "Upper/Case:v1") {
		t.Fatalf("Push with an invalid repository: err = %v, want an error naming it", err)
	}
}

func TestStartBadAddress(t *testing.T) {
	_, err := Start(context.Background(), "127.0.0.1:notaport", nil)
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:notaport") {
		t.Fatalf("Start on a bad address: err = %v, want an error naming the address", err)
	}
}

func TestHostsTOML(t *testing.T) {
	got := string(HostsTOML("http://100.64.0.2:5000/"))
	want := `server = "http://100.64.0.2:5000"

[host."http://100.64.0.2:5000"]
  capabilities = ["pull", "resolve"]
`
	if got != want {
		t.Fatalf("HostsTOML =\n%s\nwant\n%s", got, want)
	}
}

func TestRefuseAndRequests(t *testing.T) {
	ctx := context.Background()
	reg, err := Start(ctx, "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	get := func() int {
		resp, err := http.Get("http://" + reg.Addr() + "/v2/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(); code != http.StatusOK {
		t.Fatalf("GET /v2/ served %d", code)
	}
	reg.Refuse(true)
	if code := get(); code != http.StatusServiceUnavailable {
		t.Errorf("refusing registry answered %d, want 503", code)
	}
	reg.Refuse(false)
	if code := get(); code != http.StatusOK {
		t.Errorf("registry serving again answered %d", code)
	}
	// A manifest never pushed: the registry's answer, as the client got
	// it, is what the record says.
	resp, err := http.Get("http://" + reg.Addr() + "/v2/not/built/manifests/1.0")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := []Request{{Method: "GET", Path: "/v2/", Status: 200}, {Method: "GET", Path: "/v2/", Refused: true, Status: 503},
		{Method: "GET", Path: "/v2/", Status: 200}, {Method: "GET", Path: "/v2/not/built/manifests/1.0", Status: resp.StatusCode}}
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("a manifest never pushed answered %d, want 404", resp.StatusCode)
	}
	if got := reg.Requests(); !reflect.DeepEqual(got, want) {
		t.Errorf("requests %+v, want %+v", got, want)
	}
}
