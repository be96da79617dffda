package ecsapi

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// maxUserData is ECS's limit on raw user-data.
const maxUserData = 32 << 10

type image struct {
	id, taskID, region string
	name, desc         string
	arch, bootMode     string
	platform, format   string
	nvme, imds         string
	bucket, object     string
	// disk is the image's own copy of the object (ECS keeps an
	// imported image in its snapshot, so deleting the object once the
	// image is Available leaves it bootable).
	disk    string
	sizeGiB int
	// dataDisks are DiskDeviceMapping.2… in order: ECS keeps each as a
	// snapshot of the image, and an instance created from the image gets
	// a data disk of each.
	dataDisks        []dataDisk
	copied           bool
	tags             []tag
	created, readyAt time.Time
	failed           bool
	// owner is the ImageOwnerAlias of an image not imported by the
	// account (AddSystemImage); "" means self.
	owner string
}

func (im *image) ownerAlias() string { return firstOf(im.owner, "self") }

// status is computed from the clock so an import needs no goroutine.
func (im *image) status(now time.Time) string {
	switch {
	case now.Before(im.readyAt):
		return "Creating"
	case im.failed:
		return "CreateFailed"
	}
	return "Available"
}

func (im *image) progress(now time.Time) string {
	total := im.readyAt.Sub(im.created)
	if total <= 0 || !now.Before(im.readyAt) {
		return "100%"
	}
	return fmt.Sprintf("%d%%", int(100*now.Sub(im.created)/total))
}

func (c *call) importImage() (obj, *apiError) {
	maps, e := c.mappings()
	if e != nil {
		return nil, e
	}
	dm := maps[0]
	arch := c.p.Get("Architecture")
	switch arch {
	case "":
		arch = "x86_64"
	case "x86_64", "arm64", "i386":
	default:
		return nil, errInvalid("Architecture")
	}
	boot := c.p.Get("BootMode")
	switch boot {
	case "":
		boot = "BIOS"
	case "BIOS", "UEFI":
	default:
		return nil, errInvalid("BootMode")
	}
	nvme := c.p.Get("Features.NvmeSupport")
	if nvme != "" && nvme != "supported" && nvme != "unsupported" {
		return nil, errInvalid("Features.NvmeSupport")
	}
	imds := c.p.Get("Features.ImdsSupport")
	switch imds {
	case "":
		imds = "v1"
	case "v1", "v2":
	default:
		return nil, errInvalid("Features.ImdsSupport")
	}
	tags, e := tagParams(c.p)
	if e != nil {
		return nil, e
	}
	s := c.s
	for _, m := range maps {
		if !s.objectExists(m.bucket, m.object) {
			return nil, errf(400, "InvalidOSSObject.NotFound", "The specified OSS object does not exist in this region.")
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	name := c.p.Get("ImageName")
	if name != "" {
		for _, im := range s.images {
			if im.region == c.region && im.name == name {
				return nil, errf(400, "InvalidImageName.Duplicated", "The specified Image name has already been used.")
			}
		}
	}
	im := &image{
		id: newID("m-", 20), taskID: newID("t-", 20), region: c.region,
		name: name, desc: c.p.Get("Description"),
		arch: arch, bootMode: boot, platform: c.p.Get("Platform"), format: dm.format,
		nvme: nvme, imds: imds, bucket: dm.bucket, object: dm.object,
		sizeGiB: dm.sizeGiB, tags: tags, created: c.now, readyAt: c.now.Add(s.cfg.ImportDelay),
	}
	if im.name == "" {
		im.name = im.id
	}
	im.disk = filepath.Join(s.dir, "images", im.id)
	if err := os.MkdirAll(filepath.Dir(im.disk), 0o755); err != nil {
		return nil, errf(500, "InternalError", "%s", err.Error())
	}
	if err := os.Link(s.objectPath(im.bucket, im.object), im.disk); err != nil {
		return nil, errf(500, "InternalError", "%s", err.Error())
	}
	for i, m := range maps[1:] {
		d := dataDisk{device: m.device, sizeGiB: m.sizeGiB, format: m.format, bucket: m.bucket, object: m.object,
			snapshotID: newID("s-", 20), file: fmt.Sprintf("%s.data%d", im.disk, i+2)}
		if err := os.Link(s.objectPath(m.bucket, m.object), d.file); err != nil {
			return nil, errf(500, "InternalError", "%s", err.Error())
		}
		im.dataDisks = append(im.dataDisks, d)
	}
	if s.failImport > 0 {
		s.failImport--
		im.failed = true
	}
	s.images[im.id] = im
	return obj{"ImageId": im.id, "TaskId": im.taskID, "RegionId": c.region}, nil
}

// describeImages answers the account's own images. As the API documents,
// without Status only Available images are listed.
func (c *call) describeImages() (obj, *apiError) {
	want, e := tagParams(c.p)
	if e != nil {
		return nil, e
	}
	statuses := strings.Split(c.p.Get("Status"), ",")
	if c.p.Get("Status") == "" {
		statuses = []string{"Available"}
	}
	var ids []string
	if v := c.p.Get("ImageId"); v != "" {
		ids = strings.Split(v, ",")
	}
	alias := c.p.Get("ImageOwnerAlias")
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	var match []*image
	for _, im := range s.images {
		switch {
		case im.region != c.region,
			alias != "" && alias != im.ownerAlias(),
			len(ids) > 0 && !contains(ids, im.id),
			c.p.Get("ImageName") != "" && c.p.Get("ImageName") != im.name,
			c.p.Get("Architecture") != "" && c.p.Get("Architecture") != im.arch,
			!contains(statuses, im.status(c.now)),
			!hasTags(im.tags, want):
			continue
		}
		match = append(match, im)
	}
	// Newest first, as the console and API list custom images.
	sort.Slice(match, func(i, j int) bool {
		if !match[i].created.Equal(match[j].created) {
			return match[i].created.After(match[j].created)
		}
		return match[i].id < match[j].id
	})
	lo, hi, number, size, e := c.page(len(match), 100)
	if e != nil {
		return nil, e
	}
	list := []obj{}
	for _, im := range match[lo:hi] {
		list = append(list, im.json(c.now))
	}
	return obj{
		"RegionId": c.region, "TotalCount": len(match), "PageNumber": number, "PageSize": size,
		"Images": obj{"Image": list},
	}, nil
}

func (im *image) json(now time.Time) obj {
	tags := []obj{}
	for _, t := range im.tags {
		tags = append(tags, obj{"TagKey": t.Key, "TagValue": t.Value})
	}
	features := obj{"ImdsSupport": im.imds}
	if im.nvme != "" {
		features["NvmeSupport"] = im.nvme
	}
	return obj{
		"ImageId": im.id, "ImageName": im.name, "Description": im.desc,
		"Status": im.status(now), "Progress": im.progress(now),
		"Architecture": im.arch, "BootMode": im.bootMode, "Platform": im.platform,
		"OSType": "linux", "OSName": im.platform, "ImageOwnerAlias": im.ownerAlias(),
		"IsCopied": im.copied, "IsSelfShared": "", "IsPublic": false, "IsSubscribed": false,
		"IsSupportCloudinit": true, "IsSupportIoOptimized": true, "Usage": "none",
		"Size": im.sizeGiB, "CreationTime": ecsTime(im.created), "ImageFamily": "", "ImageVersion": "",
		"ProductCode": "", "ResourceGroupId": "",
		"Features":           features,
		"Tags":               obj{"Tag": tags},
		"DiskDeviceMappings": obj{"DiskDeviceMapping": im.mappingsJSON(now)},
	}
}

func (c *call) copyImage() (obj, *apiError) {
	id := c.p.Get("ImageId")
	if id == "" {
		return nil, errMissing("ImageId")
	}
	dest := c.p.Get("DestinationRegionId")
	if dest == "" {
		return nil, errMissing("DestinationRegionId")
	}
	tags, e := tagParams(c.p)
	if e != nil {
		return nil, e
	}
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	src := s.images[id]
	if src == nil || src.region != c.region {
		return nil, errf(404, "InvalidImageId.NotFound", "The specified ImageId does not exist.")
	}
	if src.status(c.now) != "Available" {
		return nil, errf(403, "IncorrectImageStatus", "The Image is not available.")
	}
	cp := *src
	cp.id, cp.taskID, cp.region = newID("m-", 20), newID("t-", 20), dest
	cp.copied, cp.tags, cp.failed = true, tags, false
	cp.created, cp.readyAt = c.now, c.now.Add(s.cfg.ImportDelay)
	// The copy has snapshots of its own in its region, of the same bytes.
	cp.dataDisks = nil
	for _, d := range src.dataDisks {
		d.snapshotID = newID("s-", 20)
		cp.dataDisks = append(cp.dataDisks, d)
	}
	if n := c.p.Get("DestinationImageName"); n != "" {
		cp.name = n
	}
	if d := c.p.Get("DestinationDescription"); d != "" {
		cp.desc = d
	}
	s.images[cp.id] = &cp
	return obj{"ImageId": cp.id}, nil
}

func (c *call) tagResources() (obj, *apiError) {
	if c.p.Get("ResourceType") != "image" {
		return nil, errInvalid("ResourceType")
	}
	ids := list(c.p, "ResourceId")
	if len(ids) == 0 {
		return nil, errMissing("ResourceId.1")
	}
	tags, e := tagParams(c.p)
	if e != nil {
		return nil, e
	}
	if len(tags) == 0 {
		return nil, errMissing("Tag.1.Key")
	}
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if im := s.images[id]; im == nil || im.region != c.region {
			return nil, errf(404, "InvalidResourceId.NotFound", "The specified ResourceIds are not found in our records.")
		}
	}
	for _, id := range ids {
		for _, t := range tags {
			s.images[id].tags = setTag(s.images[id].tags, t)
		}
	}
	return obj{}, nil
}

// describeInstances answers the emulated instances; InstanceIds is a JSON
// array, as the API takes it.
func (c *call) describeInstances() (obj, *apiError) {
	var ids []string
	if v := c.p.Get("InstanceIds"); v != "" {
		if err := json.Unmarshal([]byte(v), &ids); err != nil {
			return nil, errf(400, "InvalidInstanceIds.Malformed", "The specified parameter InstancesIds is not valid.")
		}
	}
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	var match []*instance
	for _, in := range s.instances {
		if in.region != c.region || (len(ids) > 0 && !contains(ids, in.id)) ||
			(c.p.Get("Status") != "" && c.p.Get("Status") != in.status) {
			continue
		}
		match = append(match, in)
	}
	sort.Slice(match, func(i, j int) bool { return match[i].seq < match[j].seq })
	lo, hi, number, size, e := c.page(len(match), 100)
	if e != nil {
		return nil, e
	}
	out := []obj{}
	for _, in := range match[lo:hi] {
		out = append(out, obj{
			"InstanceId": in.id, "InstanceName": in.id, "HostName": in.hostname, "Hostname": in.hostname,
			"ImageId": in.imageID, "InstanceType": in.itype, "RegionId": in.region, "ZoneId": in.zone,
			"Status": in.status, "CreationTime": ecsTime(in.created), "StartTime": ecsTime(in.created),
			"OSType": "linux", "InstanceChargeType": "PostPaid", "InstanceNetworkType": "vpc",
		})
	}
	return obj{"TotalCount": len(match), "PageNumber": number, "PageSize": size,
		"Instances": obj{"Instance": out}}, nil
}

func (c *call) getInstanceConsoleOutput() (obj, *apiError) {
	id := c.p.Get("InstanceId")
	if id == "" {
		return nil, errMissing("InstanceId")
	}
	s := c.s
	s.mu.Lock()
	in := s.instances[id]
	var h Instance
	if in != nil {
		h = in.handle
	}
	s.mu.Unlock()
	if in == nil || in.region != c.region {
		return nil, errf(404, "InvalidInstanceId.NotFound", "The specified InstanceId does not exist.")
	}
	var out []byte
	if h != nil {
		out = h.Console()
	}
	return obj{"InstanceId": id, "ConsoleOutput": base64.StdEncoding.EncodeToString(out),
		"LastUpdateTime": ecsTime(c.now)}, nil
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
