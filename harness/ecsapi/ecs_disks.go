package ecsapi

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// An image's disks: ImportImage's DiskDeviceMapping.N (the system disk,
// then data disks) and what DescribeImages lists of them.

// maxMappings is ImportImage's largest N of DiskDeviceMapping.N: 1 is the
// system disk, 2…17 data disks (the ImportImage reference,
// https://api.alibabacloud.com/document/Ecs/2014-05-26/ImportImage).
const maxMappings = 17

// mapping is one DiskDeviceMapping.N of an ImportImage, checked.
type mapping struct {
	bucket, object, format, device string
	sizeGiB                        int
}

// mappings reads and checks ImportImage's DiskDeviceMapping.N as ECS does,
// each field named by its N in the errors. Not documented: what ECS
// answers for more than 17 (InvalidParameter here) and which Device
// values it takes (the reference only says not to set it; here the
// system disk may be /dev/xvda and the data disks /dev/xvdb…/dev/xvdz,
// each once, as CreateImage documents for its mappings).
func (c *call) mappings() ([]mapping, *apiError) {
	maps := indexed(c.p, "DiskDeviceMapping")
	if len(maps) == 0 {
		return nil, errf(403, "MissingParameter.DiskDeviceMapping", "The specified parameter DiskDeviceMapping is not supplied.")
	}
	if len(maps) > maxMappings {
		return nil, errInvalid(fmt.Sprintf("DiskDeviceMapping.%d", len(maps)))
	}
	var out []mapping
	devices := map[string]bool{}
	for i, dm := range maps {
		n := i + 1
		field := func(f string) string { return fmt.Sprintf("DiskDeviceMapping.%d.%s", n, f) }
		if dm["OSSBucket"] == "" {
			return nil, errMissing(field("OSSBucket"))
		}
		if dm["OSSObject"] == "" {
			return nil, errMissing(field("OSSObject"))
		}
		format := strings.ToUpper(dm["Format"])
		switch format {
		case "", "RAW", "QCOW2", "VHD", "VMDK":
		default:
			return nil, errf(400, "InvalidImageFormat.Malformed", "The specified Image Format is wrongly formed.")
		}
		sizeStr := dm["DiskImageSize"]
		if sizeStr == "" {
			sizeStr = dm["DiskImSize"] // the older spelling the SDK still carries
		}
		size := 40
		if sizeStr != "" {
			v, err := strconv.Atoi(sizeStr)
			if err != nil || v < 1 || v > 2048 {
				if n > 1 {
					return nil, errf(400, "InvalidDataDiskSize", "The specified DiskDeviceMapping.N.DiskImSize should be in the specified range.")
				}
				return nil, errf(400, "InvalidImageSize", "The specified \"DiskDeviceMapping.n.DiskImageSize\" beyond the permitted range.")
			}
			size = v
		}
		// The device each disk gets: the system disk /dev/xvda, the data
		// disks the next letters in order, as DescribeImages lists them.
		want := "/dev/xvd" + string(rune('a'+i))
		dev := dm["Device"]
		switch {
		case dev == "":
			dev = want
		case devices[dev], n == 1 && dev != "/dev/xvda",
			n > 1 && (len(dev) != len("/dev/xvdb") || !strings.HasPrefix(dev, "/dev/xvd") || dev[8] < 'b' || dev[8] > 'z'):
			return nil, errf(403, "InvalidParameter.Malformed", "The specified parameter \"DiskDeviceMapping.n.Device \" is not valid.")
		}
		devices[dev] = true
		out = append(out, mapping{bucket: dm["OSSBucket"], object: dm["OSSObject"], format: format, device: dev, sizeGiB: size})
	}
	return out, nil
}

// dataDisk is an image's data disk: the snapshot ECS keeps (its own copy
// of the object, file, as disk is the system disk's).
type dataDisk struct {
	device, format, bucket, object string
	sizeGiB                        int
	snapshotID, file               string
}

// dataDiskFiles are the local files of the image's data disks in mapping
// order.
func (im *image) dataDiskFiles() []string {
	var out []string
	for _, d := range im.dataDisks {
		out = append(out, d.file)
	}
	return out
}

// mappingsJSON lists the system disk, then the data disks (Type data,
// with the snapshot each instance's data disk is created from).
func (im *image) mappingsJSON(now time.Time) []obj {
	out := []obj{{
		"Device": "/dev/xvda", "Type": "system", "Size": strconv.Itoa(im.sizeGiB),
		"Format": im.format, "ImportOSSBucket": im.bucket, "ImportOSSObject": im.object,
		"Progress": im.progress(now), "SnapshotId": "",
	}}
	for _, d := range im.dataDisks {
		out = append(out, obj{
			"Device": d.device, "Type": "data", "Size": strconv.Itoa(d.sizeGiB),
			"Format": d.format, "ImportOSSBucket": d.bucket, "ImportOSSObject": d.object,
			"Progress": im.progress(now), "SnapshotId": d.snapshotID,
		})
	}
	return out
}
