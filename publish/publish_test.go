package publish

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
	"github.com/aliyun/alibabacloud-oss-go-sdk-v2/oss"

	"github.com/drover-os/drover/cloud/aliyun"
	"github.com/drover-os/drover/harness/ecsapi"
)

// The Publisher against harness/ecsapi, in process (cmd/drover's tests run
// the same steps through the binary): what the clouds hold afterwards, the
// calls made, and the events a user reads.

const (
	emuRegion = "cn-test"
	emuCopy   = "cn-test2"
	partSize  = 100 << 10 // the OSS SDK's smallest part
)

// calls counts the emulator's requests ("ecs ImportImage 200", "oss PUT
// /bucket/key 200").
type calls struct {
	mu    sync.Mutex
	lines []string
}

func (c *calls) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines = append(c.lines, strings.Split(strings.TrimSpace(string(p)), "\n")...)
	return len(p), nil
}

func (c *calls) count(prefix string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, l := range c.lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

type cloud struct {
	srv    *ecsapi.Server
	calls  *calls
	pb     *Publisher
	mu     sync.Mutex
	events []Event
}

func newCloud(t *testing.T, importDelay time.Duration) *cloud {
	t.Helper()
	t.Setenv("HOME", t.TempDir())
	t.Setenv("ALIBABA_CLOUD_ECS_METADATA_DISABLED", "true")
	t.Setenv("ALIBABA_CLOUD_PROFILE", "")
	t.Setenv("ALIBABA_CLOUD_CREDENTIALS_FILE", "")
	t.Setenv("ALIBABA_CLOUD_ACCESS_KEY_ID", "LTAIpublishtest")
	t.Setenv("ALIBABA_CLOUD_ACCESS_KEY_SECRET", "secret")
	c := &cloud{calls: &calls{}}
	c.srv = ecsapi.New(ecsapi.Config{AccessKeyID: "LTAIpublishtest", AccessKeySecret: "secret", Region: emuRegion,
		ImportDelay: importDelay, Log: c.calls})
	eps, err := c.srv.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.srv.Close)
	c.srv.CreateBucket("drover-images")
	clients, err := aliyun.New(aliyun.Options{Region: emuRegion, ECSEndpoint: "http://" + eps.ECS, OSSEndpoint: "http://" + eps.OSS})
	if err != nil {
		t.Fatal(err)
	}
	c.pb = &Publisher{Clients: clients, PartSize: partSize, CheckpointDir: filepath.Join(t.TempDir(), "checkpoints"),
		Events: func(e Event) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.events = append(c.events, e)
		}}
	return c
}

// kinds are the events' kinds so far, and their messages.
// wantCalls requires each emulator log prefix (call and status) to have
// been seen the given number of times over the test's runs.
func (c *cloud) wantCalls(t *testing.T, want map[string]int) {
	t.Helper()
	for call, n := range want {
		if got := c.calls.count(call); got != n {
			t.Errorf("%d × %q, want %d", got, call, n)
		}
	}
}

func (c *cloud) seen(kind string) []Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Event
	for _, e := range c.events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// plan is a publish of a 10-part image file (1000 KiB) to emuRegion.
func (c *cloud) plan(t *testing.T, copyTo ...string) *Plan {
	t.Helper()
	img := filepath.Join(t.TempDir(), "ecs-node.raw")
	if err := os.WriteFile(img, bytes.Repeat([]byte("drover\n"), 10*partSize/7+1)[:10*partSize], 0o644); err != nil {
		t.Fatal(err)
	}
	r := request()
	r.Image, r.Region, r.CopyTo, r.PollInterval = img, emuRegion, copyTo, 20*time.Millisecond
	p, err := NewPlan(r)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// images are the emulated account's images of the plan's build in region.
func (c *cloud) images(t *testing.T, p *Plan, region string) []ecs.Image {
	t.Helper()
	req := ecs.CreateDescribeImagesRequest()
	req.RegionId = region
	req.Status = allStatuses
	req.Tag = &[]ecs.DescribeImagesTag{{Key: TagBuildID, Value: p.BuildID}}
	resp, err := c.pb.Clients.ECS.DescribeImages(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Images.Image
}

func (c *cloud) object(p *Plan) error {
	_, err := c.pb.Clients.OSS.HeadObject(context.Background(), &oss.HeadObjectRequest{Bucket: oss.Ptr(p.Bucket), Key: oss.Ptr(p.Object)})
	return err
}

// importByHand makes an image the way someone without drover would: the
// object, then ImportImage with the given name and tags.
func (c *cloud) importByHand(t *testing.T, p *Plan, name string, tags map[string]string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := c.pb.Clients.OSS.PutObject(ctx, &oss.PutObjectRequest{Bucket: oss.Ptr(p.Bucket), Key: oss.Ptr("by-hand.raw"),
		Body: strings.NewReader("disk")}); err != nil {
		t.Fatal(err)
	}
	req := ecs.CreateImportImageRequest()
	req.RegionId = emuRegion
	req.ImageName = name
	req.DiskDeviceMapping = &[]ecs.ImportImageDiskDeviceMapping{{OSSBucket: p.Bucket, OSSObject: "by-hand.raw", Format: "RAW", DiskImageSize: "2"}}
	var tt []ecs.ImportImageTag
	for k, v := range tags {
		tt = append(tt, ecs.ImportImageTag{Key: k, Value: v})
	}
	req.Tag = &tt
	resp, err := c.pb.Clients.ECS.ImportImage(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.ImageId
}

func tags(im ecs.Image) map[string]string { return tagMap(im.Tags.Tag) }

// TestPublishImportsCopiesThenReuses: the image is uploaded, imported with
// the plan's parameters and tags, copied, both waited for; the object is
// deleted; the upload reports each tenth once. Publishing again reuses
// both images and makes nothing.
func TestPublishImportsCopiesThenReuses(t *testing.T) {
	c := newCloud(t, 100*time.Millisecond)
	p := c.plan(t, emuCopy)
	ctx := context.Background()
	res, err := c.pb.Publish(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	ims, copies := c.images(t, p, emuRegion), c.images(t, p, emuCopy)
	if len(ims) != 1 || len(copies) != 1 {
		t.Fatalf("%d images in %s and %d in %s, want one each", len(ims), emuRegion, len(copies), emuCopy)
	}
	want := []RegionImage{{emuRegion, ims[0].ImageId, ActionImport}, {emuCopy, copies[0].ImageId, ActionImport}}
	if res.ImageName != p.ImageName || res.BuildID != p.BuildID || res.RootHash != p.RootHash || !slices.Equal(res.Images, want) {
		t.Errorf("result %+v, want images %+v", res, want)
	}
	im := ims[0]
	dm := im.DiskDeviceMappings.DiskDeviceMapping[0]
	got := []any{im.Status, im.ImageName, im.Description, im.Architecture, im.BootMode, im.Platform, im.Size, dm.Format, dm.ImportOSSBucket, dm.ImportOSSObject,
		im.Features.NvmeSupport, im.Features.ImdsSupport}
	wantAttrs := []any{"Available", p.ImageName, p.Description, "x86_64", "UEFI", "Debian", 2, "RAW", p.Bucket, p.Object, "supported", "v2"}
	if !slices.Equal(got, wantAttrs) {
		t.Errorf("imported image %v, want %v", got, wantAttrs)
	}
	for _, x := range []ecs.Image{im, copies[0]} {
		if tg := tags(x); len(tg) != len(p.Tags) || len(p.Missing(tg)) != 0 {
			t.Errorf("image %s tagged %v, want the plan's %v", x.ImageId, tg, p.Tags)
		}
	}
	if copies[0].ImageName != p.ImageName || copies[0].Description != p.Description || copies[0].Status != "Available" {
		t.Errorf("copy %s: %q %q %s, want the plan's name and description, Available", copies[0].ImageId, copies[0].ImageName, copies[0].Description, copies[0].Status)
	}
	if err := c.object(p); aliyun.Code(err) != "NoSuchKey" {
		t.Errorf("the object once the image is Available: %v, want it deleted (NoSuchKey)", err)
	}
	if n := len(c.seen("cleanup")); n != 1 {
		t.Errorf("%d cleanup events, want 1", n)
	}
	// One upload line per tenth of the 10-part file, in order.
	var progress []string
	for _, e := range c.seen("upload") {
		if e.Progress != "" {
			progress = append(progress, e.Progress)
		}
	}
	if want := []string{"10%", "20%", "30%", "40%", "50%", "60%", "70%", "80%", "90%", "100%"}; !slices.Equal(progress, want) {
		t.Errorf("upload progress %v, want %v", progress, want)
	}
	for kind, ids := range map[string][]string{"import": {ims[0].ImageId}, "copy": {copies[0].ImageId}, "available": {ims[0].ImageId, copies[0].ImageId}} {
		var got []string
		for _, e := range c.seen(kind) {
			got = append(got, e.ImageID)
		}
		if !slices.Equal(got, ids) {
			t.Errorf("%s events for %v, want %v", kind, got, ids)
		}
	}
	if w := c.seen("wait"); len(w) == 0 || w[0].Status != "Creating" && w[0].Status != "Pending" {
		t.Errorf("wait events %+v, want the import's status while Creating", w)
	}

	// Again: the lookup finds both, Publish reuses them and calls nothing
	// that makes or changes anything.
	d, err := c.pb.Lookup(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	wantD := map[string]Decision{emuRegion: {ActionReuse, ims[0].ImageId, "Available"}, emuCopy: {ActionReuse, copies[0].ImageId, "Available"}}
	if len(d) != 2 || d[emuRegion] != wantD[emuRegion] || d[emuCopy] != wantD[emuCopy] {
		t.Errorf("lookup %v, want %v", d, wantD)
	}
	res, err = c.pb.Publish(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	want = []RegionImage{{emuRegion, ims[0].ImageId, ActionReuse}, {emuCopy, copies[0].ImageId, ActionReuse}}
	if !slices.Equal(res.Images, want) {
		t.Errorf("second publish %+v, want %+v", res.Images, want)
	}
	c.wantCalls(t, map[string]int{"ecs ImportImage": 1, "ecs CopyImage": 1, "ecs TagResources": 0})
	if f := c.seen("found"); len(f) != 2 || f[0].ImageID != ims[0].ImageId || !strings.HasPrefix(f[0].Message, "reuse ") {
		t.Errorf("found events %+v, want the two images reused", f)
	}
}

// TestPublishKeepObject: --keep-object leaves the uploaded object, the
// image byte for byte.
func TestPublishKeepObject(t *testing.T) {
	c := newCloud(t, 0)
	c.pb.KeepObject = true
	p := c.plan(t)
	if _, err := c.pb.Publish(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(c.srv.ObjectPath(p.Bucket, p.Object))
	if err != nil {
		t.Fatalf("the object with KeepObject: %v", err)
	}
	if want, _ := os.ReadFile(p.Image); !bytes.Equal(got, want) {
		t.Error("the object differs from the image")
	}
	if n := len(c.seen("cleanup")); n != 0 {
		t.Errorf("%d cleanup events with KeepObject", n)
	}
}

// TestPublishWaitTimeout: an import slower than --wait-timeout stops the
// run with errNotYet, leaving the import; the next run waits for that one.
func TestPublishWaitTimeout(t *testing.T) {
	c := newCloud(t, 600*time.Millisecond)
	p := c.plan(t)
	p.WaitTimeout = 200 * time.Millisecond
	_, err := c.pb.Publish(context.Background(), p)
	if !errors.Is(err, errNotYet) || !strings.Contains(err.Error(), "still Creating when --wait-timeout 200ms ran out") {
		t.Fatalf("an import slower than the wait: %v, want errNotYet", err)
	}
	ims := c.images(t, p, emuRegion)
	if len(ims) != 1 || ims[0].Status != "Creating" {
		t.Fatalf("after the timeout: %+v, want one Creating image", ims)
	}
	if w := c.seen("wait"); len(w) != 1 {
		t.Errorf("%d wait events in 200 ms of one status, want 1 (a line per status change or minute)", len(w))
	}
	p.WaitTimeout = time.Minute
	res, err := c.pb.Publish(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if want := []RegionImage{{emuRegion, ims[0].ImageId, ActionWait}}; !slices.Equal(res.Images, want) {
		t.Errorf("second run %+v, want %+v", res.Images, want)
	}
	if n := c.calls.count("ecs ImportImage"); n != 1 {
		t.Errorf("%d ImportImage calls, want 1", n)
	}
	if f := c.seen("found"); len(f) != 1 || f[0].Status != "Creating" {
		t.Errorf("found events %+v, want the Creating import", f)
	}
}

// TestPublishCancelledWhileWaiting: a cancelled run stops waiting at once.
func TestPublishCancelledWhileWaiting(t *testing.T) {
	c := newCloud(t, time.Hour)
	p := c.plan(t)
	p.PollInterval, p.WaitTimeout = time.Hour, 2*time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	c.pb.Events = func(e Event) {
		if e.Kind == "wait" {
			cancel()
		}
	}
	start := time.Now()
	_, err := c.pb.Publish(ctx, p)
	if !errors.Is(err, context.Canceled) || time.Since(start) > time.Minute {
		t.Fatalf("cancelled during the wait: %v after %s", err, time.Since(start))
	}
}

// TestPublishFailedImport: CreateFailed stops the run naming the image;
// the next run refuses to import over it.
func TestPublishFailedImport(t *testing.T) {
	c := newCloud(t, 50*time.Millisecond)
	c.srv.FailImport(1)
	p := c.plan(t)
	_, err := c.pb.Publish(context.Background(), p)
	if err == nil || !strings.Contains(err.Error(), "is CreateFailed") {
		t.Fatalf("a failed import: %v", err)
	}
	_, err = c.pb.Publish(context.Background(), p)
	if err == nil || !strings.Contains(err.Error(), "aliyun ecs DeleteImage") {
		t.Fatalf("over a failed import: %v", err)
	}
	if n := c.calls.count("ecs ImportImage"); n != 1 {
		t.Errorf("%d ImportImage calls, want 1", n)
	}
}

// TestPublishAnswersLost: ImportImage's answer lost after ECS started the
// import, then CopyImage's: one image in each region, and the result names
// them.
func TestPublishAnswersLost(t *testing.T) {
	c := newCloud(t, 50*time.Millisecond)
	c.srv.LoseAnswerNext("ImportImage", 1)
	c.srv.LoseAnswerNext("CopyImage", 1)
	p := c.plan(t, emuCopy)
	res, err := c.pb.Publish(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	ims, copies := c.images(t, p, emuRegion), c.images(t, p, emuCopy)
	if len(ims) != 1 || len(copies) != 1 {
		t.Fatalf("%d images in %s and %d in %s, want one each", len(ims), emuRegion, len(copies), emuCopy)
	}
	want := []RegionImage{{emuRegion, ims[0].ImageId, ActionImport}, {emuCopy, copies[0].ImageId, ActionImport}}
	if !slices.Equal(res.Images, want) {
		t.Errorf("result %+v, want %+v", res.Images, want)
	}
	c.wantCalls(t, map[string]int{"ecs ImportImage 503": 1, "ecs CopyImage 503": 1, "ecs CopyImage 200": 0})
	if cp := c.seen("copy"); len(cp) != 1 || cp[0].ImageID != copies[0].ImageId || !strings.Contains(cp[0].Message, "the copy an earlier attempt started") {
		t.Errorf("copy events %+v, want the started copy named", cp)
	}
}

// TestPublishTagsWhatIsMissing: an image of the build made by hand with
// the build ID only is reused and gets the plan's other tags.
func TestPublishTagsWhatIsMissing(t *testing.T) {
	c := newCloud(t, 0)
	p := c.plan(t)
	id := c.importByHand(t, p, "by-hand", map[string]string{TagBuildID: p.BuildID, TagName: "old"})
	res, err := c.pb.Publish(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if res.Images[0].ImageID != id || res.Images[0].Action != ActionReuse {
		t.Errorf("result %+v, want %s reused", res.Images, id)
	}
	ims := c.images(t, p, emuRegion)
	if len(ims) != 1 || len(p.Missing(tags(ims[0]))) != 0 {
		t.Errorf("images %+v, want %s with the plan's tags", ims, id)
	}
	if tg := c.seen("tag"); len(tg) != 1 || !strings.Contains(tg[0].Message, "(3 tags)") {
		t.Errorf("tag events %+v, want one naming 3 tags (root hash, name, version)", tg)
	}
	if n := c.calls.count("oss PUT /" + p.Bucket + "/" + p.Object); n != 0 {
		t.Errorf("%d uploads for a reused image", n)
	}
}

// TestPublishRefusals: the errors tell what to do.
func TestPublishRefusals(t *testing.T) {
	t.Run("name taken", func(t *testing.T) {
		c := newCloud(t, 0)
		p := c.plan(t)
		c.importByHand(t, p, p.ImageName, nil)
		_, err := c.pb.Publish(context.Background(), p)
		if !aliyun.IsCode(err, "InvalidImageName.Duplicated") || !strings.Contains(err.Error(), "pass --image-name") {
			t.Errorf("an image of that name without the build tag: %v", err)
		}
	})
	t.Run("no bucket", func(t *testing.T) {
		c := newCloud(t, 0)
		p := c.plan(t)
		p.Bucket = "no-such-bucket"
		_, err := c.pb.Publish(context.Background(), p)
		if !aliyun.IsCode(err, "NoSuchBucket") || !strings.Contains(err.Error(), "check that bucket no-such-bucket exists in cn-test") {
			t.Errorf("upload to a missing bucket: %v", err)
		}
	})
	t.Run("checkpoint dir", func(t *testing.T) {
		c := newCloud(t, 0)
		p := c.plan(t)
		c.pb.CheckpointDir = filepath.Join(p.Image, "sub")
		_, err := c.pb.Publish(context.Background(), p)
		if err == nil || !strings.Contains(err.Error(), "pass a writable --checkpoint-dir") {
			t.Errorf("checkpoint directory under a file: %v", err)
		}
	})
}
