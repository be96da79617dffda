package ecsapi

import (
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/requests"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
)

func importReq(bucket, key, name string, tags ...ecs.ImportImageTag) *ecs.ImportImageRequest {
	r := ecs.CreateImportImageRequest()
	r.ImageName = name
	r.Architecture = "x86_64"
	r.BootMode = "UEFI"
	r.Platform = "Others Linux"
	r.Features = ecs.ImportImageFeatures{NvmeSupport: "supported", ImdsSupport: "v2"}
	r.DiskDeviceMapping = &[]ecs.ImportImageDiskDeviceMapping{{
		OSSBucket: bucket, OSSObject: key, Format: "RAW", DiskImageSize: "20"}}
	r.Tag = &tags
	return r
}

func describe(t *testing.T, c *ecs.Client, set func(*ecs.DescribeImagesRequest)) *ecs.DescribeImagesResponse {
	t.Helper()
	r := ecs.CreateDescribeImagesRequest()
	r.ImageOwnerAlias = "self"
	set(r)
	resp, err := c.DescribeImages(r)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestImportImageBecomesAvailable(t *testing.T) {
	e := newEnv(t, Config{ImportDelay: 300 * time.Millisecond})
	e.srv.CreateBucket("images")
	put(t, e, "images", "a/disk.raw", "image-A")

	resp, err := e.ecs.ImportImage(importReq("images", "a/disk.raw", "drover-a",
		ecs.ImportImageTag{Key: "drover.dev/build-id", Value: "A"}))
	if err != nil {
		t.Fatal(err)
	}
	if resp.ImageId == "" || resp.TaskId == "" || resp.RequestId == "" {
		t.Fatalf("ImportImage answered %+v", resp)
	}
	byID := func(r *ecs.DescribeImagesRequest) { r.ImageId = resp.ImageId }
	// Without Status only Available images are listed, as documented.
	if got := describe(t, e.ecs, byID); got.TotalCount != 0 || len(got.Images.Image) != 0 {
		t.Fatalf("a Creating image was listed without Status: %+v", got.Images.Image)
	}
	got := describe(t, e.ecs, func(r *ecs.DescribeImagesRequest) { byID(r); r.Status = "Creating,Available" })
	if len(got.Images.Image) != 1 || got.Images.Image[0].Status != "Creating" {
		t.Fatalf("want one Creating image, got %+v", got.Images.Image)
	}
	time.Sleep(300 * time.Millisecond)
	got = describe(t, e.ecs, byID)
	if len(got.Images.Image) != 1 {
		t.Fatalf("want the image Available, got %+v", got)
	}
	im := got.Images.Image[0]
	if im.ImageId != resp.ImageId || im.Status != "Available" || im.ImageName != "drover-a" ||
		im.Architecture != "x86_64" || im.BootMode != "UEFI" || im.Platform != "Others Linux" ||
		im.Features.NvmeSupport != "supported" || im.Features.ImdsSupport != "v2" ||
		im.ImageOwnerAlias != "self" || im.Size != 20 || im.Progress != "100%" {
		t.Fatalf("image fields: %+v", im)
	}
	if len(im.Tags.Tag) != 1 || im.Tags.Tag[0].TagKey != "drover.dev/build-id" || im.Tags.Tag[0].TagValue != "A" {
		t.Fatalf("image tags: %+v", im.Tags)
	}
	dm := im.DiskDeviceMappings.DiskDeviceMapping
	if len(dm) != 1 || dm[0].ImportOSSBucket != "images" || dm[0].ImportOSSObject != "a/disk.raw" {
		t.Fatalf("disk device mappings: %+v", dm)
	}
	// The tag filter finds it; another value does not.
	byTag := func(v string) func(*ecs.DescribeImagesRequest) {
		return func(r *ecs.DescribeImagesRequest) {
			r.Tag = &[]ecs.DescribeImagesTag{{Key: "drover.dev/build-id", Value: v}}
		}
	}
	if got := describe(t, e.ecs, byTag("A")); got.TotalCount != 1 {
		t.Fatalf("tag filter A: %d images", got.TotalCount)
	}
	if got := describe(t, e.ecs, byTag("B")); got.TotalCount != 0 {
		t.Fatalf("tag filter B: %d images", got.TotalCount)
	}
}

func TestImportImageErrors(t *testing.T) {
	e := newEnv(t, Config{})
	e.srv.CreateBucket("images")
	put(t, e, "images", "disk.raw", "x")

	_, err := e.ecs.ImportImage(importReq("images", "missing.raw", "m"))
	wantCode(t, err, "InvalidOSSObject.NotFound")

	bad := importReq("images", "disk.raw", "s")
	(*bad.DiskDeviceMapping)[0].DiskImageSize = "4096"
	_, err = e.ecs.ImportImage(bad)
	wantCode(t, err, "InvalidImageSize")

	_, err = ecsClient(t, e.eps, "LTAIunknown", testSecret).ImportImage(importReq("images", "disk.raw", "k"))
	wantCode(t, err, "InvalidAccessKeyId.NotFound")
	_, err = ecsClient(t, e.eps, testKeyID, "wrong").ImportImage(importReq("images", "disk.raw", "k"))
	wantCode(t, err, "SignatureDoesNotMatch")

	e.srv.ThrottleNext("ImportImage", 2)
	for range 2 {
		_, err = e.ecs.ImportImage(importReq("images", "disk.raw", "t"))
		wantCode(t, err, "Throttling.User")
	}
	if _, err = e.ecs.ImportImage(importReq("images", "disk.raw", "t")); err != nil {
		t.Fatalf("the third call after ThrottleNext(2): %v", err)
	}
	_, err = e.ecs.ImportImage(importReq("images", "disk.raw", "t"))
	wantCode(t, err, "InvalidImageName.Duplicated")

	e.srv.FailImport(1)
	resp, err := e.ecs.ImportImage(importReq("images", "disk.raw", "f"))
	if err != nil {
		t.Fatal(err)
	}
	got := describe(t, e.ecs, func(r *ecs.DescribeImagesRequest) { r.ImageId = resp.ImageId; r.Status = "CreateFailed" })
	if len(got.Images.Image) != 1 || got.Images.Image[0].Status != "CreateFailed" {
		t.Fatalf("want CreateFailed, got %+v", got.Images.Image)
	}

	// An action the product does not have.
	req := requests.NewCommonRequest()
	req.Domain, req.Version, req.ApiName, req.Product = e.eps.ECS, ECSVersion, "NoSuchAction", "Ecs"
	_, err = e.ecs.ProcessCommonRequest(req)
	wantCode(t, err, "InvalidAction.NotFound")
}

func TestDescribeImagesPages(t *testing.T) {
	e := newEnv(t, Config{})
	e.srv.CreateBucket("images")
	put(t, e, "images", "disk.raw", "x")
	for i := range 5 {
		if _, err := e.ecs.ImportImage(importReq("images", "disk.raw", fmt.Sprint("img-", i))); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	for page, want := range []int{2, 2, 1} {
		got := describe(t, e.ecs, func(r *ecs.DescribeImagesRequest) {
			r.PageNumber = requests.NewInteger(page + 1)
			r.PageSize = requests.NewInteger(2)
		})
		if got.TotalCount != 5 || got.PageNumber != page+1 || got.PageSize != 2 || len(got.Images.Image) != want {
			t.Fatalf("page %d: total %d number %d size %d len %d", page+1, got.TotalCount, got.PageNumber, got.PageSize, len(got.Images.Image))
		}
		for _, im := range got.Images.Image {
			seen[im.ImageId] = true
		}
	}
	if len(seen) != 5 {
		t.Fatalf("pages covered %d of 5 images", len(seen))
	}
}

func TestCopyImageAndTagResources(t *testing.T) {
	// Long enough that the copy is still Creating when it is described
	// on a loaded machine (100 ms was not: seen Available at once).
	const delay = 2 * time.Second
	e := newEnv(t, Config{ImportDelay: delay})
	e.srv.CreateBucket("images")
	put(t, e, "images", "disk.raw", "x")
	imp, err := e.ecs.ImportImage(importReq("images", "disk.raw", "src"))
	if err != nil {
		t.Fatal(err)
	}
	cp := ecs.CreateCopyImageRequest()
	cp.ImageId, cp.DestinationRegionId = imp.ImageId, "cn-other"
	_, err = e.ecs.CopyImage(cp)
	wantCode(t, err, "IncorrectImageStatus") // still Creating
	eventually(t, "the import to become Available", func() bool {
		got := describe(t, e.ecs, func(r *ecs.DescribeImagesRequest) { r.ImageId = imp.ImageId })
		return len(got.Images.Image) == 1
	})
	cpResp, err := e.ecs.CopyImage(cp)
	if err != nil {
		t.Fatal(err)
	}
	inOther := func(r *ecs.DescribeImagesRequest) {
		r.RegionId = "cn-other"
		r.ImageId = cpResp.ImageId
		r.Status = "Creating,Available"
	}
	got := describe(t, e.ecs, inOther)
	if len(got.Images.Image) != 1 || !got.Images.Image[0].IsCopied || got.Images.Image[0].Status != "Creating" {
		t.Fatalf("copied image: %+v", got.Images.Image)
	}
	if home := describe(t, e.ecs, func(r *ecs.DescribeImagesRequest) { r.ImageId = cpResp.ImageId }); home.TotalCount != 0 {
		t.Fatal("the copy is listed in the source region")
	}
	eventually(t, "the copy to become Available", func() bool {
		got := describe(t, e.ecs, inOther)
		return len(got.Images.Image) == 1 && got.Images.Image[0].Status == "Available"
	})

	tr := ecs.CreateTagResourcesRequest()
	tr.ResourceType = "image"
	tr.ResourceId = &[]string{imp.ImageId}
	tr.Tag = &[]ecs.TagResourcesTag{{Key: "drover.dev/root-hash", Value: "abc"}}
	if _, err := e.ecs.TagResources(tr); err != nil {
		t.Fatal(err)
	}
	got = describe(t, e.ecs, func(r *ecs.DescribeImagesRequest) {
		r.Tag = &[]ecs.DescribeImagesTag{{Key: "drover.dev/root-hash", Value: "abc"}}
	})
	if len(got.Images.Image) != 1 || got.Images.Image[0].ImageId != imp.ImageId {
		t.Fatalf("tagged image not found by tag: %+v", got.Images.Image)
	}
	tr.ResourceId = &[]string{"m-doesnotexist"}
	_, err = e.ecs.TagResources(tr)
	wantCode(t, err, "InvalidResourceId.NotFound")
}

func TestLaunchTemplateVersions(t *testing.T) {
	e := newEnv(t, Config{})
	e.srv.CreateBucket("images")
	put(t, e, "images", "disk.raw", "x")
	imp, err := e.ecs.ImportImage(importReq("images", "disk.raw", "img"))
	if err != nil {
		t.Fatal(err)
	}
	ct := ecs.CreateCreateLaunchTemplateRequest()
	ct.LaunchTemplateName = "pool"
	ct.ImageId = imp.ImageId
	ct.UserData = base64.StdEncoding.EncodeToString([]byte("v1"))
	lt, err := e.ecs.CreateLaunchTemplate(ct)
	if err != nil {
		t.Fatal(err)
	}
	if lt.LaunchTemplateVersionNumber != 1 {
		t.Fatalf("first version %d", lt.LaunchTemplateVersionNumber)
	}
	cv := ecs.CreateCreateLaunchTemplateVersionRequest()
	cv.LaunchTemplateId = lt.LaunchTemplateId
	cv.ImageId = imp.ImageId
	cv.UserData = base64.StdEncoding.EncodeToString([]byte("v2"))
	cv.VersionDescription = "build A digest d"
	cv.InstanceType = "ecs.g8i.large"
	v2, err := e.ecs.CreateLaunchTemplateVersion(cv)
	if err != nil {
		t.Fatal(err)
	}
	if v2.LaunchTemplateVersionNumber != 2 || v2.LaunchTemplateId != lt.LaunchTemplateId {
		t.Fatalf("CreateLaunchTemplateVersion: %+v", v2)
	}
	dv := ecs.CreateDescribeLaunchTemplateVersionsRequest()
	dv.LaunchTemplateId = lt.LaunchTemplateId
	dv.LaunchTemplateVersion = &[]string{"2"}
	dv.DetailFlag = requests.NewBoolean(true)
	got, err := e.ecs.DescribeLaunchTemplateVersions(dv)
	if err != nil {
		t.Fatal(err)
	}
	sets := got.LaunchTemplateVersionSets.LaunchTemplateVersionSet
	if len(sets) != 1 || sets[0].VersionNumber != 2 || sets[0].DefaultVersion ||
		sets[0].VersionDescription != "build A digest d" ||
		sets[0].LaunchTemplateData.ImageId != imp.ImageId ||
		sets[0].LaunchTemplateData.UserData != cv.UserData ||
		sets[0].LaunchTemplateData.InstanceType != "ecs.g8i.large" {
		t.Fatalf("version 2: %+v", sets)
	}
	dd := ecs.CreateDescribeLaunchTemplateVersionsRequest()
	dd.LaunchTemplateId = lt.LaunchTemplateId
	dd.DefaultVersion = requests.NewBoolean(true)
	defaultVersion := func() int64 {
		got, err := e.ecs.DescribeLaunchTemplateVersions(dd)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.LaunchTemplateVersionSets.LaunchTemplateVersionSet) != 1 {
			t.Fatalf("default versions: %+v", got.LaunchTemplateVersionSets)
		}
		return got.LaunchTemplateVersionSets.LaunchTemplateVersionSet[0].VersionNumber
	}
	if v := defaultVersion(); v != 1 {
		t.Fatalf("default version %d, want 1", v)
	}
	md := ecs.CreateModifyLaunchTemplateDefaultVersionRequest()
	md.LaunchTemplateId = lt.LaunchTemplateId
	md.DefaultVersionNumber = requests.NewInteger(2)
	if _, err := e.ecs.ModifyLaunchTemplateDefaultVersion(md); err != nil {
		t.Fatal(err)
	}
	if v := defaultVersion(); v != 2 {
		t.Fatalf("default version %d, want 2", v)
	}
	md.DefaultVersionNumber = requests.NewInteger(9)
	_, err = e.ecs.ModifyLaunchTemplateDefaultVersion(md)
	wantCode(t, err, "InvalidLaunchTemplateVersion.NotFound")
	cv.LaunchTemplateId = "lt-missing"
	_, err = e.ecs.CreateLaunchTemplateVersion(cv)
	wantCode(t, err, "InvalidLaunchTemplate.NotFound")
}

// TestLaunchTemplateVersionLimit: a template holds at most 30 versions;
// DeleteLaunchTemplateVersion makes room (never for the default version)
// and numbers keep counting up.
func TestLaunchTemplateVersionLimit(t *testing.T) {
	e := newEnv(t, Config{})
	ct := ecs.CreateCreateLaunchTemplateRequest()
	ct.LaunchTemplateName = "pool"
	lt, err := e.ecs.CreateLaunchTemplate(ct)
	if err != nil {
		t.Fatal(err)
	}
	cv := ecs.CreateCreateLaunchTemplateVersionRequest()
	cv.LaunchTemplateId = lt.LaunchTemplateId
	for i := 2; i <= MaxTemplateVersions; i++ {
		if _, err := e.ecs.CreateLaunchTemplateVersion(cv); err != nil {
			t.Fatalf("version %d: %v", i, err)
		}
	}
	_, err = e.ecs.CreateLaunchTemplateVersion(cv)
	wantCode(t, err, "QuotaExceed.LaunchTemplateVersion")

	dl := ecs.CreateDeleteLaunchTemplateVersionRequest()
	dl.LaunchTemplateId = lt.LaunchTemplateId
	dl.DeleteVersion = &[]string{"2", "1"}
	_, err = e.ecs.DeleteLaunchTemplateVersion(dl)
	wantCode(t, err, "InvalidOperation.DeleteDefaultVersion")
	dl.DeleteVersion = &[]string{"2", "77"}
	_, err = e.ecs.DeleteLaunchTemplateVersion(dl)
	wantCode(t, err, "InvalidLaunchTemplateVersion.NotFound")
	dl.DeleteVersion = &[]string{"2", "3"}
	got, err := e.ecs.DeleteLaunchTemplateVersion(dl)
	if err != nil {
		t.Fatal(err)
	}
	if d := got.LaunchTemplateVersions.LaunchTemplateVersion; len(d) != 2 || d[0].LaunchTemplateVersionNumber != 2 ||
		d[1].LaunchTemplateVersionNumber != 3 || d[0].LaunchTemplateId != lt.LaunchTemplateId {
		t.Fatalf("deleted: %+v", d)
	}
	dv := ecs.CreateDescribeLaunchTemplateVersionsRequest()
	dv.LaunchTemplateId = lt.LaunchTemplateId
	dv.MaxVersion = requests.NewInteger(4)
	listed, err := e.ecs.DescribeLaunchTemplateVersions(dv)
	if err != nil {
		t.Fatal(err)
	}
	var nums []int64
	for _, v := range listed.LaunchTemplateVersionSets.LaunchTemplateVersionSet {
		nums = append(nums, v.VersionNumber)
	}
	if fmt.Sprint(nums) != "[4 1]" {
		t.Fatalf("versions up to 4 after deleting 2 and 3: %v, want [4 1]", nums)
	}
	for _, want := range []int64{31, 32} {
		v, err := e.ecs.CreateLaunchTemplateVersion(cv)
		if err != nil || v.LaunchTemplateVersionNumber != want {
			t.Fatalf("after deleting two: version %+v, %v, want number %d", v, err, want)
		}
	}
	_, err = e.ecs.CreateLaunchTemplateVersion(cv)
	wantCode(t, err, "QuotaExceed.LaunchTemplateVersion")
}

// TestClientTokenIdempotence: a call repeated with its ClientToken and the
// same parameters gets the first call's result without acting again, also
// when the first answer was lost (503 after the import started); the token
// with other parameters is refused with IdempotentParameterMismatch (ECS,
// "How to ensure idempotence").
func TestClientTokenIdempotence(t *testing.T) {
	e := newEnv(t, Config{})
	e.srv.CreateBucket("images")
	put(t, e, "images", "disk.raw", "x")

	req := importReq("images", "disk.raw", "idem")
	req.ClientToken = "0123456789abcdef0123456789abcdef"
	e.srv.LoseAnswerNext("ImportImage", 1)
	_, err := e.ecs.ImportImage(req)
	wantCode(t, err, "ServiceUnavailable")
	// The lost answer's import happened.
	all := describe(t, e.ecs, func(r *ecs.DescribeImagesRequest) { r.ImageName = "idem"; r.Status = "Creating,Available" })
	if len(all.Images.Image) != 1 {
		t.Fatalf("after the lost answer: %d images named idem, want the 1 the call created", len(all.Images.Image))
	}
	first := all.Images.Image[0].ImageId
	again, err := e.ecs.ImportImage(req)
	if err != nil {
		t.Fatalf("the retry with the same token: %v", err)
	}
	if again.ImageId != first {
		t.Errorf("the retry answered ImageId %s, the import it repeats is %s", again.ImageId, first)
	}
	all = describe(t, e.ecs, func(r *ecs.DescribeImagesRequest) { r.ImageName = "idem"; r.Status = "Creating,Available" })
	if len(all.Images.Image) != 1 {
		t.Errorf("after the retry: %d images named idem, want 1", len(all.Images.Image))
	}

	other := importReq("images", "disk.raw", "idem-2")
	other.ClientToken = req.ClientToken
	_, err = e.ecs.ImportImage(other)
	wantCode(t, err, "IdempotentParameterMismatch")

	// Without a token the same retry is a second import, refused by name.
	plain := importReq("images", "disk.raw", "idem")
	_, err = e.ecs.ImportImage(plain)
	wantCode(t, err, "InvalidImageName.Duplicated")
}
