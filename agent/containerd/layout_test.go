package containerd

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/drover-os/drover/image/oci"
)

// sandboxLayout is the sandbox image's archive as drover build writes it
// (image/oci), with stand-ins for the two pause binaries.
func sandboxLayout(t *testing.T) ([]byte, string) {
	t.Helper()
	idx, err := oci.ProgramIndex("pause", map[string][]byte{"amd64": []byte("amd64 pause"), "arm64": []byte("arm64 pause")}, oci.PlainLayers)
	if err != nil {
		t.Fatal(err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	data, err := oci.LayoutTar(idx, "drover.dev/pause:3.10", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return data, d.String()
}

// TestReadLayout: the sandbox archive gives both its names at the index,
// every blob once and after the blobs it references, and the references
// labelled as containerd's own importer labels them.
func TestReadLayout(t *testing.T) {
	data, digest := sandboxLayout(t)
	l, err := ReadLayout(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Images) != 2 || l.Images[0].Name != "drover.dev/pause:3.10" || l.Images[1].Name != "drover.dev/pause@"+digest ||
		l.Images[0].Target.Digest != digest || l.Images[1].Target != l.Images[0].Target || l.Images[0].Target.MediaType != mediaOCIIndex {
		t.Fatalf("images %+v", l.Images)
	}
	if len(l.Blobs) != 7 {
		t.Fatalf("%d blobs, want the index, two manifests, two configs, two layers", len(l.Blobs))
	}
	seen := map[string]bool{}
	for _, b := range l.Blobs {
		if seen[b.Digest] {
			t.Errorf("blob %s twice", b.Digest)
		}
		for _, child := range b.Labels {
			if !seen[child] {
				t.Errorf("blob %s comes before %s, which it references", b.Digest, child)
			}
		}
		seen[b.Digest] = true
		if int64(len(b.Data)) != b.Size {
			t.Errorf("blob %s: %d bytes, size %d", b.Digest, len(b.Data), b.Size)
		}
	}
	index := l.Blobs[len(l.Blobs)-1]
	var idx ociNode
	json.Unmarshal(index.Data, &idx)
	if index.Digest != digest || len(index.Labels) != 2 ||
		index.Labels["containerd.io/gc.ref.content.m.0"] != idx.Manifests[0].Digest || index.Labels["containerd.io/gc.ref.content.m.1"] != idx.Manifests[1].Digest {
		t.Errorf("index last, referencing its manifests as m.0 and m.1: %s %v", index.Digest, index.Labels)
	}
	for _, b := range l.Blobs {
		if b.MediaType != mediaOCIManifest {
			continue
		}
		var m ociNode
		json.Unmarshal(b.Data, &m)
		want := map[string]string{"containerd.io/gc.ref.content.config": m.Config.Digest, "containerd.io/gc.ref.content.l.0": m.Layers[0].Digest}
		if len(b.Labels) != 2 || b.Labels["containerd.io/gc.ref.content.config"] != want["containerd.io/gc.ref.content.config"] ||
			b.Labels["containerd.io/gc.ref.content.l.0"] != want["containerd.io/gc.ref.content.l.0"] {
			t.Errorf("manifest %s labels %v, want %v", b.Digest, b.Labels, want)
		}
	}
}

// rewrite returns the layout archive with fn applied to each member
// (returning nil drops it).
func rewrite(t *testing.T, data []byte, fn func(name string, body []byte) []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		var body bytes.Buffer
		body.ReadFrom(tr)
		b := body.Bytes()
		if h.Typeflag == tar.TypeReg {
			if b = fn(h.Name, b); b == nil {
				continue
			}
			h.Size = int64(len(b))
		}
		tw.WriteHeader(h)
		tw.Write(b)
	}
	tw.Close()
	return out.Bytes()
}

// TestReadLayoutRefuses: what is not a whole, intact layout with named
// images is an error that says what is wrong.
func TestReadLayoutRefuses(t *testing.T) {
	data, digest := sandboxLayout(t)
	for _, tc := range []struct {
		name string
		fn   func(name string, body []byte) []byte
		want string
	}{
		{"a blob's bytes changed", func(n string, b []byte) []byte {
			if strings.HasSuffix(n, strings.TrimPrefix(digest, "sha256:")) {
				return append(b, ' ')
			}
			return b
		}, "blob blobs/sha256/" + strings.TrimPrefix(digest, "sha256:") + " of the layout archive has sha256 "},
		{"a blob missing", func(n string, b []byte) []byte {
			if strings.HasSuffix(n, strings.TrimPrefix(digest, "sha256:")) {
				return nil
			}
			return b
		}, "index.json manifests[0] names blob " + digest + ", which the layout archive does not hold"},
		{"no oci-layout", func(n string, b []byte) []byte {
			if strings.HasSuffix(n, "oci-layout") {
				return nil
			}
			return b
		}, "not an OCI image layout"},
		{"no index.json", func(n string, b []byte) []byte {
			if strings.HasSuffix(n, "index.json") {
				return nil
			}
			return b
		}, "no index.json"},
		{"no name", func(n string, b []byte) []byte {
			if strings.HasSuffix(n, "index.json") {
				return []byte(strings.NewReplacer(`"io.containerd.image.name"`, `"x"`, `"org.opencontainers.image.ref.name"`, `"y"`).Replace(string(b)))
			}
			return b
		}, "index.json manifests[0] (" + digest + ") has no image name"},
		{"a size that lies", func(n string, b []byte) []byte {
			if strings.HasSuffix(n, "index.json") {
				return regexp.MustCompile(`"size":\s*\d+`).ReplaceAll(b, []byte(`"size": 1`))
			}
			return b
		}, "index.json manifests[0] gives blob " + digest + " the size 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadLayout(bytes.NewReader(rewrite(t, data, tc.fn)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
	if _, err := ReadLayout(strings.NewReader("not a tar archive at all, but long enough to hold a header block ..." + strings.Repeat(".", 512))); err == nil {
		t.Error("garbage read as a layout")
	}
}
