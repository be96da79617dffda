package nodeconfig

import (
	"slices"
	"strings"
)

// The image cache: a recipe's cached workload images (docs/recipes.md,
// "Cached images"), which the agent imports into containerd and pins at
// boot, from the root file system or from the cache disk.
const (
	// ImageCacheFile says what the image cache holds (ImageCache, JSON):
	// drover build writes it into the root, so the agent trusts what it
	// says as it trusts the root.
	ImageCacheFile = "/usr/lib/drover/image-cache.json"
	// ImageCacheDir is the OCI image layout of the images that ship in
	// the root (location root).
	ImageCacheDir = "/usr/lib/drover/image-cache"
	// ImageCacheLabel is the file system label of the cache disk image
	// (location disk), by which the agent finds it among the data disks;
	// its OCI image layout is at the file system's root.
	ImageCacheLabel = "drover-images"
	// ImageCacheMount is where the agent mounts the cache disk, read-only.
	ImageCacheMount = "/run/drover/image-cache"
)

// ImageCache is ImageCacheFile.
type ImageCache struct {
	// Root are the images in ImageCacheDir.
	Root []CachedImage `json:"root,omitempty"`
	// Disk is the cache disk, nil when no image ships on one.
	Disk *CacheDisk `json:"disk,omitempty"`
}

// CachedImage is one cached image as containerd stores it.
type CachedImage struct {
	// Names are the names of the image record (repo:tag, repo@digest).
	Names []string `json:"names"`
	// Digest is the record's target: the reference's digest.
	Digest   string `json:"digest"`
	Platform string `json:"platform"`
	// Manifest is the platform's manifest digest; Size the bytes of the
	// manifest, its config and layers.
	Manifest string `json:"manifest"`
	Size     int64  `json:"size"`
}

// CacheDisk is the cache disk image: the build pins its file system (by
// UUID) and its layout's index.json (by sha256), which pins every blob by
// digest, so the agent imports from it exactly what the build wrote.
type CacheDisk struct {
	Label  string        `json:"label"`
	UUID   string        `json:"uuid"`
	Index  string        `json:"index"` // sha256 of index.json, hex
	Images []CachedImage `json:"images"`
}

// Repositories are the cached images' repositories as a pod may name them
// (without tag or digest; a Docker Hub image also in its short forms),
// sorted: the kubelet's credential verification exempts them
// (KubeletConfig). The kubelet matches the name in the pod's spec, not
// containerd's normalized one.
func (c ImageCache) Repositories() []string {
	var out []string
	add := func(images []CachedImage) {
		for _, im := range images {
			for _, n := range im.Names {
				repo, _, _ := strings.Cut(n, "@")
				if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
					repo = repo[:i]
				}
				out = append(out, repo)
				// Docker Hub's short forms: docker.io/library/nginx is
				// also library/nginx and nginx; docker.io/u/app also u/app.
				if path, ok := strings.CutPrefix(repo, "docker.io/"); ok {
					out = append(out, path)
					if short, ok := strings.CutPrefix(path, "library/"); ok && !strings.Contains(short, "/") {
						out = append(out, short)
					}
				}
			}
		}
	}
	add(c.Root)
	if c.Disk != nil {
		add(c.Disk.Images)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
