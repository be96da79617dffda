package containerd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeBlob stores data under blobs/sha256 of dir and returns its
// descriptor.
func writeBlob(t *testing.T, dir, mediaType string, data []byte) ociDescriptor {
	sum := sha256.Sum256(data)
	h := hex.EncodeToString(sum[:])
	if err := os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "blobs", "sha256", h), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return ociDescriptor{MediaType: mediaType, Digest: "sha256:" + h, Size: int64(len(data))}
}

// cacheLayout is a directory layout as drover build writes the image
// cache: an index for two platforms holding one platform's manifest, whose
// layer is larger than what ReadLayoutDir reads into memory.
func cacheLayout(t *testing.T) (dir string, layer ociDescriptor, index ociDescriptor) {
	dir = t.TempDir()
	layerData := []byte(strings.Repeat("layer bytes ", (inMemory+3*writeChunk)/12))
	layer = writeBlob(t, dir, "application/vnd.oci.image.layer.v1.tar+gzip", layerData)
	config := writeBlob(t, dir, "application/vnd.oci.image.config.v1+json", []byte(`{"architecture":"amd64","os":"linux"}`))
	man, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": mediaOCIManifest, "config": config, "layers": []ociDescriptor{layer}})
	m := writeBlob(t, dir, mediaOCIManifest, man)
	other := ociDescriptor{MediaType: mediaOCIManifest, Digest: "sha256:" + strings.Repeat("9", 64), Size: 400}
	idx, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": mediaOCIIndex, "manifests": []ociDescriptor{m, other}})
	index = writeBlob(t, dir, mediaOCIIndex, idx)
	var names []ociDescriptor
	for _, n := range []string{"registry.example.test/app:v1", "registry.example.test/app@" + index.Digest} {
		d := index
		d.Annotations = map[string]string{annotationContainerdName: n}
		names = append(names, d)
	}
	top, _ := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": names})
	os.WriteFile(filepath.Join(dir, "index.json"), top, 0o644)
	os.WriteFile(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644)
	return dir, layer, index
}

func TestImportLayoutDir(t *testing.T) {
	dir, layer, index := cacheLayout(t)
	l, err := ReadLayoutDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Blobs) != 4 || len(l.Images) != 2 || l.Images[0].Target.Digest != index.Digest {
		t.Fatalf("layout %d blobs, images %+v", len(l.Blobs), l.Images)
	}
	for _, b := range l.Blobs {
		if (b.Digest == layer.Digest) != (b.Data == nil && b.Path != "") {
			t.Errorf("blob %s (%d bytes): data in memory %v, file %q: only the layer stays in its file", b.Digest, b.Size, b.Data != nil, b.Path)
		}
	}
	f, sock := startFake(t)
	c := New(sock, CRINamespace)
	defer c.Close()
	res, err := c.Import(context.Background(), l, pin)
	if err != nil {
		t.Fatal(err)
	}
	if res.Written != 4 || len(res.Created) != 2 || f.blobs[layer.Digest] == nil || f.images["registry.example.test/app:v1"].Labels["io.cri-containerd.pinned"] != "pinned" {
		t.Errorf("import %s", res)
	}
	// The layer went from its file in chunks, the digest checked by the
	// (fake) containerd at the commit.
	chunks := 0
	for _, w := range f.writes {
		if w[len(w)-1].Expected == layer.Digest {
			chunks = len(w)
		}
	}
	if want := int(layer.Size+writeChunk-1) / writeChunk; chunks != want {
		t.Errorf("the layer went in %d messages, want %d", chunks, want)
	}
}

func TestLayoutDirRefusals(t *testing.T) {
	// A large blob is not read, so containerd is what refuses other
	// bytes under its name: the import fails naming the blob.
	dir, layer, _ := cacheLayout(t)
	p := filepath.Join(dir, "blobs", "sha256", strings.TrimPrefix(layer.Digest, "sha256:"))
	data, _ := os.ReadFile(p)
	data[100] ^= 1
	os.WriteFile(p, data, 0o644)
	l, err := ReadLayoutDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	f, sock := startFake(t)
	c := New(sock, CRINamespace)
	defer c.Close()
	if _, err := c.Import(context.Background(), l, pin); err == nil || !strings.Contains(err.Error(), layer.Digest) || !strings.Contains(err.Error(), "unexpected commit digest") {
		t.Errorf("a changed layer: %v", err)
	}
	if f.blobs[layer.Digest] != nil {
		t.Error("containerd kept the changed layer")
	}

	// A small blob is checked on reading.
	dir, _, index := cacheLayout(t)
	p = filepath.Join(dir, "blobs", "sha256", strings.TrimPrefix(index.Digest, "sha256:"))
	data, _ = os.ReadFile(p)
	os.WriteFile(p, append(data, ' '), 0o644)
	if _, err := ReadLayoutDir(dir); err == nil || !strings.Contains(err.Error(), "has sha256") {
		t.Errorf("a changed index: %v", err)
	}

	// An index none of whose manifests is there is refused.
	dir, _, _ = cacheLayout(t)
	matches, _ := filepath.Glob(filepath.Join(dir, "blobs", "sha256", "*"))
	for _, m := range matches {
		if b, _ := os.ReadFile(m); strings.Contains(string(b), `"config"`) {
			os.Remove(m)
		}
	}
	if _, err := ReadLayoutDir(dir); err == nil || !strings.Contains(err.Error(), "which the layout archive does not hold") {
		t.Errorf("no manifest of the index: %v", err)
	}
}
