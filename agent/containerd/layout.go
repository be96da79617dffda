package containerd

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// Layout is an OCI image layout read from a tar archive, as the importer
// puts it into containerd: the blobs the images reach, each checked
// against its digest and listed after every blob it references, with the
// labels that tell containerd's garbage collector about those references;
// and the images index.json names.
type Layout struct {
	Blobs  []Blob
	Images []Image // Name and Target; no labels
}

// Blob is one blob of the layout.
type Blob struct {
	Descriptor
	// Data is the blob's content; or, when nil, Path is the file that
	// holds it (a layout read from a directory), streamed to containerd,
	// which checks it against the digest as it commits it.
	Data []byte
	Path string
	// Labels are containerd's garbage-collection references to the blobs
	// it names (containerd.io/gc.ref.content.…): the image record holds
	// its target, the target its children, as containerd's own importer
	// labels them (core/images.ChildGCLabels).
	Labels map[string]string
}

// Media types the importer walks through.
const (
	mediaOCIIndex      = "application/vnd.oci.image.index.v1+json"
	mediaDockerList    = "application/vnd.docker.distribution.manifest.list.v2+json"
	mediaOCIManifest   = "application/vnd.oci.image.manifest.v1+json"
	mediaDockerSchema2 = "application/vnd.docker.distribution.manifest.v2+json"
)

// The annotations of index.json that name an image: containerd's, else
// the OCI one when it holds a whole reference (host/path:tag), not a tag.
const (
	annotationContainerdName = "io.containerd.image.name"
	annotationOCIRefName     = "org.opencontainers.image.ref.name"
)

// maxLayout bounds what ReadLayout keeps in memory: the sandbox image is
// about 1.5 MiB for both architectures.
const maxLayout = 64 << 20

type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ociNode is the part of an index or a manifest that references blobs.
type ociNode struct {
	Manifests []ociDescriptor `json:"manifests"`
	Config    *ociDescriptor  `json:"config"`
	Layers    []ociDescriptor `json:"layers"`
}

// inMemory is the largest blob ReadLayoutDir reads into memory (and checks
// against its digest itself): indexes, manifests and configs are far
// smaller; a larger blob is streamed to containerd from its file.
const inMemory = 4 << 20

// ReadLayoutDir reads the OCI image layout in dir (the image cache in the
// root or on the cache disk): the blobs up to inMemory are read and
// checked against their digests, the larger ones (layers) are left in
// their files for Import to stream, containerd checking each against its
// digest as it commits it. An index may lack the manifests of platforms
// other than the one cached.
func ReadLayoutDir(dir string) (*Layout, error) {
	read := func(name string) ([]byte, error) {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return data, err
	}
	version, err := read("oci-layout")
	if err != nil {
		return nil, err
	}
	index, err := read("index.json")
	if err != nil {
		return nil, err
	}
	w := &walker{blobs: map[string][]byte{}, files: map[string]blobFile{}, partial: true, done: map[string]bool{}}
	blobDir := filepath.Join(dir, "blobs", "sha256")
	entries, err := os.ReadDir(blobDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			return nil, err
		}
		p := filepath.Join(blobDir, e.Name())
		if fi.Size() > inMemory {
			w.files["sha256:"+e.Name()] = blobFile{p, fi.Size()}
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(data)
		if got := hex.EncodeToString(sum[:]); got != e.Name() {
			return nil, fmt.Errorf("blob %s of the layout has sha256 %s", p, got)
		}
		w.blobs["sha256:"+e.Name()] = data
	}
	return readIndex(index, version, w)
}

// ReadLayout reads an OCI image layout from a tar archive (what
// `drover build` ships as /usr/lib/drover/images/pause.tar, and what
// `docker save`-style tools write as OCI). Every blob is checked against
// its name; a blob the images reference that is missing, or one of
// another size than its descriptor says, is an error.
func ReadLayout(r io.Reader) (*Layout, error) {
	blobs := map[string][]byte{}
	var index, version []byte
	tr := tar.NewReader(r)
	var total int64
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading the layout archive: %w", err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		if total += h.Size; total > maxLayout {
			return nil, fmt.Errorf("the layout archive holds more than %d bytes", maxLayout)
		}
		data, err := io.ReadAll(io.LimitReader(tr, h.Size))
		if err != nil {
			return nil, fmt.Errorf("reading %s from the layout archive: %w", h.Name, err)
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		switch {
		case name == "index.json":
			index = data
		case name == "oci-layout":
			version = data
		case strings.HasPrefix(name, "blobs/sha256/"):
			hexd := strings.TrimPrefix(name, "blobs/sha256/")
			sum := sha256.Sum256(data)
			if got := hex.EncodeToString(sum[:]); got != hexd {
				return nil, fmt.Errorf("blob %s of the layout archive has sha256 %s", name, got)
			}
			blobs["sha256:"+hexd] = data
		}
	}
	return readIndex(index, version, &walker{blobs: blobs, done: map[string]bool{}})
}

// readIndex checks the layout's version and walks the images its index
// names.
func readIndex(index, version []byte, w *walker) (*Layout, error) {
	var lv struct {
		Version string `json:"imageLayoutVersion"`
	}
	if version == nil || json.Unmarshal(version, &lv) != nil || lv.Version != "1.0.0" {
		return nil, errors.New("the archive is not an OCI image layout: no oci-layout file of imageLayoutVersion 1.0.0")
	}
	if index == nil {
		return nil, errors.New("the layout archive has no index.json")
	}
	var idx ociNode
	if err := json.Unmarshal(index, &idx); err != nil {
		return nil, fmt.Errorf("index.json of the layout archive: %w", err)
	}
	l := &Layout{}
	for i, d := range idx.Manifests {
		name := d.Annotations[annotationContainerdName]
		if ref := d.Annotations[annotationOCIRefName]; name == "" && strings.Contains(ref, "/") {
			name = ref
		}
		if name == "" {
			return nil, fmt.Errorf("index.json manifests[%d] (%s) has no image name (annotation %s)", i, d.Digest, annotationContainerdName)
		}
		if err := w.walk(d, "index.json manifests["+strconv.Itoa(i)+"]"); err != nil {
			return nil, err
		}
		l.Images = append(l.Images, Image{Name: name, Target: Descriptor{MediaType: d.MediaType, Digest: d.Digest, Size: d.Size}})
	}
	if len(l.Images) == 0 {
		return nil, errors.New("the layout archive's index.json names no image")
	}
	l.Blobs = w.out
	return l, nil
}

type walker struct {
	blobs map[string][]byte
	// files are the blobs of a directory layout that are not read (layers,
	// configs): path and size; partial lets an index name manifests the
	// layout lacks (the other platforms of a cached image, as containerd
	// keeps a pulled one) as long as it holds one of them.
	files   map[string]blobFile
	partial bool
	done    map[string]bool
	out     []Blob
}

type blobFile struct {
	path string
	size int64
}

// walk adds d's blob after the blobs it references; from says where d was
// named, for errors.
func (w *walker) walk(d ociDescriptor, from string) error {
	if w.done[d.Digest] {
		return nil
	}
	data, ok := w.blobs[d.Digest]
	if f, isFile := w.files[d.Digest]; !ok && isFile {
		if f.size != d.Size {
			return fmt.Errorf("%s gives blob %s the size %d; it has %d bytes", from, d.Digest, d.Size, f.size)
		}
		w.done[d.Digest] = true
		w.out = append(w.out, Blob{Descriptor: Descriptor{MediaType: d.MediaType, Digest: d.Digest, Size: d.Size}, Path: f.path, Labels: map[string]string{}})
		return nil
	}
	switch {
	case !ok:
		return fmt.Errorf("%s names blob %s, which the layout archive does not hold", from, d.Digest)
	case int64(len(data)) != d.Size:
		return fmt.Errorf("%s gives blob %s the size %d; it has %d bytes", from, d.Digest, d.Size, len(data))
	}
	// Each child with the label prefix containerd's ChildGCLabels gives
	// it: a manifest of an index "m.", another index ".", a manifest's
	// config "config" (once), its layers "l.", numbered per prefix.
	type child struct {
		d   ociDescriptor
		key string
	}
	var children []child
	switch d.MediaType {
	case mediaOCIIndex, mediaDockerList, mediaOCIManifest, mediaDockerSchema2:
		var n ociNode
		if err := json.Unmarshal(data, &n); err != nil {
			return fmt.Errorf("blob %s (%s): %w", d.Digest, d.MediaType, err)
		}
		for _, m := range n.Manifests {
			key := "containerd.io/gc.ref.content."
			if m.MediaType == mediaOCIManifest || m.MediaType == mediaDockerSchema2 {
				key += "m."
			}
			children = append(children, child{m, key})
		}
		if n.Config != nil {
			children = append(children, child{*n.Config, "containerd.io/gc.ref.content.config"})
		}
		for _, l := range n.Layers {
			children = append(children, child{l, "containerd.io/gc.ref.content.l."})
		}
	}
	labels := map[string]string{}
	count := map[string]int{}
	present := 0
	for _, c := range children {
		if w.has(c.d.Digest) {
			present++
		}
	}
	for _, c := range children {
		if w.partial && strings.HasSuffix(c.key, ".m.") && !w.has(c.d.Digest) && present > 0 {
			continue // another platform's manifest, not cached
		}
		if err := w.walk(c.d, "blob "+d.Digest); err != nil {
			return err
		}
		key, n := c.key, count[c.key]
		count[c.key] = n + 1
		if n > 0 || strings.HasSuffix(key, ".") {
			key += strconv.Itoa(n)
		}
		labels[key] = c.d.Digest
	}
	w.done[d.Digest] = true
	w.out = append(w.out, Blob{Descriptor: Descriptor{MediaType: d.MediaType, Digest: d.Digest, Size: d.Size}, Data: data, Labels: labels})
	return nil
}

func (w *walker) has(digest string) bool {
	_, inMem := w.blobs[digest]
	_, inFile := w.files[digest]
	return inMem || inFile
}
