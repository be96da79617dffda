package nodeconfig

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
