package ociimages

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// LayoutFile is one file of an OCI image layout: its path relative to the
// layout's root, and its content, inline (Data) or a blob in the cache
// (Source).
type LayoutFile struct {
	Path   string
	Data   []byte
	Source string
	Size   int64
}

// The annotations that name an image in index.json, for containerd's
// importers (the agent's agent/containerd, `ctr images import`).
const (
	annotationContainerdName = "io.containerd.image.name"
	annotationOCIRefName     = "org.opencontainers.image.ref.name"
)

// Names are the names containerd stores a cached image under, as a pull of
// its reference would: repo:tag when the reference has a tag, and
// repo@digest, so that a pod naming either finds it.
func Names(ref string) ([]string, error) {
	d, err := name.NewDigest(ref, name.StrictValidation)
	if err != nil {
		return nil, err
	}
	repo := d.Context().Name()
	if d.Context().RegistryStr() == name.DefaultRegistry {
		// go-containerregistry names Docker Hub index.docker.io;
		// containerd's CRI normalizes a pod's image to docker.io (and
		// docker.io/library/ for an official image) before it looks it
		// up, so a record under index.docker.io is never found.
		repo = "docker.io/" + d.Context().RepositoryStr()
	}
	base := ref[:strings.LastIndex(ref, "@")]
	var out []string
	if i := strings.LastIndex(base, ":"); i > strings.LastIndex(base, "/") {
		out = append(out, repo+":"+base[i+1:])
	}
	return append(out, repo+"@"+d.DigestStr()), nil
}

// Layout is the OCI image layout (image-layout 1.0.0) holding images: each
// blob once under blobs/sha256/, index.json naming each image under
// Names(ref) with its reference's digest (an index's holds only the
// platform's manifest, as containerd keeps a pulled image), files in
// path order. The content is a function of the images alone.
func Layout(images []*Image) ([]LayoutFile, error) {
	type entry struct {
		MediaType   string            `json:"mediaType"`
		Digest      string            `json:"digest"`
		Size        int64             `json:"size"`
		Annotations map[string]string `json:"annotations"`
	}
	var entries []entry
	blobs := map[string]Blob{}
	for _, im := range images {
		top := im.Manifest
		if im.Index != nil {
			top = *im.Index
		}
		names, err := Names(im.Lock.Ref)
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			entries = append(entries, entry{top.MediaType, top.Digest, top.Size, map[string]string{annotationContainerdName: n, annotationOCIRefName: n}})
		}
		for _, b := range im.Blobs() {
			blobs[b.Digest] = b
		}
	}
	sort.Slice(entries, func(i, j int) bool {
		return entries[i].Annotations[annotationContainerdName] < entries[j].Annotations[annotationContainerdName]
	})
	for i := 1; i < len(entries); i++ {
		if n := entries[i].Annotations[annotationContainerdName]; n == entries[i-1].Annotations[annotationContainerdName] {
			return nil, fmt.Errorf("two cached images are stored as %s: give each its own reference", n)
		}
	}
	index, err := json.Marshal(struct {
		SchemaVersion int     `json:"schemaVersion"`
		MediaType     string  `json:"mediaType"`
		Manifests     []entry `json:"manifests"`
	}{2, "application/vnd.oci.image.index.v1+json", entries})
	if err != nil {
		return nil, err
	}
	files := []LayoutFile{
		{Path: "index.json", Data: index, Size: int64(len(index))},
		{Path: "oci-layout", Data: []byte(`{"imageLayoutVersion":"1.0.0"}`), Size: 30},
	}
	var digests []string
	for d := range blobs {
		digests = append(digests, d)
	}
	sort.Strings(digests)
	for _, d := range digests {
		b := blobs[d]
		files = append(files, LayoutFile{Path: "blobs/sha256/" + strings.TrimPrefix(d, "sha256:"), Source: b.Path, Size: b.Size})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}
