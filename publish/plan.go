// Package publish turns a verified drover image into ECS custom images:
// the upload to OSS, ImportImage with the parameters drover images need
// (UEFI, NVMe, the hardened metadata mode), the wait until the image is
// Available, the drover:* tags, and CopyImage to more regions.
//
// The work is planned first, as a value (NewPlan), from the manifest and the
// flags alone; what the clouds already hold is then looked up and Decide
// says, per region, whether an image of this build is reused, waited for or
// made. Publish is the thin part that calls the APIs. Publishing the same
// build again finds its images by the drover:build-id tag and makes nothing.
package publish

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/drover-os/drover/image/build"
	"github.com/drover-os/drover/nodecontract"
)

// The tag keys the images carry, compatible with scripts/publish-ecs.sh's.
// drover rollout finds an image by TagBuildID, so that one is the
// contract's.
const (
	TagRootHash   = "drover:root-hash"
	TagBuildID    = nodecontract.ImageTagBuildID
	TagName       = "drover:name"
	TagVersion    = "drover:version"
	TagSecureBoot = "drover:secure-boot"
)

// Request is what the command line asks for.
type Request struct {
	Image        string // the image file drover build wrote
	Manifest     *build.Manifest
	Region       string
	Bucket       string
	ObjectPrefix string   // "drover/" when empty is wanted must be passed explicitly
	ImageName    string   // "" = <name>-<version>-<buildID>
	CopyTo       []string // more regions
	Platform     string   // "" = Debian
	Architecture string   // "" = the manifest's; else must agree with it
	SecureBoot   bool     // the image's boot binaries must be signed; tagged so
	WaitTimeout  time.Duration
	PollInterval time.Duration
}

// Tag is one key=value an image carries.
type Tag struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Plan is everything publish will ask of the clouds, decided before the first
// call.
type Plan struct {
	Image         string `json:"image"`
	Format        string `json:"format"` // ImportImage's: RAW, QCOW2, VHD
	Region        string `json:"region"`
	Bucket        string `json:"bucket"`
	Object        string `json:"object"`
	ImageName     string `json:"imageName"`
	Description   string `json:"description"`
	BuildID       string `json:"buildID"`
	RootHash      string `json:"rootHash"`
	Architecture  string `json:"architecture"`
	Platform      string `json:"platform"`
	OSType        string `json:"osType"`
	BootMode      string `json:"bootMode"`
	DiskImageSize int    `json:"diskImageSizeGiB"`
	// DataDisks are imported with the image as DiskDeviceMapping.2, .3…
	// in this order: the cache disk image, when the manifest has one.
	DataDisks    []DataDisk    `json:"dataDisks,omitempty"`
	NvmeSupport  string        `json:"nvmeSupport"`
	ImdsSupport  string        `json:"imdsSupport"`
	Tags         []Tag         `json:"tags"`
	CopyTo       []string      `json:"copyTo"`
	WaitTimeout  time.Duration `json:"-"`
	PollInterval time.Duration `json:"-"`
}

// DataDisk is a data disk of the image: a file beside the image, uploaded
// to its own object and imported as a further DiskDeviceMapping, so that
// every instance created from the image gets a data disk made from it
// (ECS keeps it as a snapshot of the image).
type DataDisk struct {
	File          string `json:"file"`
	Object        string `json:"object"`
	Format        string `json:"format"`
	DiskImageSize int    `json:"diskImageSizeGiB"`
	// Size and SHA256 are the manifest's: the file is checked against
	// them before anything is uploaded.
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

var (
	regionRE    = regexp.MustCompile(`^[a-z]{2,}(-[a-z0-9]+)+$`)
	bucketRE    = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$`)
	prefixRE    = regexp.MustCompile(`^([A-Za-z0-9._-]+/)*[A-Za-z0-9._-]*$`)
	imageNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9.:_-]{1,127}$`)
	platformRE  = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9 ]*$`)
	hexRE       = regexp.MustCompile(`^[0-9a-f]{32,128}$`)
	sha256RE    = regexp.MustCompile(`^[0-9a-f]{64}$`)
	buildIDRE   = regexp.MustCompile(`^[0-9A-Za-z._-]{1,128}$`)
)

// maxGiB is ImportImage's largest DiskImageSize.
const maxGiB = 2048

// UsageError is a request the flags got wrong (exit status 2), as opposed
// to a manifest that cannot be published (1).
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

func usage(format string, args ...any) error {
	return &UsageError{fmt.Errorf(format, args...)}
}

// NewPlan checks the request and the manifest and works out every
// parameter. It reads nothing: the image has been verified by then.
func NewPlan(r Request) (*Plan, error) {
	m := r.Manifest
	if !regionRE.MatchString(r.Region) {
		return nil, usage("--region %q: not a region ID like cn-hangzhou", r.Region)
	}
	if !bucketRE.MatchString(r.Bucket) {
		return nil, usage("--bucket %q: OSS bucket names are 3-63 lowercase letters, digits and hyphens, in the image's region", r.Bucket)
	}
	prefix := r.ObjectPrefix
	if !prefixRE.MatchString(prefix) {
		return nil, usage("--object-prefix %q: use letters, digits, . _ - and / (no leading /)", prefix)
	}
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	seen := map[string]bool{r.Region: true}
	for _, c := range r.CopyTo {
		if !regionRE.MatchString(c) {
			return nil, usage("--copy-to %q: not a region ID like cn-shanghai", c)
		}
		if c == r.Region {
			return nil, usage("--copy-to %s: that is the import region itself", c)
		}
		if seen[c] {
			return nil, usage("--copy-to %s: named twice", c)
		}
		seen[c] = true
	}
	platform := r.Platform
	if platform == "" {
		platform = "Debian"
	}
	if !platformRE.MatchString(platform) {
		return nil, usage("--platform %q: want an ECS Platform such as Debian or \"Others Linux\"", platform)
	}
	if r.PollInterval <= 0 {
		return nil, usage("--poll-interval %v: want a positive duration such as 15s", r.PollInterval)
	}
	if r.WaitTimeout < 0 {
		return nil, usage("--wait-timeout %v: want a duration such as 1h", r.WaitTimeout)
	}

	var format string
	switch strings.ToLower(filepath.Ext(r.Image)) {
	case ".qcow2":
		format = "QCOW2"
	case ".raw", ".img":
		format = "RAW"
	case ".vhd":
		format = "VHD"
	default:
		return nil, usage("%s: want a .qcow2, .raw or .vhd file (the formats ECS ImportImage takes)", r.Image)
	}

	bad := func(format string, args ...any) error {
		return fmt.Errorf("manifest of %s: %s: publish the files drover build wrote together", r.Image, fmt.Sprintf(format, args...))
	}
	for field, v := range map[string]string{"name": m.Name, "version": m.Version, "buildID": m.BuildID, "rootHash": m.RootHash} {
		if v == "" {
			return nil, bad("field %q is missing or empty", field)
		}
	}
	if !hexRE.MatchString(m.RootHash) {
		return nil, bad("rootHash %q is not hex", m.RootHash)
	}
	if !buildIDRE.MatchString(m.BuildID) {
		return nil, bad("buildID %q is malformed", m.BuildID)
	}
	if m.DiskSize <= 0 {
		return nil, bad("diskSize %d is not a byte count", m.DiskSize)
	}

	// The manifest names the architecture the Debian way; a manifest from
	// before arm64 builds has none and is amd64. ImportImage would take any
	// Architecture, and an instance of the wrong one never boots.
	var arch, loader string
	switch m.Arch {
	case "", "amd64":
		arch, loader = "x86_64", "EFI/BOOT/BOOTX64.EFI"
	case "arm64":
		arch, loader = "arm64", "EFI/BOOT/BOOTAA64.EFI"
	default:
		return nil, bad("arch %q is neither amd64 nor arm64", m.Arch)
	}
	if r.Architecture != "" && r.Architecture != arch {
		return nil, usage("--architecture %s: %s is an %s image; drop --architecture or publish the %s build", r.Architecture, r.Image, arch, r.Architecture)
	}

	// DiskImageSize is whole GiB, rounded up: the instance's system disk may
	// be larger, and the node's var partition grows into the rest.
	gib := int((m.DiskSize + 1<<30 - 1) >> 30)
	if gib > maxGiB {
		return nil, fmt.Errorf("%s: the disk is %d GiB: ECS ImportImage takes a DiskImageSize of at most %d GiB", r.Image, gib, maxGiB)
	}

	tags := []Tag{{TagRootHash, m.RootHash}, {TagBuildID, m.BuildID}, {TagName, m.Name}, {TagVersion, m.Version}}
	if r.SecureBoot {
		// Firmware with Secure Boot on refuses the image unless both boot
		// binaries are signed: systemd-boot first, then the UKI.
		for _, p := range []string{loader, "EFI/Linux/drover.efi"} {
			signed := false
			for _, f := range m.ESP {
				if f.Path == p && f.SignedBy != "" {
					signed = true
				}
			}
			if !signed {
				return nil, fmt.Errorf("--secure-boot: %s is not signed in the manifest of %s: build with drover build --secure-boot-key KEY --secure-boot-cert CERT", p, r.Image)
			}
		}
		tags = append(tags, Tag{TagSecureBoot, "signed"})
	}

	name := r.ImageName
	if name == "" {
		name = m.Name + "-" + m.Version + "-" + m.BuildID
	}
	if !imageNameRE.MatchString(name) || strings.HasPrefix(name, "aliyun") || strings.HasPrefix(name, "acs:") {
		return nil, usage("image name %q: ECS wants 2-128 letters, digits, . : _ -, starting with a letter (not aliyun or acs:); pass --image-name", name)
	}

	var disks []DataDisk
	if c := m.CachedImages; c != nil && c.Disk != nil {
		d := c.Disk
		switch {
		case d.File == "" || filepath.Base(d.File) != d.File:
			return nil, bad("cachedImages.disk.file %q is not a file name", d.File)
		case d.Size <= 0:
			return nil, bad("cachedImages.disk.size %d is not a byte count", d.Size)
		case !sha256RE.MatchString(d.SHA256):
			return nil, bad("cachedImages.disk.sha256 %q is not a sha256", d.SHA256)
		}
		gib := int((d.Size + 1<<30 - 1) >> 30)
		if gib > maxGiB {
			return nil, fmt.Errorf("%s: the cache disk is %d GiB: ECS ImportImage takes a DiskImageSize of at most %d GiB", d.File, gib, maxGiB)
		}
		// The cache disk is an uncompressed erofs image: RAW.
		disks = append(disks, DataDisk{File: filepath.Join(filepath.Dir(r.Image), d.File), Object: prefix + name + ".images.raw",
			Format: "RAW", DiskImageSize: gib, Size: d.Size, SHA256: d.SHA256})
	}

	return &Plan{
		Image: r.Image, Format: format, Region: r.Region, Bucket: r.Bucket,
		Object:    prefix + name + strings.ToLower(filepath.Ext(r.Image)),
		ImageName: name, Description: fmt.Sprintf("drover %s %s rootHash=%s buildID=%s", m.Name, m.Version, m.RootHash, m.BuildID),
		BuildID: m.BuildID, RootHash: m.RootHash, Architecture: arch, Platform: platform, OSType: "linux", BootMode: "UEFI",
		DiskImageSize: gib, DataDisks: disks, NvmeSupport: "supported", ImdsSupport: "v2", Tags: tags, CopyTo: append([]string{}, r.CopyTo...),
		WaitTimeout: r.WaitTimeout, PollInterval: r.PollInterval,
	}, nil
}

// Text renders the plan for people, one step per line, given what the
// lookup found in each region (nil: not looked up).
func (p *Plan) Text(decisions map[string]Decision) string {
	var b strings.Builder
	fmt.Fprintf(&b, "publish %s: build %s, root hash %s\n", p.ImageName, p.BuildID, p.RootHash)
	tags := make([]string, len(p.Tags))
	for i, t := range p.Tags {
		tags[i] = t.Key + "=" + t.Value
	}
	d, looked := decisions[p.Region]
	switch {
	case looked && d.Action != ActionImport:
		fmt.Fprintf(&b, "  %s: %s\n", p.Region, d)
	default:
		if looked {
			fmt.Fprintf(&b, "  %s: no image tagged %s=%s: import\n", p.Region, TagBuildID, p.BuildID)
		} else {
			fmt.Fprintf(&b, "  %s: unless an image tagged %s=%s is found: import\n", p.Region, TagBuildID, p.BuildID)
		}
		fmt.Fprintf(&b, "    upload %s to oss://%s/%s\n", p.Image, p.Bucket, p.Object)
		for _, d := range p.DataDisks {
			fmt.Fprintf(&b, "    upload %s (sha256 %s checked first) to oss://%s/%s\n", d.File, d.SHA256, p.Bucket, d.Object)
		}
		fmt.Fprintf(&b, "    ImportImage RegionId=%s ImageName=%s Architecture=%s OSType=%s Platform=%s BootMode=%s "+
			"DiskDeviceMapping.1.Format=%s DiskDeviceMapping.1.DiskImageSize=%d DiskDeviceMapping.1.OSSBucket=%s DiskDeviceMapping.1.OSSObject=%s ",
			p.Region, p.ImageName, p.Architecture, p.OSType, p.Platform, p.BootMode, p.Format, p.DiskImageSize, p.Bucket, p.Object)
		for i, d := range p.DataDisks {
			n := i + 2
			fmt.Fprintf(&b, "DiskDeviceMapping.%d.Format=%s DiskDeviceMapping.%d.DiskImageSize=%d DiskDeviceMapping.%d.OSSBucket=%s DiskDeviceMapping.%d.OSSObject=%s ",
				n, d.Format, n, d.DiskImageSize, n, p.Bucket, n, d.Object)
		}
		fmt.Fprintf(&b, "Features.NvmeSupport=%s Features.ImdsSupport=%s\n", p.NvmeSupport, p.ImdsSupport)
		for i, d := range p.DataDisks {
			fmt.Fprintf(&b, "    data disk %d: %s, in every instance created from the image (the image keeps it as a snapshot)\n", i+1, filepath.Base(d.File))
		}
		fmt.Fprintf(&b, "    tag %s\n", strings.Join(tags, " "))
		fmt.Fprintf(&b, "    wait until Available (--wait-timeout %v)\n", p.WaitTimeout)
	}
	for _, r := range p.CopyTo {
		d, looked := decisions[r]
		switch {
		case looked && d.Action != ActionImport:
			fmt.Fprintf(&b, "  %s: %s\n", r, d)
		case looked:
			fmt.Fprintf(&b, "  %s: no image tagged %s=%s: CopyImage from %s, tag, wait until Available\n", r, TagBuildID, p.BuildID, p.Region)
		default:
			fmt.Fprintf(&b, "  %s: unless an image tagged %s=%s is found: CopyImage from %s, tag, wait until Available\n", r, TagBuildID, p.BuildID, p.Region)
		}
	}
	return b.String()
}
