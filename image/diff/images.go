package diff

import (
	"fmt"
	"strings"

	"github.com/drover-os/drover/image/build"
	"github.com/drover-os/drover/internal/bytesize"
)

// ImageSide is one side of a cached image change.
type ImageSide struct {
	Digest   string `json:"digest"`   // the reference's: index or manifest
	Manifest string `json:"manifest"` // the platform's manifest
	Platform string `json:"platform"`
	Location string `json:"location"` // root or disk
	Size     int64  `json:"size"`
}

// ImageChange is a cached image added (Old nil), removed (New nil) or
// changed, by its name without the digest (host/repo:tag): a new digest
// of the same name is a change.
type ImageChange struct {
	Name string     `json:"name"`
	Old  *ImageSide `json:"old"`
	New  *ImageSide `json:"new"`
}

// imageOwner owns the files of the root's image cache (build.ImageFilesOwner):
// their changes are counted under the changed images, not listed.
const imageOwner = build.ImageFilesOwner

func cachedImages(m *build.Manifest) map[string]build.CachedImage {
	out := map[string]build.CachedImage{}
	if m.CachedImages == nil {
		return out
	}
	for _, c := range m.CachedImages.Images {
		out[c.Ref[:strings.LastIndex(c.Ref, "@")]] = c
	}
	return out
}

func compareImages(old, new *build.Manifest) []ImageChange {
	om, nm := cachedImages(old), cachedImages(new)
	side := func(c build.CachedImage) *ImageSide {
		return &ImageSide{Digest: c.Digest, Manifest: c.Manifest, Platform: c.Platform, Location: c.Location, Size: c.Size}
	}
	return changedSides(om, nm, side, func(name string, o, n *ImageSide) ImageChange { return ImageChange{Name: name, Old: o, New: n} })
}

// cacheDisk is the sha256 of the manifest's cache disk image, "" without.
func cacheDisk(m *build.Manifest) string {
	if m.CachedImages == nil || m.CachedImages.Disk == nil {
		return ""
	}
	return m.CachedImages.Disk.File + " sha256 " + m.CachedImages.Disk.SHA256
}

func (c ImageChange) describe() (string, string) {
	switch {
	case c.Old == nil:
		return "+", fmt.Sprintf("%s@%s (%s, %s, in the %s)", c.Name, c.New.Digest, c.New.Platform, bytesize.Format(c.New.Size), c.New.Location)
	case c.New == nil:
		return "-", fmt.Sprintf("%s@%s", c.Name, c.Old.Digest)
	}
	parts := fieldChanges(
		[3]string{"digest", c.Old.Digest, c.New.Digest},
		[3]string{"manifest", c.Old.Manifest, c.New.Manifest},
		[3]string{"platform", c.Old.Platform, c.New.Platform},
		[3]string{"location", c.Old.Location, c.New.Location},
	)
	if c.Old.Size != c.New.Size {
		parts = append(parts, "size "+bytesize.Format(c.Old.Size)+" → "+bytesize.Format(c.New.Size))
	}
	return "~", c.Name + " " + strings.Join(parts, ", ")
}

func imageCell(s *ImageSide) string {
	if s == nil {
		return "—"
	}
	return code(s.Digest) + " (" + s.Platform + ", " + s.Location + ")"
}
