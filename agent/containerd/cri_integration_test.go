//go:build integration

package containerd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/drover-os/drover/image/lock"
	"github.com/drover-os/drover/image/ociimages"
)

// TestCRIFindsImportedImages imports a cached images' layout as drover
// build writes it (image/ociimages: Names and Layout; an index that lists
// a platform whose manifest the layout leaves out) into a real containerd
// with its CRI plugin, and asks the CRI's image service, as the kubelet
// does, for each image by every name a pod may give it: ImageStatus
// answers with the image (its config's digest as ID, the stored names as
// tags and digests, pinned where containerd reports it). Both orders the
// node sees: the import while the CRI runs (it learns of the images from
// containerd's events) and before it starts (it loads them when it
// starts). DROVER_TEST_CONTAINERD names the node's containerd 2.x (from
// the build); without it the host's.
func TestCRIFindsImportedImages(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run containerd (CI runs the integration tier as root)")
	}
	daemon := tool(t, "DROVER_TEST_CONTAINERD", "containerd")
	dir, images := cachedLayout(t)
	for _, order := range []string{"import while the CRI runs", "import before the CRI starts"} {
		t.Run(order, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			state, err := os.MkdirTemp("", "drover-cri-")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(state)
			before := order == "import before the CRI starts"
			sock, stop := startContainerd(t, daemon, state, !before)
			l, err := ReadLayoutDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			c := New(sock, CRINamespace)
			res, err := c.Import(ctx, l, map[string]string{"io.cri-containerd.pinned": "pinned"})
			c.Close()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("import: %s", res)
			if before {
				stop()
				sock, _ = startContainerd(t, daemon, state, true)
			}
			conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// containerd creates its socket a moment before it serves.
			var version *runtime.VersionResponse
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				if version, err = runtime.NewRuntimeServiceClient(conn).Version(ctx, &runtime.VersionRequest{}); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the CRI's Version: %v", err)
				}
			}
			// The CRI reports pinned images from containerd 1.7 on.
			reportsPinned := !strings.HasPrefix(version.RuntimeVersion, "1.6.") && !strings.HasPrefix(version.RuntimeVersion, "v1.6.")
			is := runtime.NewImageServiceClient(conn)
			for _, im := range images {
				for _, name := range im.podNames {
					// An import while the CRI runs reaches its store
					// through containerd's events, one name at a time.
					var problem string
					for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
						st, err := is.ImageStatus(ctx, &runtime.ImageStatusRequest{Image: &runtime.ImageSpec{Image: name}})
						if err != nil {
							t.Fatalf("ImageStatus %s: %v", name, err)
						}
						got := st.GetImage()
						switch {
						case got == nil:
							problem = fmt.Sprintf("%s (%s): the CRI has no such image: a pod of it would pull", name, version.RuntimeVersion)
						case got.Id != im.config || !slices.Contains(got.RepoTags, im.tag) || !slices.Contains(got.RepoDigests, im.digestName):
							problem = fmt.Sprintf("%s: the CRI answers %v, want ID %s, tag %s and %s", name, got, im.config, im.tag, im.digestName)
						case reportsPinned && !got.Pinned:
							problem = fmt.Sprintf("%s: the CRI answers %v, not pinned", name, got)
						default:
							problem = ""
						}
						if problem == "" || time.Now().After(deadline) {
							break
						}
					}
					if problem != "" {
						t.Error(problem)
					}
				}
			}
		})
	}
}

// cachedImage is one image of cachedLayout: the names a pod may give it,
// and what the CRI must answer.
type cachedImage struct {
	podNames                        []string
	digest, config, tag, digestName string
}

// cachedLayout writes a cached images' layout as drover build does: an
// index of two platforms of which the layout holds amd64's (the lock's),
// in a registry's repository; and a single manifest on Docker Hub, which
// pods name in its short form.
func cachedLayout(t *testing.T) (string, []cachedImage) {
	t.Helper()
	blobs := t.TempDir()
	blob := func(mediaType string, data []byte) ociimages.Blob {
		sum := sha256.Sum256(data)
		p := filepath.Join(blobs, hex.EncodeToString(sum[:]))
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return ociimages.Blob{Digest: "sha256:" + hex.EncodeToString(sum[:]), MediaType: mediaType, Size: int64(len(data)), Path: p}
	}
	desc := func(b ociimages.Blob) map[string]any {
		return map[string]any{"mediaType": b.MediaType, "digest": b.Digest, "size": b.Size}
	}
	js := func(v any) []byte {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	image := func(ref, program string, index bool) (*ociimages.Image, cachedImage) {
		// The layer's content does not matter: nothing unpacks it.
		layer := blob("application/vnd.oci.image.layer.v1.tar", []byte(program+" layer"))
		config := blob("application/vnd.oci.image.config.v1+json", js(map[string]any{
			"architecture": "amd64", "os": "linux", "config": map[string]any{"Entrypoint": []string{"/" + program}},
			"rootfs": map[string]any{"type": "layers", "diff_ids": []string{layer.Digest}}}))
		manifest := blob("application/vnd.oci.image.manifest.v1+json", js(map[string]any{"schemaVersion": 2,
			"mediaType": "application/vnd.oci.image.manifest.v1+json", "config": desc(config), "layers": []any{desc(layer)}}))
		im := &ociimages.Image{Manifest: manifest, Config: config, Layers: []ociimages.Blob{layer}}
		top := manifest
		if index {
			arm64 := desc(manifest)
			arm64["digest"] = "sha256:" + strings.Repeat("a", 64) // not in the layout
			amd64 := desc(manifest)
			amd64["platform"], arm64["platform"] = map[string]string{"os": "linux", "architecture": "amd64"}, map[string]string{"os": "linux", "architecture": "arm64"}
			idx := blob("application/vnd.oci.image.index.v1+json", js(map[string]any{"schemaVersion": 2,
				"mediaType": "application/vnd.oci.image.index.v1+json", "manifests": []any{amd64, arm64}}))
			im.Index, top = &idx, idx
		}
		im.Lock = lock.Image{Ref: ref + "@" + top.Digest, Platform: "linux/amd64", Manifest: manifest.Digest}
		names, err := ociimages.Names(im.Lock.Ref)
		if err != nil {
			t.Fatal(err)
		}
		return im, cachedImage{digest: top.Digest, config: config.Digest, tag: names[0], digestName: names[1]}
	}
	app, appWant := image("registry.example.test/team/app:v1", "app", true)
	appWant.podNames = []string{"registry.example.test/team/app:v1", appWant.digestName}
	hub, hubWant := image("docker.io/library/hello:v1", "hello", false)
	hubWant.podNames = []string{"hello:v1", "docker.io/library/hello:v1", "library/hello@" + hubWant.digest}
	files, err := ociimages.Layout([]*ociimages.Image{app, hub})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, f := range files {
		data := f.Data
		if f.Source != "" {
			if data, err = os.ReadFile(f.Source); err != nil {
				t.Fatal(err)
			}
		}
		p := filepath.Join(dir, f.Path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, []cachedImage{appWant, hubWant}
}
