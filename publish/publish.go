package publish

import (
	"context"
	"errors"
	"fmt"
	"hash/crc64"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
	"github.com/aliyun/alibabacloud-oss-go-sdk-v2/oss"

	"github.com/drover-os/drover/cloud/aliyun"
	"github.com/drover-os/drover/cloud/event"
)

// Event is one step of a publish, for the progress log and --json: the
// record drover rollout emits too. Kinds: found, upload, import, copy,
// wait, tag, available, cleanup (and the command's verify, lookup, plan,
// done).
type Event = event.Event

// RegionImage is the image of the build in one region.
type RegionImage struct {
	Region  string `json:"region"`
	ImageID string `json:"imageId"`
	// Action is ActionReuse for an image found Available, ActionWait for
	// one an earlier run started, ActionImport for one made by this run.
	Action Action `json:"action"`
}

// Result is what a publish leaves: the build's image in every region, the
// import region first.
type Result struct {
	ImageName string        `json:"imageName"`
	BuildID   string        `json:"buildID"`
	RootHash  string        `json:"rootHash"`
	Images    []RegionImage `json:"images"`
}

// Publisher calls the APIs for a Plan. Every call goes through
// aliyun.Retry.
type Publisher struct {
	Clients *aliyun.Clients // of the plan's region; ECS calls name their region
	Events  func(Event)     // progress; nil: none
	// PartSize is the OSS multipart upload's part size; 0: the SDK's.
	PartSize int64
	// CheckpointDir holds the OSS SDK's upload checkpoints: an upload
	// interrupted (a kill, a lost network) resumes from the parts OSS
	// has (ListParts) on the next run. "": the SDK's default (the
	// system's temporary directory).
	CheckpointDir string
	// KeepObject leaves the uploaded object in the bucket once the image
	// is Available; by default it is deleted (ECS has its own copy, and
	// the object is billed as storage).
	KeepObject bool
}

func (pb *Publisher) emit(e Event) {
	if pb.Events != nil {
		pb.Events(e)
	}
}

// Lookup finds the build's images in the plan's region and every copy
// region and decides, per region, what publishing needs. It only reads.
func (pb *Publisher) Lookup(ctx context.Context, p *Plan) (map[string]Decision, error) {
	out := map[string]Decision{}
	for _, r := range append([]string{p.Region}, p.CopyTo...) {
		found, err := pb.find(ctx, p, r)
		if err != nil {
			return nil, err
		}
		d, err := Decide(p, r, found)
		if err != nil {
			return nil, err
		}
		out[r] = d
	}
	return out, nil
}

// Publish makes (or finds) the build's image in the plan's region, then in
// each copy region, and returns their IDs.
func (pb *Publisher) Publish(ctx context.Context, p *Plan) (*Result, error) {
	res := &Result{ImageName: p.ImageName, BuildID: p.BuildID, RootHash: p.RootHash}
	// drover verify checked the image; the data disks are checked here,
	// before anything talks to a cloud.
	if err := p.checkDataDisks(); err != nil {
		return nil, err
	}
	src, err := pb.region(ctx, p, p.Region, func() (string, error) {
		if err := pb.upload(ctx, p, p.Image, p.Object); err != nil {
			return "", err
		}
		for _, d := range p.DataDisks {
			if err := pb.upload(ctx, p, d.File, d.Object); err != nil {
				return "", err
			}
		}
		return pb.importImage(ctx, p)
	})
	if err != nil {
		return nil, err
	}
	res.Images = append(res.Images, src)
	for _, obj := range p.objects() {
		if err := pb.removeObject(ctx, p, obj); err != nil {
			return nil, err
		}
	}
	for _, r := range p.CopyTo {
		img, err := pb.region(ctx, p, r, func() (string, error) { return pb.copyImage(ctx, p, src.ImageID, r) })
		if err != nil {
			return nil, err
		}
		res.Images = append(res.Images, img)
	}
	return res, nil
}

// region brings one region to an Available, tagged image of the build:
// the one found, or the one create makes.
func (pb *Publisher) region(ctx context.Context, p *Plan, r string, create func() (string, error)) (RegionImage, error) {
	found, err := pb.find(ctx, p, r)
	if err != nil {
		return RegionImage{}, err
	}
	d, err := Decide(p, r, found)
	if err != nil {
		return RegionImage{}, err
	}
	id := d.ImageID
	switch d.Action {
	case ActionImport:
		if id, err = create(); err != nil {
			return RegionImage{}, err
		}
	default:
		pb.emit(Event{Kind: "found", Region: r, ImageID: id, Status: d.Status, Message: d.String()})
	}
	tags, err := pb.wait(ctx, p, r, id)
	if err != nil {
		return RegionImage{}, err
	}
	if err := pb.tag(ctx, p, r, id, tags); err != nil {
		return RegionImage{}, err
	}
	return RegionImage{Region: r, ImageID: id, Action: d.Action}, nil
}

var allStatuses = "Creating,Waiting,Available,UnAvailable,CreateFailed,Deprecated"

// find lists the account's images in region r tagged with the build ID,
// whatever their status.
func (pb *Publisher) find(ctx context.Context, p *Plan, r string) ([]Found, error) {
	req := ecs.CreateDescribeImagesRequest()
	req.RegionId = r
	req.ImageOwnerAlias = "self"
	req.Status = allStatuses
	req.Tag = &[]ecs.DescribeImagesTag{{Key: TagBuildID, Value: p.BuildID}}
	req.PageSize = "100"
	var resp *ecs.DescribeImagesResponse
	err := aliyun.Retry(ctx, "DescribeImages "+TagBuildID+"="+p.BuildID+" in "+r, func() (err error) {
		resp, err = pb.Clients.ECS.DescribeImages(req)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("looking for an image of build %s: %w", p.BuildID, err)
	}
	var out []Found
	for _, im := range resp.Images.Image {
		f := Found{ID: im.ImageId, Status: im.Status, Progress: im.Progress, Tags: tagMap(im.Tags.Tag)}
		for _, dm := range im.DiskDeviceMappings.DiskDeviceMapping {
			if dm.Type == "data" {
				f.DataDisks++
			}
		}
		out = append(out, f)
	}
	return out, nil
}

// tagMap reads DescribeImages' tags, which come as Key/Value or as
// TagKey/TagValue.
func tagMap(tags []ecs.Tag) map[string]string {
	m := map[string]string{}
	for _, t := range tags {
		k, v := t.Key, t.Value
		if k == "" {
			k, v = t.TagKey, t.TagValue
		}
		m[k] = v
	}
	return m
}

// upload puts file into the plan's bucket as object, resumably.
func (pb *Publisher) upload(ctx context.Context, p *Plan, file, object string) error {
	dest := "oss://" + p.Bucket + "/" + object
	pb.emit(Event{Kind: "upload", Region: p.Region, Message: "uploading " + file + " to " + dest})
	step := int64(-1)
	req := &oss.PutObjectRequest{Bucket: oss.Ptr(p.Bucket), Key: oss.Ptr(object),
		ProgressFn: func(_, done, total int64) {
			if total <= 0 {
				return
			}
			// One line per tenth, not one per part.
			if s := done * 10 / total; s != step {
				step = s
				pb.emit(Event{Kind: "upload", Region: p.Region, Progress: fmt.Sprintf("%d%%", done*100/total),
					Message: fmt.Sprintf("%s: %d%% (%d of %d bytes)", dest, done*100/total, done, total)})
			}
		}}
	if pb.CheckpointDir != "" {
		if err := os.MkdirAll(pb.CheckpointDir, 0o700); err != nil {
			return fmt.Errorf("upload checkpoint directory: %w: pass a writable --checkpoint-dir", err)
		}
	}
	up := oss.NewUploader(pb.Clients.OSS, func(o *oss.UploaderOptions) {
		if pb.PartSize > 0 {
			o.PartSize = pb.PartSize
		}
		// The SDK keeps the upload ID in a checkpoint file named by the
		// image's path and the object, and on the next run asks OSS which
		// parts it holds (ListParts) and uploads the rest. It puts the
		// file in the parent of CheckpointDir (filepath.Dir): the
		// trailing separator makes that the directory itself.
		o.EnableCheckpoint = true
		if pb.CheckpointDir != "" {
			o.CheckpointDir = filepath.Clean(pb.CheckpointDir) + string(filepath.Separator)
		}
	})
	sum, err := fileCRC64(file)
	if err != nil {
		return err
	}
	err = aliyun.Retry(ctx, "uploading "+file+" to "+dest, func() error {
		_, err := up.UploadFile(ctx, req, file)
		return err
	})
	if err != nil {
		return fmt.Errorf("%w: check that bucket %s exists in %s and that you may write to it (docs/ecs.md, Permissions)", err, p.Bucket, p.Region)
	}
	// The object OSS holds must be the image, however the upload went
	// (resumed, retried): its CRC-64 against the file's. The SDK's own
	// check is off (aliyun.New).
	var head *oss.HeadObjectResult
	err = aliyun.Retry(ctx, "HeadObject "+dest, func() (err error) {
		head, err = pb.Clients.OSS.HeadObject(ctx, &oss.HeadObjectRequest{Bucket: oss.Ptr(p.Bucket), Key: oss.Ptr(object)})
		return err
	})
	if err != nil {
		return fmt.Errorf("checking the uploaded object: %w: HeadObject needs oss:GetObject on it (docs/ecs.md, Permissions)", err)
	}
	if got, want := oss.ToString(head.HashCRC64), strconv.FormatUint(sum, 10); got != want {
		return fmt.Errorf("%s has CRC-64 %q (OSS's x-oss-hash-crc64ecma), %s has %s: the object is not the image (the file changed during the upload, or data was damaged on the way); run drover publish again to upload it anew",
			dest, got, file, want)
	}
	return nil
}

// fileCRC64 is the CRC-64/ECMA of the file at path, as OSS computes it for
// an object (x-oss-hash-crc64ecma).
func fileCRC64(path string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("image: %w", err)
	}
	defer f.Close()
	h := crc64.New(crc64.MakeTable(crc64.ECMA))
	if _, err := io.Copy(h, f); err != nil {
		return 0, fmt.Errorf("reading image %s: %w", path, err)
	}
	return h.Sum64(), nil
}

// removeObject deletes an uploaded object once the image is Available
// in the plan's region (ECS keeps its own copy; copies are made from the
// image), unless KeepObject. Also when the image was found, not imported:
// a run killed before this step left the object. OSS answers 204 for an
// object that is not there (DeleteObject), so that costs one call.
func (pb *Publisher) removeObject(ctx context.Context, p *Plan, object string) error {
	dest := "oss://" + p.Bucket + "/" + object
	if pb.KeepObject {
		return nil
	}
	err := aliyun.Retry(ctx, "deleting "+dest, func() error {
		_, err := pb.Clients.OSS.DeleteObject(ctx, &oss.DeleteObjectRequest{Bucket: oss.Ptr(p.Bucket), Key: oss.Ptr(object)})
		return err
	})
	if err != nil {
		return fmt.Errorf("%w: the image is Available; delete the object by hand, or pass --keep-object", err)
	}
	pb.emit(Event{Kind: "cleanup", Region: p.Region, Message: "deleted " + dest + ": the image is Available (--keep-object keeps it)"})
	return nil
}

func (pb *Publisher) importImage(ctx context.Context, p *Plan) (string, error) {
	req := ecs.CreateImportImageRequest()
	req.RegionId = p.Region
	req.ImageName = p.ImageName
	req.Description = p.Description
	req.Architecture = p.Architecture
	req.OSType = p.OSType
	req.Platform = p.Platform
	req.BootMode = p.BootMode
	// DiskDeviceMapping.N: N=1 is the system disk, N=2…17 data disks,
	// each of DiskImageSize 1–2048 GiB; an instance created from the
	// image gets a data disk of each (the ImportImage reference,
	// https://api.alibabacloud.com/document/Ecs/2014-05-26/ImportImage).
	// Device is left out: the reference says it will be removed and asks
	// callers not to set it; ECS names the data disks in order, and the
	// agent finds the cache disk by label and UUID, never by name.
	maps := []ecs.ImportImageDiskDeviceMapping{{OSSBucket: p.Bucket, OSSObject: p.Object, Format: p.Format,
		DiskImageSize: strconv.Itoa(p.DiskImageSize)}}
	for _, d := range p.DataDisks {
		maps = append(maps, ecs.ImportImageDiskDeviceMapping{OSSBucket: p.Bucket, OSSObject: d.Object, Format: d.Format,
			DiskImageSize: strconv.Itoa(d.DiskImageSize)})
	}
	req.DiskDeviceMapping = &maps
	req.Features = ecs.ImportImageFeatures{NvmeSupport: p.NvmeSupport, ImdsSupport: p.ImdsSupport}
	// Tagged at import, so that a run interrupted during the wait finds
	// the import and waits for it instead of importing twice.
	var tags []ecs.ImportImageTag
	for _, t := range p.Tags {
		tags = append(tags, ecs.ImportImageTag{Key: t.Key, Value: t.Value})
	}
	req.Tag = &tags
	// One token across the retries: a retry after an import that ECS
	// started but whose answer was lost gets that import's ImageId instead
	// of InvalidImageName.Duplicated.
	req.ClientToken = aliyun.ClientToken()
	var resp *ecs.ImportImageResponse
	err := aliyun.Retry(ctx, "ImportImage "+p.ImageName+" in "+p.Region, func() (err error) {
		resp, err = pb.Clients.ECS.ImportImage(req)
		return err
	})
	if err != nil {
		hint := ""
		switch {
		case aliyun.IsCode(err, "NoSetRoletoECSServiceAcount"):
			hint = ": ECS may not read the bucket: create the role AliyunECSImageImportDefaultRole (docs/ecs.md, Permissions)"
		case aliyun.IsCode(err, "InvalidImageName.Duplicated"):
			hint = ": an image of that name exists without this build's " + TagBuildID + " tag; delete or rename it, or pass --image-name"
		}
		return "", fmt.Errorf("%w%s", err, hint)
	}
	if resp.ImageId == "" {
		return "", fmt.Errorf("ImportImage %s in %s answered without an ImageId (request %s)", p.ImageName, p.Region, resp.RequestId)
	}
	pb.emit(Event{Kind: "import", Region: p.Region, ImageID: resp.ImageId, Message: "importing " + p.ImageName + " as " + resp.ImageId})
	return resp.ImageId, nil
}

func (pb *Publisher) copyImage(ctx context.Context, p *Plan, srcID, r string) (string, error) {
	req := ecs.CreateCopyImageRequest()
	req.RegionId = p.Region
	req.ImageId = srcID
	req.DestinationRegionId = r
	req.DestinationImageName = p.ImageName
	req.DestinationDescription = p.Description
	var tags []ecs.CopyImageTag
	for _, t := range p.Tags {
		tags = append(tags, ecs.CopyImageTag{Key: t.Key, Value: t.Value})
	}
	req.Tag = &tags
	// CopyImage takes no ClientToken (not among its parameters in the API
	// reference, nor in the SDK's CopyImageRequest): a retry after a copy
	// that ECS started but whose answer was lost would start a second one.
	// The copy carries the build's tags from the start, so before each
	// retry drover looks for it in r and takes the one found.
	var resp *ecs.CopyImageResponse
	started := ""
	tries := 0
	err := aliyun.Retry(ctx, "CopyImage "+srcID+" to "+r, func() (err error) {
		if tries++; tries > 1 {
			found, err := pb.find(ctx, p, r)
			if err != nil {
				return err
			}
			if d, err := Decide(p, r, found); err != nil || d.Action != ActionImport {
				started = d.ImageID
				return err
			}
		}
		resp, err = pb.Clients.ECS.CopyImage(req)
		return err
	})
	if err != nil {
		return "", err
	}
	if started != "" {
		pb.emit(Event{Kind: "copy", Region: r, ImageID: started, Message: "copying " + srcID + " to " + r + " as " + started + " (the copy an earlier attempt started)"})
		return started, nil
	}
	if resp.ImageId == "" {
		return "", fmt.Errorf("CopyImage %s to %s answered without an ImageId (request %s)", srcID, r, resp.RequestId)
	}
	pb.emit(Event{Kind: "copy", Region: r, ImageID: resp.ImageId, Message: "copying " + srcID + " to " + r + " as " + resp.ImageId})
	return resp.ImageId, nil
}

// errNotYet marks a wait that ran out of time.
var errNotYet = errors.New("not Available yet")

// wait polls DescribeImages until image id in region r is Available and
// returns its tags.
func (pb *Publisher) wait(ctx context.Context, p *Plan, r, id string) (map[string]string, error) {
	deadline := time.Now().Add(p.WaitTimeout)
	start := time.Now()
	req := ecs.CreateDescribeImagesRequest()
	req.RegionId = r
	req.ImageId = id
	req.ImageOwnerAlias = "self"
	req.Status = allStatuses
	last, lastLine := "", time.Time{}
	for {
		var resp *ecs.DescribeImagesResponse
		err := aliyun.Retry(ctx, "DescribeImages "+id+" in "+r, func() (err error) {
			resp, err = pb.Clients.ECS.DescribeImages(req)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("waiting for image %s: %w", id, err)
		}
		// Just after ImportImage or CopyImage the image may not be listed.
		status, progress, tags := "Pending", "", map[string]string(nil)
		for _, im := range resp.Images.Image {
			if im.ImageId == id {
				status, progress, tags = im.Status, im.Progress, tagMap(im.Tags.Tag)
			}
		}
		switch status {
		case "Available":
			pb.emit(Event{Kind: "available", Region: r, ImageID: id, Status: status, Message: id + " in " + r + " is Available"})
			return tags, nil
		case "Creating", "Waiting", "Pending":
		default:
			return nil, fmt.Errorf("image %s in %s is %s: see its task in the ECS console (Images, import tasks) and the image's format and size; delete it before publishing again", id, r, status)
		}
		// A line when the status changes, then one a minute: polls
		// may be seconds apart and an import takes many minutes.
		if status != last || time.Since(lastLine) >= time.Minute {
			last, lastLine = status, time.Now()
			pb.emit(Event{Kind: "wait", Region: r, ImageID: id, Status: status, Progress: progress,
				Message: fmt.Sprintf("%s in %s: %s %s (%s)", id, r, status, progress, time.Since(start).Round(time.Second))})
		}
		if !time.Now().Add(p.PollInterval).Before(deadline) {
			return nil, fmt.Errorf("image %s in %s: %w, still %s when --wait-timeout %v ran out: it may still finish; run drover publish again to wait for it", id, r, errNotYet, status, p.WaitTimeout)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for image %s in %s: %w", id, r, ctx.Err())
		case <-time.After(p.PollInterval):
		}
	}
}

// tag adds the plan's tags the image lacks: ImportImage and CopyImage tag
// at creation, but an image published by the shell script or made by hand
// may carry only some.
func (pb *Publisher) tag(ctx context.Context, p *Plan, r, id string, have map[string]string) error {
	missing := p.Missing(have)
	if len(missing) == 0 {
		return nil
	}
	req := ecs.CreateTagResourcesRequest()
	req.RegionId = r
	req.ResourceType = "image"
	req.ResourceId = &[]string{id}
	var tags []ecs.TagResourcesTag
	for _, t := range missing {
		tags = append(tags, ecs.TagResourcesTag{Key: t.Key, Value: t.Value})
	}
	req.Tag = &tags
	err := aliyun.Retry(ctx, "TagResources "+id+" in "+r, func() error {
		_, err := pb.Clients.ECS.TagResources(req)
		return err
	})
	if err != nil {
		return err
	}
	pb.emit(Event{Kind: "tag", Region: r, ImageID: id, Message: fmt.Sprintf("tagged %s in %s (%d tags)", id, r, len(missing))})
	return nil
}
