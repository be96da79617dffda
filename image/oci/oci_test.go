package oci

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"sort"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func testIndex(t *testing.T, amd64 string) v1.ImageIndex {
	t.Helper()
	idx, err := ProgramIndex("pause", map[string][]byte{"amd64": []byte(amd64), "arm64": []byte("arm64 binary")}, GzipLayers)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// entries reads a tar into name → content, and the names in order.
func entries(t *testing.T, data []byte) (map[string][]byte, []string) {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(data))
	files := map[string][]byte{}
	var names []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return files, names
		}
		if err != nil {
			t.Fatal(err)
		}
		if !hdr.ModTime.Equal(Epoch) || hdr.Uid != 0 || hdr.Gid != 0 {
			t.Errorf("%s: mtime %v uid %d gid %d, want %v 0 0", hdr.Name, hdr.ModTime, hdr.Uid, hdr.Gid, Epoch)
		}
		names = append(names, hdr.Name)
		b, _ := io.ReadAll(tr)
		files[hdr.Name] = b
	}
}

func TestLayoutTar(t *testing.T) {
	idx := testIndex(t, "amd64 binary")
	const ref = "drover.dev/pause:3.10"
	a, err := LayoutTar(idx, ref, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, err := LayoutTar(testIndex(t, "amd64 binary"), ref, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("two layouts of the same index differ: the archive is not reproducible")
	}
	files, names := entries(t, a)
	if !sort.StringsAreSorted(names) {
		t.Errorf("entries not in name order: %v", names)
	}
	if got := string(files["oci-layout"]); !strings.Contains(got, `"imageLayoutVersion"`) {
		t.Errorf("oci-layout is %q", got)
	}
	var top v1.IndexManifest
	if err := json.Unmarshal(files["index.json"], &top); err != nil {
		t.Fatalf("index.json: %v", err)
	}
	d, _ := idx.Digest()
	if len(top.Manifests) != 2 {
		t.Fatalf("index.json lists %+v, want the index %s twice", top.Manifests, d)
	}
	for i, n := range []string{ref, "drover.dev/pause@" + d.String()} {
		m := top.Manifests[i]
		if m.Digest != d || m.Annotations[ImageNameAnnotation] != n || m.Annotations["org.opencontainers.image.ref.name"] != n {
			t.Errorf("index.json entry %d: %s named %q / %q, want %s named %s", i, m.Digest, m.Annotations[ImageNameAnnotation], m.Annotations["org.opencontainers.image.ref.name"], d, n)
		}
	}
	// Every blob the index reaches is in the layout, under its digest.
	im, _ := idx.IndexManifest()
	want := []v1.Hash{d}
	for _, m := range im.Manifests {
		want = append(want, m.Digest)
		img, _ := idx.Image(m.Digest)
		cfg, _ := img.ConfigName()
		want = append(want, cfg)
		ls, _ := img.Layers()
		for _, l := range ls {
			ld, _ := l.Digest()
			want = append(want, ld)
		}
	}
	for _, h := range want {
		if _, ok := files["blobs/sha256/"+h.Hex]; !ok {
			t.Errorf("blob %s missing from the layout (entries %v)", h, names)
		}
	}
	if got := platforms(t, idx); !slices.Equal(got, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("platforms %v", got)
	}

	c, err := LayoutTar(testIndex(t, "another amd64 binary"), ref, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a, c) {
		t.Error("a different binary gave the same archive")
	}
}

func platforms(t *testing.T, idx v1.ImageIndex) []string {
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range im.Manifests {
		out = append(out, m.Platform.String())
	}
	return out
}

func TestProgramIndexMissingArch(t *testing.T) {
	_, err := ProgramIndex("pause", map[string][]byte{"amd64": []byte("x")}, GzipLayers)
	if err == nil || !strings.Contains(err.Error(), "no linux/arm64 binary") {
		t.Errorf("err %v, want the missing architecture named", err)
	}
}

func TestLayoutTarNeedsTag(t *testing.T) {
	_, err := LayoutTar(testIndex(t, "x"), "Not A Ref", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), `OCI layout of "Not A Ref": want a tagged reference (repo:tag)`) {
		t.Errorf("err %v", err)
	}
}

// TestPlainLayers: a PlainLayers image's layer is the tar itself
// (application/vnd.oci.image.layer.v1.tar): its digest is the diff ID, and
// the binary reads back from it uncompressed; GzipLayers' is gzip.
func TestPlainLayers(t *testing.T) {
	for _, tc := range []struct {
		ls        Layers
		mediaType string
		gzip      bool
	}{{PlainLayers, "application/vnd.oci.image.layer.v1.tar", false}, {GzipLayers, "application/vnd.oci.image.layer.v1.tar+gzip", true}} {
		img, err := ProgramImage("pause", []byte("the binary"), "amd64", tc.ls)
		if err != nil {
			t.Fatal(err)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("layers %v, %v", layers, err)
		}
		mt, _ := layers[0].MediaType()
		rc, err := layers[0].Compressed()
		if err != nil {
			t.Fatal(err)
		}
		blob, _ := io.ReadAll(rc)
		digest, _ := layers[0].Digest()
		diffID, _ := layers[0].DiffID()
		isGzip := bytes.HasPrefix(blob, []byte{0x1f, 0x8b})
		if string(mt) != tc.mediaType || isGzip != tc.gzip || (digest == diffID) == tc.gzip {
			t.Errorf("layers %d: media type %s, gzip %v, digest %s, diff ID %s", tc.ls, mt, isGzip, digest, diffID)
		}
		if !tc.gzip {
			files, _ := entries(t, blob)
			if string(files["pause"]) != "the binary" {
				t.Errorf("plain layer holds %q", files)
			}
		}
	}
}
