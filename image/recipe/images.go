package recipe

import (
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// CachedImage is a workload image the node ships in its image cache: fetched
// at build time by digest, imported into containerd and pinned by the agent
// at boot, so that a pod using it starts without a registry
// (docs/recipes.md, "Cached images").
type CachedImage struct {
	// Ref is the image's reference with its digest
	// (host/repo[:tag]@sha256:…): the name containerd stores the image
	// under and pods use; the digest pins the content, an index's or a
	// single manifest's.
	Ref string `yaml:"ref"`
	// Platform is the os/arch of an index's manifest the node takes
	// (default linux/<recipe arch>); ignored for a single manifest.
	Platform string `yaml:"platform"`
	// Location is where the image ships: "root", in the root file system
	// (small sets: the image's size is every node's), or "disk", on the
	// cache disk image written beside the node image and attached as a
	// data disk (large sets). Default root.
	Location string `yaml:"location"`
	Line     int    `yaml:"-"`
	From     string `yaml:"-"`
}

// Image locations.
const (
	LocationRoot = "root"
	LocationDisk = "disk"
)

// Parsed splits the reference into the repository (host/path), the tag
// ("" when none) and the digest; the recipe has been validated.
func (c CachedImage) Parsed() (repo, tag, digest string) {
	d, err := name.NewDigest(c.Ref, name.StrictValidation)
	if err != nil {
		return "", "", ""
	}
	repo = d.Context().Name()
	base := c.Ref[:strings.LastIndex(c.Ref, "@")]
	if i := strings.LastIndex(base, ":"); i > strings.LastIndex(base, "/") {
		tag = base[i+1:]
	}
	return repo, tag, d.DigestStr()
}

// HasDiskImages says whether any cached image ships on the cache disk.
func (r *Recipe) HasDiskImages() bool {
	for _, im := range r.Images {
		if im.Location == LocationDisk {
			return true
		}
	}
	return false
}

func (v *validator) images() {
	seen := map[string]int{}
	for i, im := range v.r.Images {
		f := fmt.Sprintf("images[%d]", i)
		switch {
		case im.Ref == "":
			v.fail(f+".ref", "required: the image's reference with its digest, host/repo:tag@sha256:<64 hex digits>")
		case !strings.Contains(im.Ref, "@"):
			v.fail(f+".ref", "%q has no digest: a cached image is pinned by content; write it as %s@sha256:<digest of the index or manifest> (`crane digest %s` prints it)", im.Ref, im.Ref, im.Ref)
		default:
			if _, err := name.NewDigest(im.Ref, name.StrictValidation); err != nil {
				v.fail(f+".ref", "%q: %v: want host/repo[:tag]@sha256:<64 lower-case hex digits> (the node stores the image under this name, so it names its registry host)", im.Ref, err)
			}
		}
		if j, ok := seen[im.Ref]; ok && im.Ref != "" {
			v.fail(f+".ref", "%q is listed twice (also images[%d])", im.Ref, j)
		}
		seen[im.Ref] = i
		if im.Platform != "" {
			os, a, ok := strings.Cut(im.Platform, "/")
			if !ok || os != "linux" || a == "" || strings.Contains(a, "/") && !strings.HasPrefix(a, "arm") {
				v.fail(f+".platform", "%q: want linux/<arch>, e.g. linux/%s", im.Platform, v.r.Arch)
			}
		}
		switch im.Location {
		case LocationRoot, LocationDisk:
		default:
			v.fail(f+".location", "%q: want root (in the root file system) or disk (on the cache disk image beside it)", im.Location)
		}
	}
}

// ImagePlatform is the platform the node takes of im's index.
func (r *Recipe) ImagePlatform(im CachedImage) string {
	if im.Platform != "" {
		return im.Platform
	}
	return "linux/" + r.Arch
}
