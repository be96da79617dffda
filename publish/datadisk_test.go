package publish

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aliyun/alibabacloud-oss-go-sdk-v2/oss"

	"github.com/drover-os/drover/cloud/aliyun"
	"github.com/drover-os/drover/image/build"
)

// The cache disk image of a recipe's `location: disk` images goes with
// the image as its data disk (DiskDeviceMapping.2).

func withCacheDisk(m *build.Manifest, size int64, sum string) *build.Manifest {
	m.CachedImages = &build.CachedImages{Disk: &build.CacheDisk{File: build.DiskImageFile(m.Name), Label: "drover-images",
		UUID: "0b3c2f8e-1d2a-4b5c-8d7e-6f5a4b3c2d1e", Size: size, SHA256: sum}}
	return m
}

// TestPlanCacheDisk: the plan uploads the cache disk beside the image and
// imports it as DiskDeviceMapping.2, RAW, its size rounded up to GiB.
func TestPlanCacheDisk(t *testing.T) {
	r := request()
	r.Manifest = withCacheDisk(manifest(), 259<<20, strings.Repeat("ab", 32))
	p, err := NewPlan(r)
	if err != nil {
		t.Fatal(err)
	}
	want := []DataDisk{{File: "out/ecs-node.images.raw", Object: "drover/ecs-node-20250301.120000-0123456789abcdef.images.raw",
		Format: "RAW", DiskImageSize: 1, Size: 259 << 20, SHA256: strings.Repeat("ab", 32)}}
	if len(p.DataDisks) != 1 || p.DataDisks[0] != want[0] {
		t.Errorf("data disks %+v, want %+v", p.DataDisks, want)
	}
	golden(t, "plan-cache-disk", p.Text(nil))

	for name, edit := range map[string]func(*build.CacheDisk){
		"cachedImages.disk.sha256":   func(d *build.CacheDisk) { d.SHA256 = "abc" },
		"cachedImages.disk.size":     func(d *build.CacheDisk) { d.Size = 0 },
		"cachedImages.disk.file":     func(d *build.CacheDisk) { d.File = "../x.raw" },
		"the cache disk is 2049 GiB": func(d *build.CacheDisk) { d.Size = 2048<<30 + 1 },
	} {
		r := request()
		r.Manifest = withCacheDisk(manifest(), 1, strings.Repeat("ab", 32))
		edit(r.Manifest.CachedImages.Disk)
		if _, err := NewPlan(r); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v, want an error naming it", name, err)
		}
	}
}

// cachePlan is c.plan's publish with a cache disk of 3 parts beside the
// image; sum overrides the manifest's sha256 ("": the file's).
func (c *cloud) cachePlan(t *testing.T, sum string) *Plan {
	t.Helper()
	dir := t.TempDir()
	img := filepath.Join(dir, "ecs-node.raw")
	if err := os.WriteFile(img, bytes.Repeat([]byte("node\n"), 2*partSize/5), 0o644); err != nil {
		t.Fatal(err)
	}
	cache := bytes.Repeat([]byte("cache\n"), 3*partSize/6)
	if err := os.WriteFile(filepath.Join(dir, "ecs-node.images.raw"), cache, 0o644); err != nil {
		t.Fatal(err)
	}
	if sum == "" {
		h := sha256.Sum256(cache)
		sum = hex.EncodeToString(h[:])
	}
	r := request()
	r.Image, r.Region, r.PollInterval = img, emuRegion, 20*time.Millisecond
	r.Manifest = withCacheDisk(manifest(), int64(len(cache)), sum)
	p, err := NewPlan(r)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPublishCacheDisk: both files are uploaded and imported as one image,
// the cache disk as its data disk; both objects are deleted afterwards.
func TestPublishCacheDisk(t *testing.T) {
	c := newCloud(t, 50*time.Millisecond)
	p := c.cachePlan(t, "")
	ctx := context.Background()
	if _, err := c.pb.Publish(ctx, p); err != nil {
		t.Fatal(err)
	}
	ims := c.images(t, p, emuRegion)
	if len(ims) != 1 {
		t.Fatalf("%d images, want 1", len(ims))
	}
	dm := ims[0].DiskDeviceMappings.DiskDeviceMapping
	if len(dm) != 2 || dm[0].Type != "system" || dm[0].ImportOSSObject != p.Object ||
		dm[1].Type != "data" || dm[1].ImportOSSObject != p.DataDisks[0].Object || dm[1].Size != "1" || dm[1].Format != "RAW" ||
		!strings.HasPrefix(dm[1].SnapshotId, "s-") {
		t.Fatalf("the image's disk device mappings %+v, want the system disk and the cache disk as a data disk", dm)
	}
	for _, obj := range []string{p.Object, p.DataDisks[0].Object} {
		_, err := c.pb.Clients.OSS.HeadObject(ctx, &oss.HeadObjectRequest{Bucket: oss.Ptr(p.Bucket), Key: oss.Ptr(obj)})
		if aliyun.Code(err) != "NoSuchKey" {
			t.Errorf("object %s once the image is Available: %v, want it deleted (NoSuchKey)", obj, err)
		}
	}
	// Again: the image found has the data disk, so it is reused.
	res, err := c.pb.Publish(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if res.Images[0].Action != ActionReuse {
		t.Errorf("second publish: %+v, want the image reused", res.Images)
	}
	c.wantCalls(t, map[string]int{"ecs ImportImage 200": 1})
}

// TestPublishCacheDiskMismatch: a cache disk that is not the manifest's
// is refused, naming the file, before any call.
func TestPublishCacheDiskMismatch(t *testing.T) {
	c := newCloud(t, 0)
	p := c.cachePlan(t, strings.Repeat("0", 64))
	_, err := c.pb.Publish(context.Background(), p)
	if err == nil || !strings.Contains(err.Error(), p.DataDisks[0].File) || !strings.Contains(err.Error(), "sha256") {
		t.Fatalf("Publish: %v, want a refusal naming %s and its sha256", err, p.DataDisks[0].File)
	}
	if n := c.calls.count("oss ") + c.calls.count("ecs "); n != 0 {
		t.Errorf("%d calls to the clouds, want none", n)
	}
	if err := os.Remove(p.DataDisks[0].File); err != nil {
		t.Fatal(err)
	}
	if _, err := c.pb.Publish(context.Background(), p); err == nil || !strings.Contains(err.Error(), p.DataDisks[0].File) {
		t.Fatalf("Publish without the cache disk file: %v, want an error naming it", err)
	}
}

// TestDecideWithoutCacheDisk: an image of the build that lacks the cache
// disk (published without it) is neither reused nor waited for.
func TestDecideWithoutCacheDisk(t *testing.T) {
	r := request()
	r.Manifest = withCacheDisk(manifest(), 1, strings.Repeat("ab", 32))
	p, err := NewPlan(r)
	if err != nil {
		t.Fatal(err)
	}
	mine := map[string]string{TagBuildID: p.BuildID, TagRootHash: p.RootHash}
	for _, status := range []string{"Available", "Creating"} {
		_, err := Decide(p, "cn-hangzhou", []Found{{ID: "m-1", Status: status, Tags: mine}})
		if err == nil || !strings.Contains(err.Error(), "image m-1 in cn-hangzhou") || !strings.Contains(err.Error(), "ecs-node.images.raw") {
			t.Errorf("%s image without the data disk: %v, want a refusal naming it and the cache disk", status, err)
		}
		d, err := Decide(p, "cn-hangzhou", []Found{{ID: "m-1", Status: status, Tags: mine, DataDisks: 1}})
		if err != nil || d.ImageID != "m-1" {
			t.Errorf("%s image with the data disk: %v %v, want it reused or waited for", status, d, err)
		}
	}
}
