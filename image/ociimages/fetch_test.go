package ociimages

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/drover-os/drover/image/cache"
	"github.com/drover-os/drover/image/lock"
	"github.com/drover-os/drover/image/oci"
	"github.com/drover-os/drover/image/recipe"
)

// testRegistry is go-containerregistry's registry behind a switch that
// refuses every request, with a record of what it was asked.
type testRegistry struct {
	*httptest.Server
	mu      sync.Mutex
	refuse  bool
	asked   []string
	corrupt string // a path answered with other bytes
}

func startRegistry(t *testing.T) *testRegistry {
	r := &testRegistry{}
	inner := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		refuse, corrupt := r.refuse, r.corrupt
		r.asked = append(r.asked, req.Method+" "+req.URL.Path)
		r.mu.Unlock()
		if refuse {
			http.Error(w, "refused", http.StatusServiceUnavailable)
			return
		}
		if corrupt != "" && req.URL.Path == corrupt && req.Method == http.MethodGet {
			w.Write([]byte("not the blob"))
			return
		}
		inner.ServeHTTP(w, req)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *testRegistry) host() string { return strings.TrimPrefix(r.URL, "http://") }

// pushIndex pushes a two-architecture program index as repo:tag and
// returns its digest.
func pushIndex(t *testing.T, r *testRegistry, repo, content string) string {
	idx, err := oci.ProgramIndex("app", map[string][]byte{"amd64": []byte(content + " amd64"), "arm64": []byte(content + " arm64")}, oci.GzipLayers)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewTag(r.host()+"/"+repo+":v1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatal(err)
	}
	d, _ := idx.Digest()
	return d.String()
}

func testRecipe(t *testing.T, refs ...string) *recipe.Recipe {
	y := "name: x\npackages: [systemd]\nimages:\n"
	for _, ref := range refs {
		y += "  - ref: " + ref + "\n"
	}
	r, err := recipe.Parse("r.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestLockFetchLayout(t *testing.T) {
	reg := startRegistry(t)
	digest := pushIndex(t, reg, "team/app", "program")
	c, err := cache.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mirrors, err := ParseMirrors([]string{"registry.example.test=" + reg.URL})
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Cache: c, Mirrors: mirrors}
	ref := "registry.example.test/team/app:v1@" + digest
	locked, err := Lock(context.Background(), testRecipe(t, ref), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(locked) != 1 || locked[0].Ref != ref || locked[0].Platform != "linux/amd64" || locked[0].Manifest == digest || locked[0].Size < 100 {
		t.Fatalf("locked %+v", locked)
	}
	// Everything is in the cache now: a fetch asks no registry.
	reg.mu.Lock()
	reg.refuse, reg.asked = true, nil
	reg.mu.Unlock()
	images, err := Fetch(context.Background(), &lock.Lock{Images: locked}, o)
	if err != nil {
		t.Fatalf("fetch from a warm cache with the registry refusing: %v", err)
	}
	if len(reg.asked) != 0 {
		t.Errorf("a warm fetch asked the registry: %v", reg.asked)
	}
	im := images[0]
	if im.Index == nil || im.Index.Digest != digest || im.Manifest.Digest != locked[0].Manifest || len(im.Layers) != 1 {
		t.Fatalf("image %+v", im)
	}
	files, err := Layout(images)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range files {
		paths = append(paths, f.Path)
	}
	// index, manifest, config, layer: amd64's only.
	if len(files) != 6 || paths[len(paths)-2] != "index.json" || paths[len(paths)-1] != "oci-layout" {
		t.Errorf("layout files %v", paths)
	}
	index := string(files[len(files)-2].Data)
	for _, want := range []string{`"io.containerd.image.name":"registry.example.test/team/app:v1"`, `"io.containerd.image.name":"registry.example.test/team/app@` + digest + `"`} {
		if !strings.Contains(index, want) {
			t.Errorf("index.json lacks %s: %s", want, index)
		}
	}

	// A locked manifest the reference's digest does not give is refused.
	bad := locked[0]
	bad.Manifest = "sha256:" + strings.Repeat("0", 64)
	if _, err := Fetch(context.Background(), &lock.Lock{Images: []lock.Image{bad}}, o); err == nil || !strings.Contains(err.Error(), "the lock pins manifest sha256:000") {
		t.Errorf("a forged lock line: %v", err)
	}
}

func TestFetchRefusesWrongContent(t *testing.T) {
	reg := startRegistry(t)
	digest := pushIndex(t, reg, "team/app", "program")
	c, _ := cache.Open(t.TempDir())
	o := Options{Cache: c, Mirrors: Mirrors{"registry.example.test": reg.URL}}
	ref := "registry.example.test/team/app@" + digest
	locked, err := Lock(context.Background(), testRecipe(t, ref), o)
	if err != nil {
		t.Fatal(err)
	}
	// A registry serving other bytes for a layer: nothing lands in the
	// cache, and the error says so.
	c2, _ := cache.Open(t.TempDir())
	images, _ := Fetch(context.Background(), &lock.Lock{Images: locked}, Options{Cache: c, Mirrors: o.Mirrors})
	layer := images[0].Layers[0].Digest
	reg.corrupt = "/v2/team/app/blobs/" + layer
	_, err = Fetch(context.Background(), &lock.Lock{Images: locked}, Options{Cache: c2, Mirrors: o.Mirrors})
	if err == nil || !strings.Contains(err.Error(), layer) {
		t.Fatalf("a corrupt layer: %v", err)
	}
	if _, err := os.Stat(c2.Path(strings.TrimPrefix(layer, "sha256:"))); err == nil {
		t.Error("the corrupt layer is in the cache")
	}
	// An unknown digest fails the lock naming the recipe's line.
	_, err = Lock(context.Background(), testRecipe(t, "registry.example.test/team/app@sha256:"+strings.Repeat("a", 64)), o)
	if err == nil || !strings.Contains(err.Error(), "r.yaml:4: images: registry.example.test/team/app@sha256:aaaa") {
		t.Errorf("an unknown digest: %v", err)
	}
}

func TestParseMirrors(t *testing.T) {
	m, err := ParseMirrors([]string{"a.test=http://127.0.0.1:5000, b.test=https://m.test/", "c.test=https://m.test"})
	if err != nil || m["a.test"] != "http://127.0.0.1:5000" || m["b.test"] != "https://m.test" || len(m) != 3 {
		t.Errorf("%v %v", m, err)
	}
	for _, bad := range []string{"a.test", "a.test=ftp://x", "=http://x", "a.test=http://x/path"} {
		if _, err := ParseMirrors([]string{bad}); err == nil || !strings.Contains(err.Error(), "want HOST=URL") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
