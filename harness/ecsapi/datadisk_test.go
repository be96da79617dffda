package ecsapi

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	sdkerrors "github.com/aliyun/alibaba-cloud-sdk-go/sdk/errors"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
	"github.com/aliyun/alibabacloud-oss-go-sdk-v2/oss"
)

// withData adds a data disk mapping (DiskDeviceMapping.N, N ≥ 2).
func withData(r *ecs.ImportImageRequest, m ecs.ImportImageDiskDeviceMapping) *ecs.ImportImageRequest {
	maps := append(*r.DiskDeviceMapping, m)
	r.DiskDeviceMapping = &maps
	return r
}

// TestImportImageDataDisks: an image imported with a second mapping lists
// it as a data disk with a snapshot, keeps its bytes once the object is
// deleted, hands them to the launcher of an instance created from it, and
// a copy carries it under a snapshot of its own.
func TestImportImageDataDisks(t *testing.T) {
	l := &fakeLauncher{}
	e := newEnv(t, Config{Launcher: l, LaunchRetry: testLaunchRetry})
	e.srv.CreateBucket("images")
	put(t, e, "images", "node.raw", "system-bytes")
	put(t, e, "images", "node.images.raw", "cache-bytes")
	imp, err := e.ecs.ImportImage(withData(importReq("images", "node.raw", "node"),
		ecs.ImportImageDiskDeviceMapping{OSSBucket: "images", OSSObject: "node.images.raw", Format: "RAW", DiskImageSize: "1"}))
	if err != nil {
		t.Fatal(err)
	}
	// ECS has its own copy: the objects may go.
	for _, k := range []string{"node.raw", "node.images.raw"} {
		if _, err := e.oss.DeleteObject(context.Background(), &oss.DeleteObjectRequest{Bucket: oss.Ptr("images"), Key: oss.Ptr(k)}); err != nil {
			t.Fatal(err)
		}
	}
	got := describe(t, e.ecs, func(r *ecs.DescribeImagesRequest) { r.ImageId = imp.ImageId })
	if len(got.Images.Image) != 1 {
		t.Fatalf("want the image, got %+v", got)
	}
	dm := got.Images.Image[0].DiskDeviceMappings.DiskDeviceMapping
	if len(dm) != 2 || dm[0].Type != "system" || dm[0].Device != "/dev/xvda" ||
		dm[1].Type != "data" || dm[1].Device != "/dev/xvdb" || dm[1].Size != "1" || dm[1].Format != "RAW" ||
		dm[1].ImportOSSObject != "node.images.raw" || !strings.HasPrefix(dm[1].SnapshotId, "s-") {
		t.Fatalf("disk device mappings: %+v", dm)
	}

	ct := ecs.CreateCreateLaunchTemplateRequest()
	ct.LaunchTemplateName = "pool"
	ct.ImageId = imp.ImageId
	ct.UserData = base64.StdEncoding.EncodeToString([]byte("node-config"))
	lt, err := e.ecs.CreateLaunchTemplate(ct)
	if err != nil {
		t.Fatal(err)
	}
	e.srv.AddScalingGroup(ScalingGroup{Name: "pool", LaunchTemplateID: lt.LaunchTemplateId,
		LaunchTemplateVersion: "1", MinSize: 1, MaxSize: 1, DesiredCapacity: 1})
	eventually(t, "an instance launched", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.specs) == 1
	})
	spec := l.specs[0]
	if len(spec.DataDisks) != 1 {
		t.Fatalf("InstanceSpec.DataDisks %q, want the cache disk", spec.DataDisks)
	}
	if b, err := os.ReadFile(spec.DataDisks[0]); err != nil || string(b) != "cache-bytes" {
		t.Fatalf("data disk %s: %q %v, want the imported object's bytes", spec.DataDisks[0], b, err)
	}

	cp := ecs.CreateCopyImageRequest()
	cp.ImageId, cp.DestinationRegionId = imp.ImageId, "cn-other"
	cpResp, err := e.ecs.CopyImage(cp)
	if err != nil {
		t.Fatal(err)
	}
	cg := describe(t, e.ecs, func(r *ecs.DescribeImagesRequest) { r.RegionId = "cn-other"; r.ImageId = cpResp.ImageId })
	if len(cg.Images.Image) != 1 {
		t.Fatalf("want the copy, got %+v", cg)
	}
	cdm := cg.Images.Image[0].DiskDeviceMappings.DiskDeviceMapping
	if len(cdm) != 2 || cdm[1].Type != "data" || cdm[1].Device != "/dev/xvdb" || cdm[1].Size != "1" ||
		!strings.HasPrefix(cdm[1].SnapshotId, "s-") || cdm[1].SnapshotId == dm[1].SnapshotId {
		t.Fatalf("the copy's disk device mappings: %+v (source's data snapshot %s)", cdm, dm[1].SnapshotId)
	}
}

// TestImportImageDataDiskErrors: each data disk mapping is checked as the
// first is, the errors naming its N.
func TestImportImageDataDiskErrors(t *testing.T) {
	e := newEnv(t, Config{})
	e.srv.CreateBucket("images")
	put(t, e, "images", "disk.raw", "x")
	put(t, e, "images", "data.raw", "y")
	data := func() ecs.ImportImageDiskDeviceMapping {
		return ecs.ImportImageDiskDeviceMapping{OSSBucket: "images", OSSObject: "data.raw", Format: "RAW", DiskImageSize: "1"}
	}
	try := func(name string, change func(*ecs.ImportImageDiskDeviceMapping)) error {
		m := data()
		change(&m)
		_, err := e.ecs.ImportImage(withData(importReq("images", "disk.raw", name), m))
		return err
	}
	wantMsg := func(err error, code, field string) {
		t.Helper()
		wantCode(t, err, code)
		var se *sdkerrors.ServerError
		if errors.As(err, &se) && !strings.Contains(se.Message(), field) {
			t.Fatalf("%s: message %q does not name %s", code, se.Message(), field)
		}
	}
	wantMsg(try("a", func(m *ecs.ImportImageDiskDeviceMapping) { m.OSSObject = "" }), "MissingParameter", "DiskDeviceMapping.2.OSSObject")
	wantMsg(try("b", func(m *ecs.ImportImageDiskDeviceMapping) { m.OSSBucket = "" }), "MissingParameter", "DiskDeviceMapping.2.OSSBucket")
	wantCode(t, try("c", func(m *ecs.ImportImageDiskDeviceMapping) { m.OSSObject = "missing.raw" }), "InvalidOSSObject.NotFound")
	wantCode(t, try("d", func(m *ecs.ImportImageDiskDeviceMapping) { m.DiskImageSize = "4096" }), "InvalidDataDiskSize")
	wantCode(t, try("e", func(m *ecs.ImportImageDiskDeviceMapping) { m.Format = "ISO" }), "InvalidImageFormat.Malformed")
	// The system disk's device, and one that is no ECS device name.
	wantCode(t, try("f", func(m *ecs.ImportImageDiskDeviceMapping) { m.Device = "/dev/xvda" }), "InvalidParameter.Malformed")
	wantCode(t, try("f", func(m *ecs.ImportImageDiskDeviceMapping) { m.Device = "/dev/sdb" }), "InvalidParameter.Malformed")
	if err := try("g", func(m *ecs.ImportImageDiskDeviceMapping) { m.Device = "/dev/xvdc" }); err != nil {
		t.Fatalf("a data disk named /dev/xvdc: %v", err)
	}

	r := importReq("images", "disk.raw", "h")
	for range maxMappings {
		r = withData(r, data())
	}
	_, err := e.ecs.ImportImage(r)
	wantMsg(err, "InvalidParameter", fmt.Sprintf("DiskDeviceMapping.%d", maxMappings+1))
}
