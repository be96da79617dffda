package diff

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/drover-os/drover/image/build"
)

func withImages(m *build.Manifest, webDigest string, disk bool) *build.Manifest {
	m.CachedImages = &build.CachedImages{Root: "/usr/lib/drover/image-cache", Images: []build.CachedImage{
		{Ref: "registry.example.test/team/web:v1@" + webDigest, Platform: "linux/amd64", Digest: webDigest, Manifest: webDigest, Location: "root", Size: 3 << 20},
		{Ref: "registry.example.test/team/db:v2@sha256:" + hash("e1"), Platform: "linux/amd64", Digest: "sha256:" + hash("e1"), Manifest: "sha256:" + hash("e2"), Location: "root", Size: 1 << 20},
	}}
	if disk {
		m.CachedImages.Images[1].Location = "disk"
		m.CachedImages.Disk = &build.CacheDisk{File: "node.images.raw", Label: "drover-images", SHA256: hash("e3")}
	}
	m.Files = append(m.Files, build.FileEntry{Path: "/usr/lib/drover/image-cache/blobs/sha256/" + strings.TrimPrefix(webDigest, "sha256:"), Kind: "file", Mode: "0644", Owner: "0:0",
		SHA256: strings.TrimPrefix(webDigest, "sha256:"), From: build.ImageFilesOwner})
	return m
}

// Between two recipes whose cached image moved to another digest, drover
// diff names the image and both digests in full; the layout's files are
// counted under it, not listed.
func TestCachedImageDigestChanged(t *testing.T) {
	oldDigest, newDigest := "sha256:"+hash("c1"), "sha256:"+hash("c2")
	d := Compare(withImages(base(), oldDigest, false), withImages(base(), newDigest, false))
	if len(d.Images) != 1 || d.Images[0].Name != "registry.example.test/team/web:v1" || d.Images[0].Old.Digest != oldDigest || d.Images[0].New.Digest != newDigest {
		t.Fatalf("images %+v", d.Images)
	}
	if len(d.Files) != 0 || d.ImageFiles != (FileCounts{Added: 1, Removed: 1}) {
		t.Errorf("files listed %+v, counted %+v", d.Files, d.ImageFiles)
	}
	var text bytes.Buffer
	if err := d.Text(&text); err != nil {
		t.Fatal(err)
	}
	want := "image         ~ registry.example.test/team/web:v1 digest " + oldDigest + " → " + newDigest + ", manifest " + oldDigest + " → " + newDigest + "\n"
	if !strings.Contains(text.String(), want) {
		t.Errorf("text:\n%s\nwant the line:\n%s", text.String(), want)
	}
	if !strings.Contains(d.Summary(), "1 cached image changed") || !strings.Contains(d.Summary(), "2 files changed (0 listed, 2 in changed components)") {
		t.Errorf("summary %q", d.Summary())
	}
	var md bytes.Buffer
	if err := d.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| `registry.example.test/team/web:v1` | `"+oldDigest+"` (linux/amd64, root) | `"+newDigest+"` (linux/amd64, root) |") {
		t.Errorf("markdown:\n%s", md.String())
	}
	js, _ := json.Marshal(d)
	if !strings.Contains(string(js), `"new":{"digest":"`+newDigest+`"`) {
		t.Errorf("json %s", js)
	}
	if !Compare(withImages(base(), oldDigest, false), withImages(base(), oldDigest, false)).Equal() {
		t.Error("the same cached images differ")
	}
}

func TestCachedImagesAddedRemovedMoved(t *testing.T) {
	digest := "sha256:" + hash("c1")
	d := Compare(base(), withImages(base(), digest, true))
	var text bytes.Buffer
	d.Text(&text)
	for _, want := range []string{
		"image         + registry.example.test/team/db:v2@sha256:" + hash("e1") + " (linux/amd64, 1.0 MiB, in the disk)",
		"image         + registry.example.test/team/web:v1@" + digest,
		"cache disk    ~ none → node.images.raw sha256 " + hash("e3")[:12] + "…",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	d = Compare(withImages(base(), digest, true), withImages(base(), digest, false))
	if len(d.Images) != 1 || d.Images[0].Name != "registry.example.test/team/db:v2" || d.CacheDisk == nil {
		t.Fatalf("moved to the root: %+v %+v", d.Images, d.CacheDisk)
	}
	if _, s := d.Images[0].describe(); s != "registry.example.test/team/db:v2 location disk → root" {
		t.Errorf("moved: %q", s)
	}
	d = Compare(withImages(base(), digest, false), base())
	if _, s := d.Images[1].describe(); len(d.Images) != 2 || s != "registry.example.test/team/web:v1@"+digest {
		t.Errorf("removed: %+v", d.Images)
	}
}
