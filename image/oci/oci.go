// Package oci makes the OCI images drover builds itself from static Go
// programs: the node's pod sandbox ("pause") image, which drover build ships
// in the image for containerd to import at boot, and the smoke test's
// harness images (harness/registry). Every timestamp is a fixed epoch and
// every archive entry is written in a fixed order, so an image's digest is a
// function of its binaries alone.
//
// The image formats are go-containerregistry's; this package only chooses
// the layout (one file, one layer, one manifest per architecture) and packs
// an OCI image layout into a tar, the archive the agent imports into
// containerd (agent/containerd), as `ctr images import` would read it.
package oci

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Arches are the architectures of every program index, in index order: a
// node of either architecture drover builds resolves the same reference
// and digest to its own manifest.
var Arches = []string{"amd64", "arm64"}

// Epoch stamps every file and creation time.
var Epoch = time.Unix(0, 0).UTC()

// Layers says how a program image stores its one layer.
type Layers int

const (
	// GzipLayers are application/vnd.oci.image.layer.v1.tar+gzip, what
	// registries serve (the harness's images).
	GzipLayers Layers = iota
	// PlainLayers are application/vnd.oci.image.layer.v1.tar: for an
	// image shipped inside the root file system (the sandbox image),
	// whose compression then compresses the binaries themselves, better
	// than gzip did (ecs-node: 1.5 MiB of gzip layers stored as they are,
	// against 3.2 MiB of binaries zstd-compressed to about 1 MiB).
	PlainLayers
)

// ProgramImage wraps a static binary into a single-layer linux/<goarch>
// OCI image: the binary at /<name> (mode 0755, owned by root) is the
// entrypoint.
func ProgramImage(name string, binary []byte, goarch string, ls Layers) (v1.Image, error) {
	layerTar, err := singleFileTar(name, binary)
	if err != nil {
		return nil, err
	}
	var layer v1.Layer
	if ls == PlainLayers {
		layer = static.NewLayer(layerTar, types.OCIUncompressedLayer)
	} else if layer, err = tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer)); err != nil {
		return nil, fmt.Errorf("creating the image layer for %s: %w", name, err)
	}
	created := v1.Time{Time: Epoch}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: goarch,
		OS:           "linux",
		Created:      created,
		RootFS:       v1.RootFS{Type: "layers"},
		Config: v1.Config{
			Entrypoint: []string{"/" + name},
			WorkingDir: "/",
		},
	})
	if err != nil {
		return nil, fmt.Errorf("setting the image config for %s: %w", name, err)
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: created, CreatedBy: "drover: static Go program " + name},
	})
	if err != nil {
		return nil, fmt.Errorf("adding the layer to the image for %s: %w", name, err)
	}
	return img, nil
}

func singleFileTar(name string, data []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     name,
		Mode:     0o755,
		Size:     int64(len(data)),
		ModTime:  Epoch,
		Uname:    "root",
		Gname:    "root",
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, fmt.Errorf("writing the layer entry for /%s: %w", name, err)
	}
	if _, err := tw.Write(data); err != nil {
		return nil, fmt.Errorf("writing the layer content of /%s: %w", name, err)
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("closing the layer of /%s: %w", name, err)
	}
	return buf.Bytes(), nil
}

// ProgramIndex is the multi-architecture OCI image index of one program:
// one ProgramImage per architecture of Arches (bins: goarch → binary), in
// that order, each with its platform, as registry.k8s.io publishes pause. A
// node's containerd picks the manifest of its own architecture.
func ProgramIndex(name string, bins map[string][]byte, ls Layers) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, goarch := range Arches {
		bin, ok := bins[goarch]
		if !ok {
			return nil, fmt.Errorf("image index for %s: no linux/%s binary", name, goarch)
		}
		img, err := ProgramImage(name, bin, goarch, ls)
		if err != nil {
			return nil, err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{MediaType: types.OCIManifestSchema1, Platform: &v1.Platform{OS: "linux", Architecture: goarch}},
		})
	}
	return idx, nil
}

// ImageNameAnnotation names an image in an OCI layout's index.json for
// containerd's importers (agent/containerd, `ctr images import`): the
// image is stored under it.
const ImageNameAnnotation = "io.containerd.image.name"

// LayoutTar is an OCI image layout holding idx under the tagged reference
// ref (repo:tag), as a tar. index.json lists idx twice: as ref, and as
// repo@digest, each name in ImageNameAnnotation and in
// org.opencontainers.image.ref.name. containerd's importer stores one
// image per entry, as a pull stores the tag and the digest, so the CRI
// reports the image with its repo digest (the Node's status.images) as it
// would a pulled one. go-containerregistry writes the layout into a
// temporary directory under tmp; the tar's entries are in name order,
// owned by root, stamped Epoch.
func LayoutTar(idx v1.ImageIndex, ref, tmp string) ([]byte, error) {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return nil, fmt.Errorf("OCI layout of %q: want a tagged reference (repo:tag): %w", ref, err)
	}
	d, err := idx.Digest()
	if err != nil {
		return nil, fmt.Errorf("digest of %s: %w", ref, err)
	}
	dir, err := os.MkdirTemp(tmp, "oci-layout-")
	if err != nil {
		return nil, fmt.Errorf("creating a directory for the OCI layout of %s: %w", ref, err)
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, mutate.IndexMediaType(empty.Index, types.OCIImageIndex))
	if err != nil {
		return nil, fmt.Errorf("writing the OCI layout of %s: %w", ref, err)
	}
	for _, n := range []string{ref, tag.Context().Name() + "@" + d.String()} {
		if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
			ImageNameAnnotation:                 n,
			"org.opencontainers.image.ref.name": n,
		})); err != nil {
			return nil, fmt.Errorf("writing %s into its OCI layout: %w", n, err)
		}
	}
	return tarDir(dir)
}

func tarDir(dir string) ([]byte, error) {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		paths = append(paths, p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return nil, err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: Epoch, Mode: 0o644, Typeflag: tar.TypeReg, Size: fi.Size()}
		if fi.IsDir() {
			hdr.Name, hdr.Mode, hdr.Typeflag, hdr.Size = hdr.Name+"/", 0o755, tar.TypeDir, 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if fi.IsDir() {
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
