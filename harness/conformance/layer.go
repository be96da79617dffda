package conformance

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/drover-os/drover/image/oci"
)

// entry is one file of a test image's single layer.
type entry struct {
	path string // relative, no leading slash
	mode int64
	data []byte // regular file
	link string // symlink target; a directory when both are empty and dir is set
	dir  bool
}

// layerTar writes entries in path order, owned by root and stamped with
// oci.Epoch, so a layer's digest is a function of its content only.
func layerTar(entries []entry) ([]byte, error) {
	sorted := append([]entry(nil), entries...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].path < sorted[j].path })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	seen := map[string]bool{}
	for _, e := range sorted {
		if seen[e.path] || e.path == "" || strings.HasPrefix(e.path, "/") {
			return nil, fmt.Errorf("test image layer: entry %q is empty, absolute or twice", e.path)
		}
		seen[e.path] = true
		hdr := &tar.Header{Name: e.path, Mode: e.mode, ModTime: oci.Epoch, Uname: "root", Gname: "root"}
		switch {
		case e.dir:
			hdr.Typeflag, hdr.Name = tar.TypeDir, e.path+"/"
		case e.link != "":
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, e.link
		default:
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("test image layer: %s: %w", e.path, err)
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.data); err != nil {
				return nil, fmt.Errorf("test image layer: %s: %w", e.path, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// imageOf is a one-layer linux/goarch OCI image of entries with the given
// entrypoint, command and user (the upstream image's, so the tests that
// rely on them behave as upstream).
func imageOf(name, goarch string, entries []entry, entrypoint, cmd []string, user string) (v1.Image, error) {
	data, err := layerTar(entries)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	created := v1.Time{Time: oci.Epoch}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: goarch, OS: "linux", Created: created, RootFS: v1.RootFS{Type: "layers"},
		Config: v1.Config{Entrypoint: entrypoint, Cmd: cmd, WorkingDir: "/", User: user,
			Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}},
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer,
		History: v1.History{Created: created, CreatedBy: "drover conformance: " + name}})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return img, nil
}

// indexOf wraps one image into an OCI index with its platform, the form
// the harness registry serves.
func indexOf(img v1.Image, goarch string) v1.ImageIndex {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	return mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img,
		Descriptor: v1.Descriptor{MediaType: types.OCIManifestSchema1, Platform: &v1.Platform{OS: "linux", Architecture: goarch}}})
}
