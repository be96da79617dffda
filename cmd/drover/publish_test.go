package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
	"github.com/aliyun/alibabacloud-oss-go-sdk-v2/oss"
	"github.com/aliyun/alibabacloud-oss-go-sdk-v2/oss/credentials"

	"github.com/drover-os/drover/cloud/event"
	"github.com/drover-os/drover/harness/ecsapi"
	"github.com/drover-os/drover/image/build"
)

const (
	pubKeyID    = "LTAIpublishtest"
	pubSecret   = "publish-test-secret"
	pubRegion   = "cn-test"
	pubBucket   = "drover-images"
	pubBuildID  = "0123456789abcdef"
	pubImageRaw = "ecs-node.raw"
)

type cloud struct {
	srv *ecsapi.Server
	eps ecsapi.Endpoints
	log *callLog
	ecs *ecs.Client
}

func newCloud(t *testing.T, importDelay time.Duration) *cloud {
	t.Helper()
	c := &cloud{log: &callLog{}}
	c.srv = ecsapi.New(ecsapi.Config{AccessKeyID: pubKeyID, AccessKeySecret: pubSecret, Region: pubRegion,
		ImportDelay: importDelay, Log: c.log})
	t.Cleanup(c.srv.Close)
	var err error
	if c.eps, err = c.srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.srv.CreateBucket(pubBucket)
	if c.ecs, err = ecs.NewClientWithAccessKey(pubRegion, pubKeyID, pubSecret); err != nil {
		t.Fatal(err)
	}
	c.ecs.Domain = c.eps.ECS
	return c
}

// publish runs the drover binary against the emulator, with credentials
// in the environment only.
func (c *cloud) publish(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := c.command(t, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func (c *cloud) command(t *testing.T, args ...string) *exec.Cmd {
	cmd := exec.Command(droverBin, append([]string{"publish", "--region", pubRegion, "--bucket", pubBucket, "--poll-interval", "100ms"}, args...)...)
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH"),
		"ALIBABA_CLOUD_ACCESS_KEY_ID=" + pubKeyID, "ALIBABA_CLOUD_ACCESS_KEY_SECRET=" + pubSecret,
		"DROVER_ECS_ENDPOINT=http://" + c.eps.ECS, "DROVER_OSS_ENDPOINT=http://" + c.eps.OSS}
	return cmd
}

// headObject is OSS HeadObject through the OSS SDK: nil when the object
// is there, else the error (NoSuchKey when it is not).
func (c *cloud) headObject(t *testing.T, key string) error {
	t.Helper()
	o := oss.NewClient(oss.LoadDefaultConfig().WithRegion(pubRegion).WithEndpoint(c.eps.OSS).WithDisableSSL(true).WithUsePathStyle(true).
		WithCredentialsProvider(credentials.NewStaticCredentialsProvider(pubKeyID, pubSecret)))
	_, err := o.HeadObject(context.Background(), &oss.HeadObjectRequest{Bucket: oss.Ptr(pubBucket), Key: oss.Ptr(key)})
	return err
}

// images lists the emulated account's images of the test build through
// the SDK, whatever their status.
func (c *cloud) images(t *testing.T, region string) []ecs.Image {
	t.Helper()
	req := ecs.CreateDescribeImagesRequest()
	req.RegionId = region
	req.Status = "Creating,Waiting,Available,UnAvailable,CreateFailed"
	req.Tag = &[]ecs.DescribeImagesTag{{Key: "drover:build-id", Value: pubBuildID}}
	resp, err := c.ecs.DescribeImages(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Images.Image
}

func tagsOf(im ecs.Image) map[string]string {
	m := map[string]string{}
	for _, tg := range im.Tags.Tag {
		k, v := tg.Key, tg.Value
		if k == "" {
			k, v = tg.TagKey, tg.TagValue
		}
		m[k] = v
	}
	return m
}

// TestPublishRefusesTamperedImage: one changed byte inside the root
// partition, and publish exits 1 naming the image and the partition before
// it makes a single request.
func TestPublishRefusesTamperedImage(t *testing.T) {
	c := newCloud(t, 0)
	img := publishImage(t)
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var m build.Manifest
	data, _ := os.ReadFile(beside(img))
	json.Unmarshal(data, &m)
	off := m.Partitions[1].Offset + 4096*10
	b := make([]byte, 1)
	f.ReadAt(b, off)
	b[0] ^= 0x40
	f.WriteAt(b, off)
	f.Close()

	stdout, stderr, code := c.publish(t, img)
	if code != 1 || stdout != "" {
		t.Fatalf("exit %d, stdout %q; want 1 and nothing on stdout\nstderr: %s", code, stdout, stderr)
	}
	for _, want := range []string{"refusing to publish " + img + ": it does not match " + beside(img), "root: "} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if calls := c.log.all(); calls != "" {
		t.Errorf("the emulator saw requests from a refused publish:\n%s", calls)
	}
	if n := len(c.images(t, pubRegion)); n != 0 {
		t.Errorf("%d images after a refused publish, want 0", n)
	}
}

// TestPublishImportsThenReuses: a good image is uploaded (multipart) and
// imported with the parameters ECS.md lists, copied to a second region,
// and a second run reuses both images without uploading or importing.
// Throttled calls are retried.
func TestPublishImportsThenReuses(t *testing.T) {
	c := newCloud(t, 300*time.Millisecond)
	img := publishImage(t)
	var m build.Manifest
	data, _ := os.ReadFile(beside(img))
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	c.srv.ThrottleNext("ImportImage", 1)
	c.srv.ThrottleNext("DescribeImages", 1)
	stdout, stderr, code := c.publish(t, "--copy-to", "cn-test2", "--part-size", "102400", "--keep-object", img)
	if code != 0 {
		t.Fatalf("exit %d\nstderr: %s\ncalls:\n%s", code, stderr, c.log.all())
	}
	ims := c.images(t, pubRegion)
	if len(ims) != 1 {
		t.Fatalf("%d images of the build in %s, want 1", len(ims), pubRegion)
	}
	im := ims[0]
	copies := c.images(t, "cn-test2")
	if len(copies) != 1 {
		t.Fatalf("%d images of the build in cn-test2, want 1", len(copies))
	}
	if want := im.ImageId + "\ncn-test2 " + copies[0].ImageId + "\n"; stdout != want {
		t.Errorf("stdout %q, want %q", stdout, want)
	}
	name := "ecs-node-20260102.030405-" + pubBuildID
	object := "drover/" + name + ".raw"
	wantGiB := int((m.DiskSize + 1<<30 - 1) >> 30)
	got := map[string]any{"Status": im.Status, "ImageName": im.ImageName, "Architecture": im.Architecture, "BootMode": im.BootMode,
		"Platform": im.Platform, "NvmeSupport": im.Features.NvmeSupport, "ImdsSupport": im.Features.ImdsSupport, "Size": im.Size,
		"Format": im.DiskDeviceMappings.DiskDeviceMapping[0].Format, "Bucket": im.DiskDeviceMappings.DiskDeviceMapping[0].ImportOSSBucket,
		"Object": im.DiskDeviceMappings.DiskDeviceMapping[0].ImportOSSObject}
	want := map[string]any{"Status": "Available", "ImageName": name, "Architecture": "x86_64", "BootMode": "UEFI",
		"Platform": "Debian", "NvmeSupport": "supported", "ImdsSupport": "v2", "Size": wantGiB,
		"Format": "RAW", "Bucket": pubBucket, "Object": object}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("imported image's %s = %v, want %v", k, got[k], v)
		}
	}
	wantTags := map[string]string{"drover:root-hash": m.RootHash, "drover:build-id": pubBuildID, "drover:name": "ecs-node", "drover:version": "20260102.030405"}
	for _, x := range []ecs.Image{im, copies[0]} {
		tags := tagsOf(x)
		for k, v := range wantTags {
			if tags[k] != v {
				t.Errorf("image %s: tag %s=%q, want %q", x.ImageId, k, tags[k], v)
			}
		}
	}
	// The object ECS imported is the image, byte for byte.
	up, err := os.ReadFile(c.srv.ObjectPath(pubBucket, object))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(up, mustRead(t, img)) {
		t.Errorf("the uploaded object differs from %s", img)
	}
	if n := c.log.count("oss POST /" + pubBucket + "/" + object); n < 2 {
		t.Errorf("%d multipart POSTs (initiate, complete) for the object, want 2:\n%s", n, c.log.all())
	}
	for call, n := range map[string]int{"ecs ImportImage 400 Throttling.User": 1, "ecs ImportImage 200": 1, "ecs CopyImage 200": 1, "ecs DescribeImages 400 Throttling.User": 1} {
		if got := c.log.count(call); got != n {
			t.Errorf("%d × %q, want %d", got, call, n)
		}
	}
	if !strings.Contains(stderr, "drover publish: "+img+" verifies against ecs-node.manifest.json") {
		t.Errorf("stderr does not report the verification:\n%s", stderr)
	}

	// Again, with --json: the same images, reused; nothing uploaded,
	// imported or copied.
	before := c.log.all()
	stdout, stderr, code = c.publish(t, "--copy-to", "cn-test2", "--json", img)
	if code != 0 {
		t.Fatalf("second run: exit %d\nstderr: %s", code, stderr)
	}
	// --json: every stdout line is one event (cloud/event, the type
	// drover rollout prints), progress first, the result last.
	var res struct {
		Images []struct{ Region, ImageID, Action string }
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var kinds []string
	for i, line := range lines {
		var e struct {
			event.Event
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("--json stdout line %d is not an event: %v\n%s", i+1, err, line)
		}
		if e.Time.IsZero() || e.Message == "" {
			t.Errorf("--json event without a time or a message: %s", line)
		}
		kinds = append(kinds, e.Kind)
		if i == len(lines)-1 {
			if e.Kind != event.Done {
				t.Fatalf("--json last event %q, want %q: %s", e.Kind, event.Done, line)
			}
			if err := json.Unmarshal(e.Result, &res); err != nil {
				t.Fatalf("--json done event's result: %v\n%s", err, line)
			}
		}
	}
	if !slices.Contains(kinds, "verify") || !slices.Contains(kinds, "found") {
		t.Errorf("--json events %v lack the verify and found steps", kinds)
	}
	wantRes := []struct{ Region, ImageID, Action string }{{pubRegion, im.ImageId, "reuse"}, {"cn-test2", copies[0].ImageId, "reuse"}}
	if len(res.Images) != 2 || res.Images[0] != wantRes[0] || res.Images[1] != wantRes[1] {
		t.Errorf("second run's images %+v, want %+v", res.Images, wantRes)
	}
	if stderr != "" {
		t.Errorf("--json wrote to stderr (its events go to stdout):\n%s", stderr)
	}
	after := strings.TrimPrefix(c.log.all(), before)
	for _, call := range []string{"ecs ImportImage", "ecs CopyImage", "ecs TagResources", "oss PUT", "oss POST"} {
		if strings.Contains(after, call) {
			t.Errorf("second run made a %s call:\n%s", call, after)
		}
	}
	// Without --keep-object the object goes once the image is Available,
	// also one an earlier run left.
	if err := c.headObject(t, object); !isOSSCode(err, "NoSuchKey") {
		t.Errorf("HeadObject %s after the second run (no --keep-object): %v, want NoSuchKey", object, err)
	}
}

func isOSSCode(err error, code string) bool {
	var se *oss.ServiceError
	return errors.As(err, &se) && se.Code == code
}

// TestPublishResumesUpload: a publish killed once OSS holds the upload's
// first two parts; the next run (same --checkpoint-dir) resumes the upload
// — ListParts, then only the parts OSS lacks — and imports an object that
// is the image byte for byte, then deletes the object.
func TestPublishResumesUpload(t *testing.T) {
	c := newCloud(t, 100*time.Millisecond)
	img := publishImage(t)
	size := int64(len(mustRead(t, img)))
	const part = 102400
	total := int((size + part - 1) / part)
	if total < 5 {
		t.Fatalf("the test image has %d parts of %d bytes, want at least 5", total, part)
	}
	object := "drover/ecs-node-20260102.030405-" + pubBuildID + ".raw"
	cp := t.TempDir()
	args := []string{"--part-size", strconv.Itoa(part), "--checkpoint-dir", cp, img}
	cmd := c.command(t, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	putPart := "oss PUT /" + pubBucket + "/" + object + " 200 "
	done := map[string]bool{}
	var once sync.Once
	killed := make(chan struct{})
	c.log.mu.Lock()
	c.log.on = func(line string) {
		if strings.HasPrefix(line, putPart) {
			done[line[strings.LastIndex(line, " part ")+1:]] = true
		}
		if done["part 1"] && done["part 2"] {
			once.Do(func() { _ = cmd.Process.Kill(); close(killed) })
		}
	}
	c.log.mu.Unlock()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-killed:
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("no parts 1 and 2 uploaded\n%s\n%s", out.String(), c.log.all())
	}
	_ = cmd.Wait()
	c.log.mu.Lock()
	c.log.on = nil
	c.log.mu.Unlock()
	if n := c.log.count("ecs ImportImage"); n != 0 {
		t.Fatalf("the killed run imported already (%d ImportImage): kill it sooner", n)
	}
	before := len(strings.Split(c.log.all(), "\n"))

	stdout, stderr, code := c.publish(t, args...)
	if code != 0 {
		t.Fatalf("resumed run: exit %d\n%s\n%s", code, stderr, c.log.all())
	}
	// The killed run's uploads still in flight (its parallel parts after
	// 1 and 2) may reach the log after before was taken: what the resumed
	// run must not do is send parts 1 and 2 again, which OSS held, nor
	// every part.
	lines := strings.Split(c.log.all(), "\n")[before:]
	second := strings.Join(lines, "\n")
	parts, resent := 0, []string{}
	for _, l := range lines {
		if strings.HasPrefix(l, putPart) {
			parts++
			if strings.HasSuffix(l, " part 1") || strings.HasSuffix(l, " part 2") {
				resent = append(resent, l)
			}
		}
	}
	if len(resent) > 0 || parts >= total || !strings.Contains(second, "oss GET /"+pubBucket+"/"+object+" 200") ||
		strings.Count(second, "oss POST /"+pubBucket+"/"+object) != 1 {
		t.Errorf("resumed run: %d part uploads of %d, parts OSS held sent again %q (want none), one ListParts and only the complete POST:\n%s",
			parts, total, resent, second)
	}
	ims := c.images(t, pubRegion)
	if len(ims) != 1 || stdout != ims[0].ImageId+"\n" || ims[0].Status != "Available" {
		t.Fatalf("stdout %q, %d images of the build", stdout, len(ims))
	}
	if err := c.headObject(t, object); !isOSSCode(err, "NoSuchKey") {
		t.Errorf("HeadObject %s after the image is Available: %v, want NoSuchKey (deleted)", object, err)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPublishWaitsForSlowImport: a run that gives up waiting leaves the
// import running; the next run finds it by its tag and waits for it
// instead of importing again.
func TestPublishWaitsForSlowImport(t *testing.T) {
	c := newCloud(t, 3*time.Second)
	img := publishImage(t)
	_, stderr, code := c.publish(t, "--wait-timeout", "500ms", img)
	if code != 1 || !strings.Contains(stderr, "still Creating when --wait-timeout 500ms ran out") {
		t.Fatalf("first run: exit %d, want 1 with the timeout:\n%s", code, stderr)
	}
	ims := c.images(t, pubRegion)
	if len(ims) != 1 || ims[0].Status != "Creating" {
		t.Fatalf("after the first run: %+v, want one Creating image", ims)
	}
	stdout, stderr, code := c.publish(t, img)
	if code != 0 || stdout != ims[0].ImageId+"\n" {
		t.Fatalf("second run: exit %d, stdout %q, want %s\nstderr: %s", code, stdout, ims[0].ImageId, stderr)
	}
	for _, want := range []string{"wait for " + ims[0].ImageId + " (Creating", ims[0].ImageId + " in " + pubRegion + ": Creating", ims[0].ImageId + " in " + pubRegion + " is Available"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("second run's stderr lacks %q:\n%s", want, stderr)
		}
	}
	if n := c.log.count("ecs ImportImage"); n != 1 {
		t.Errorf("%d ImportImage calls over two runs, want 1", n)
	}
}

// TestPublishFailedImport: CreateFailed stops the run (exit 1) naming the
// image, and the next run refuses to import over it.
func TestPublishFailedImport(t *testing.T) {
	c := newCloud(t, 200*time.Millisecond)
	c.srv.FailImport(1)
	img := publishImage(t)
	_, stderr, code := c.publish(t, img)
	if code != 1 || !strings.Contains(stderr, "is CreateFailed") {
		t.Fatalf("exit %d, want 1 naming CreateFailed:\n%s", code, stderr)
	}
	_, stderr, code = c.publish(t, img)
	if code != 1 || !strings.Contains(stderr, "aliyun ecs DeleteImage") {
		t.Fatalf("second run: exit %d, want 1 telling to delete the failed image:\n%s", code, stderr)
	}
	if n := c.log.count("ecs ImportImage"); n != 1 {
		t.Errorf("%d ImportImage calls, want 1", n)
	}
}

// TestPublishImportAnswerLost: ECS starts the import and the answer is
// lost (503); drover's retry carries the same ClientToken, so it gets the
// started import's ImageId instead of InvalidImageName.Duplicated, and
// there is one image.
func TestPublishImportAnswerLost(t *testing.T) {
	c := newCloud(t, 100*time.Millisecond)
	c.srv.LoseAnswerNext("ImportImage", 1)
	img := publishImage(t)
	stdout, stderr, code := c.publish(t, img)
	if code != 0 {
		t.Fatalf("exit %d\nstderr: %s\ncalls:\n%s", code, stderr, c.log.all())
	}
	if n := c.log.count("ecs ImportImage 503 ServiceUnavailable"); n != 1 {
		t.Fatalf("%d ImportImage answers lost, want the 1 planted:\n%s", n, c.log.all())
	}
	ims := c.images(t, pubRegion)
	if len(ims) != 1 || stdout != ims[0].ImageId+"\n" {
		t.Fatalf("stdout %q, images of the build %+v: want the one import's ImageId", stdout, ims)
	}
}

// TestPublishCopyAnswerLost: ECS starts the copy and the answer is lost
// (503). CopyImage takes no ClientToken; drover's retry finds the started
// copy by its build tag instead of copying again: one image in the copy
// region, and that is the one printed.
func TestPublishCopyAnswerLost(t *testing.T) {
	c := newCloud(t, 100*time.Millisecond)
	c.srv.LoseAnswerNext("CopyImage", 1)
	img := publishImage(t)
	stdout, stderr, code := c.publish(t, "--copy-to", "cn-test2", img)
	if code != 0 {
		t.Fatalf("exit %d\nstderr: %s\ncalls:\n%s", code, stderr, c.log.all())
	}
	if n := c.log.count("ecs CopyImage 503 ServiceUnavailable"); n != 1 {
		t.Fatalf("%d CopyImage answers lost, want the 1 planted:\n%s", n, c.log.all())
	}
	copies, ims := c.images(t, "cn-test2"), c.images(t, pubRegion)
	if len(copies) != 1 || len(ims) != 1 || stdout != ims[0].ImageId+"\ncn-test2 "+copies[0].ImageId+"\n" {
		var ids []string
		for _, im := range copies {
			ids = append(ids, im.ImageId+" "+im.Status)
		}
		t.Fatalf("stdout %q, copies of the build in cn-test2 %v: want the one copy's ImageId", stdout, ids)
	}
}

// TestPublishDryRun: the plan on stdout, read-only lookups only.
func TestPublishDryRun(t *testing.T) {
	c := newCloud(t, 0)
	img := publishImage(t)
	stdout, stderr, code := c.publish(t, "--dry-run", "--copy-to", "cn-test2", img)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	for _, want := range []string{"cn-test: no image tagged drover:build-id=" + pubBuildID + ": import", "Features.ImdsSupport=v2",
		"cn-test2: no image tagged drover:build-id=" + pubBuildID + ": CopyImage from cn-test"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("plan lacks %q:\n%s", want, stdout)
		}
	}
	for _, line := range strings.Split(c.log.all(), "\n") {
		if line != "" && !strings.HasPrefix(line, "ecs DescribeImages ") {
			t.Errorf("dry run made a call other than DescribeImages: %s", line)
		}
	}
	if c.log.count("ecs DescribeImages") != 2 {
		t.Errorf("dry run: want one DescribeImages per region:\n%s", c.log.all())
	}
}

// TestPublishUsage: flag mistakes exit 2 before anything is read or called.
func TestPublishUsage(t *testing.T) {
	c := newCloud(t, 0)
	img := publishImage(t)
	qcow2 := strings.TrimSuffix(img, ".raw") + ".qcow2"
	if err := os.WriteFile(qcow2, []byte("QFI\xfb\x00\x00\x00\x03"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--copy-to", pubRegion, img}, "--copy-to cn-test: that is the import region itself"},
		{[]string{"--architecture", "arm64", img}, "--architecture arm64"},
		{[]string{"--pub", "x.pub", img}, "--pub is only used with --provenance"},
		{[]string{filepath.Join(t.TempDir(), "none.raw")}, "build it first"},
		{[]string{qcow2}, "pass --provenance --pub KEY.pub, or publish the .raw image beside it"},
	} {
		_, stderr, code := c.publish(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, want 2 with %q:\n%s", tc.args, code, tc.want, stderr)
		}
	}
	if calls := c.log.all(); calls != "" {
		t.Errorf("usage errors made calls:\n%s", calls)
	}
}
