package build

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/package-url/packageurl-go"

	"github.com/drover-os/drover/agent/nodeconfig"
	"github.com/drover-os/drover/image/erofsz"
	"github.com/drover-os/drover/image/ociimages"
	"github.com/drover-os/drover/image/recipe"
	"github.com/drover-os/drover/image/rootfs"
	"github.com/drover-os/drover/image/tree"
	"github.com/drover-os/drover/internal/bytesize"
)

// CachedImages is the manifest's record of the recipe's cached images.
type CachedImages struct {
	// Images are every cached image, root and disk, in recipe order.
	Images []CachedImage `json:"images"`
	// Root is the OCI layout in the root file system (ImageCacheDir),
	// "" when no image ships there; Disk the cache disk image.
	Root string     `json:"root,omitempty"`
	Disk *CacheDisk `json:"disk,omitempty"`
}

// CachedImage is one cached image: the recipe's reference and platform,
// the manifest the lock pins, where it ships, its bytes and layers.
type CachedImage struct {
	Ref      string   `json:"ref"`
	Platform string   `json:"platform"`
	Digest   string   `json:"digest"`   // the reference's: an index's or the manifest's
	Manifest string   `json:"manifest"` // the platform's manifest
	Location string   `json:"location"`
	Size     int64    `json:"size"`
	Layers   []string `json:"layers"`
}

// CacheDisk is the cache disk image written beside the node image: an
// uncompressed erofs file system (the layers are compressed already)
// labelled nodeconfig.ImageCacheLabel, holding an OCI image layout.
type CacheDisk struct {
	File   string `json:"file"` // <name>.images.raw, beside the image
	Label  string `json:"label"`
	UUID   string `json:"uuid"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	Index  string `json:"index"` // sha256 of the layout's index.json
}

// ImageFilesOwner owns the files of the root's image cache in the tree (and
// so the manifest's files): drover diff counts their changes under the
// changed images.
const ImageFilesOwner = "cached images"

// DiskImageFile is the cache disk image's file name for an image name.
func DiskImageFile(name string) string { return name + ".images.raw" }

// cachedImages lays the recipe's cached images out: those of location
// root as an OCI image layout in the root file system, those of location
// disk as the cache disk image, and nodeconfig.ImageCacheFile saying what
// each holds for the agent. The blobs come from the fetch stage, verified
// in the cache.
func (b *builder) cachedImages() error {
	r := b.p.Recipe
	if len(r.Images) == 0 {
		return nil
	}
	byRef := map[string]*ociimages.Image{}
	for _, im := range b.fetched.Images {
		byRef[im.Lock.Ref] = im
	}
	var root, disk []*ociimages.Image
	var desc nodeconfig.ImageCache
	rec := &CachedImages{}
	for _, ci := range r.Images {
		im := byRef[ci.Ref]
		if im == nil {
			return fmt.Errorf("%s:%d: images: %s is not in the lock %s: run `drover lock %s`", ci.From, ci.Line, ci.Ref, r.LockPath(), r.Path)
		}
		names, err := ociimages.Names(ci.Ref)
		if err != nil {
			return err
		}
		_, _, digest := ci.Parsed()
		c := CachedImage{Ref: ci.Ref, Platform: im.Lock.Platform, Digest: digest, Manifest: im.Lock.Manifest, Location: ci.Location, Size: im.Lock.Size}
		for _, l := range im.Layers {
			c.Layers = append(c.Layers, l.Digest)
		}
		rec.Images = append(rec.Images, c)
		n := nodeconfig.CachedImage{Names: names, Digest: digest, Platform: c.Platform, Manifest: c.Manifest, Size: c.Size}
		if ci.Location == recipe.LocationDisk {
			disk = append(disk, im)
			if desc.Disk == nil {
				desc.Disk = &nodeconfig.CacheDisk{Label: nodeconfig.ImageCacheLabel}
			}
			desc.Disk.Images = append(desc.Disk.Images, n)
		} else {
			root = append(root, im)
			desc.Root = append(desc.Root, n)
		}
	}
	if len(root) > 0 {
		files, err := ociimages.Layout(root)
		if err != nil {
			return err
		}
		var bytes int64
		for _, f := range files {
			data, err := layoutData(f)
			if err != nil {
				return err
			}
			bytes += int64(len(data))
			if err := b.tree.Set(&tree.Node{Path: path.Join(nodeconfig.ImageCacheDir, f.Path), Kind: tree.Regular, Mode: 0o644, Data: data, Owner: ImageFilesOwner}); err != nil {
				return err
			}
		}
		rec.Root = nodeconfig.ImageCacheDir
		b.logf("build: %d cached images in the root at %s (%s)", len(root), nodeconfig.ImageCacheDir, bytesize.Format(bytes))
	}
	if len(disk) > 0 {
		d, err := b.cacheDisk(disk)
		if err != nil {
			return err
		}
		rec.Disk = d
		desc.Disk.UUID, desc.Disk.Index = d.UUID, d.Index
	}
	data, err := json.MarshalIndent(desc, "", "  ")
	if err != nil {
		return err
	}
	if err := b.tree.Set(&tree.Node{Path: nodeconfig.ImageCacheFile, Kind: tree.Regular, Mode: 0o644, Data: append(data, '\n'), Owner: ImageFilesOwner}); err != nil {
		return err
	}
	b.man.CachedImages = rec
	return nil
}

func layoutData(f ociimages.LayoutFile) ([]byte, error) {
	if f.Source == "" {
		return f.Data, nil
	}
	data, err := os.ReadFile(f.Source)
	if err == nil && int64(len(data)) != f.Size {
		err = fmt.Errorf("%s has %d bytes, want %d", f.Source, len(data), f.Size)
	}
	return data, err
}

// cacheDisk writes the cache disk image into the build's directory: the
// layout of images at the root of an uncompressed erofs file system, every
// timestamp the lock's epoch, its UUID derived from the layout's
// index.json, so that the same images give the same bytes.
func (b *builder) cacheDisk(images []*ociimages.Image) (*CacheDisk, error) {
	files, err := ociimages.Layout(images)
	if err != nil {
		return nil, err
	}
	t := tree.New()
	// The node skeleton (/usr and the merged-/usr links) is no part of a
	// data disk.
	for _, p := range t.Paths() {
		if p != "/" {
			t.Remove(p)
		}
	}
	var index string
	for _, f := range files {
		data, err := layoutData(f)
		if err != nil {
			return nil, err
		}
		if f.Path == "index.json" {
			sum := sha256.Sum256(data)
			index = hex.EncodeToString(sum[:])
		}
		if err := t.Set(&tree.Node{Path: "/" + f.Path, Kind: tree.Regular, Mode: 0o444, Data: data, Owner: "drover"}); err != nil {
			return nil, err
		}
	}
	file := DiskImageFile(b.p.Recipe.Name)
	out, err := os.Create(filepath.Join(b.tmp, file))
	if err != nil {
		return nil, err
	}
	defer out.Close()
	start := time.Now()
	uuid := derive16("image-cache-uuid", index)
	st, err := rootfs.Write(out, t, b.epoch, rootfs.Options{UUID: uuid, Label: nodeconfig.ImageCacheLabel, Compression: erofsz.None})
	if err != nil {
		return nil, fmt.Errorf("writing the cache disk image %s: %w", file, err)
	}
	if err := out.Close(); err != nil {
		return nil, err
	}
	sum, size, err := FileSHA256(out.Name())
	if err != nil {
		return nil, err
	}
	b.logf("build: cache disk image %s: %d images, erofs %s labelled %s (%s)", file, len(images), bytesize.Format(st.Size), nodeconfig.ImageCacheLabel, time.Since(start).Round(time.Millisecond))
	return &CacheDisk{File: file, Label: nodeconfig.ImageCacheLabel, UUID: formatUUID(uuid), Size: size, SHA256: sum, Index: index}, nil
}

func formatUUID(u [16]byte) string {
	h := hex.EncodeToString(u[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// ociPURL is a cached image's package URL (purl-spec's oci type): the
// repository's last path segment as name, the digest as version, the whole
// repository, tag and architecture as qualifiers.
func ociPURL(c CachedImage) string {
	repo, tag, digest := recipe.CachedImage{Ref: c.Ref}.Parsed()
	name := strings.ToLower(repo[strings.LastIndex(repo, "/")+1:])
	q := map[string]string{"repository_url": repo, "tag": tag}
	if _, a, ok := strings.Cut(c.Platform, "/"); ok {
		q["arch"] = a
	}
	maps.DeleteFunc(q, func(_, v string) bool { return v == "" })
	return packageurl.NewPackageURL(packageurl.TypeOCI, "", name, digest, packageurl.QualifiersFromMap(q), "").ToString()
}
