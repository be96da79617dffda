// Package ociimages fetches the workload images a recipe caches (its
// images: list) from the registries the build host is told to use, into
// drover's content-addressed cache, each blob verified against its digest;
// and lays them out as an OCI image layout for the node (layout.go), in the
// root file system or on the cache disk image.
//
// A reference names the registry the node would pull from
// (host/repo:tag@sha256:…). The build host may be told to fetch a host's
// images from elsewhere, a mirror or a local registry: Mirrors, from
// `--registry-mirror HOST=URL` or DROVER_REGISTRY_MIRRORS; drover names no
// registry itself. Everything is fetched by digest, so where it came from
// does not change what ships.
package ociimages

import (
	"context"
	"encoding/json"

	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/drover-os/drover/image/cache"
	"github.com/drover-os/drover/image/lock"
	"github.com/drover-os/drover/image/recipe"
)

// Mirrors maps a registry host, as references name it, to the base URL the
// build host fetches its images from (http://127.0.0.1:5000,
// https://mirror.example).
type Mirrors map[string]string

// ParseMirrors reads HOST=URL entries (flags, or the comma-separated
// DROVER_REGISTRY_MIRRORS).
func ParseMirrors(entries []string) (Mirrors, error) {
	m := Mirrors{}
	for _, e := range entries {
		for _, one := range strings.Split(e, ",") {
			if one = strings.TrimSpace(one); one == "" {
				continue
			}
			host, raw, ok := strings.Cut(one, "=")
			u, err := url.Parse(raw)
			if !ok || host == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
				return nil, fmt.Errorf("registry mirror %q: want HOST=URL, the registry host as references name it and the base URL of its mirror (http[s]://host[:port])", one)
			}
			m[host] = u.Scheme + "://" + u.Host
		}
	}
	return m, nil
}

// Options say where and how images are fetched.
type Options struct {
	Cache   *cache.Cache
	Mirrors Mirrors
	// Transport is the HTTP transport (nil: go-containerregistry's
	// default, which speaks the registries' token auth).
	Transport http.RoundTripper
	Log       io.Writer
}

func (o Options) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format+"\n", args...)
	}
}

// source is the repository the content of ref is fetched from: the ref's
// own, or its host's mirror.
func (o Options) source(ref string) (name.Repository, error) {
	d, err := name.NewDigest(ref, name.StrictValidation)
	if err != nil {
		return name.Repository{}, err
	}
	repo := d.Context()
	base, ok := o.Mirrors[repo.RegistryStr()]
	if !ok {
		return repo, nil
	}
	u, _ := url.Parse(base)
	var opts []name.Option
	if u.Scheme == "http" {
		opts = append(opts, name.Insecure)
	}
	return name.NewRepository(u.Host+"/"+repo.RepositoryStr(), opts...)
}

func (o Options) remote(ctx context.Context) []remote.Option {
	opts := []remote.Option{remote.WithContext(ctx)}
	if o.Transport != nil {
		opts = append(opts, remote.WithTransport(o.Transport))
	}
	return opts
}

// Blob is one blob of a cached image, in the cache.
type Blob struct {
	Digest, MediaType string
	Size              int64
	Path              string // in the cache
}

// Image is a cached image's blobs: Index (nil for a single manifest), its
// Manifest, Config and Layers, each verified in the cache.
type Image struct {
	Lock     lock.Image
	Index    *Blob
	Manifest Blob
	Config   Blob
	Layers   []Blob
}

// Blobs are the image's blobs, each after the blobs it references.
func (im *Image) Blobs() []Blob {
	out := append([]Blob{im.Config}, im.Layers...)
	out = append(out, im.Manifest)
	if im.Index != nil {
		out = append(out, *im.Index)
	}
	return out
}

// Lock resolves every image of the recipe: its manifest for the recipe's
// platform, fetched with all its blobs into the cache (a missing or
// mismatched blob fails the lock, as a URL component's does).
func Lock(ctx context.Context, r *recipe.Recipe, o Options) ([]lock.Image, error) {
	var out []lock.Image
	for _, ci := range r.Images {
		im, err := o.fetch(ctx, lock.Image{Ref: ci.Ref, Platform: r.ImagePlatform(ci)})
		if err != nil {
			return nil, fmt.Errorf("%s:%d: images: %s: %w", ci.From, ci.Line, ci.Ref, err)
		}
		out = append(out, im.Lock)
	}
	return out, nil
}

// Fetch makes every image the lock pins present and verified in the cache:
// the lock's manifest digest must be what the reference's digest resolves
// to for its platform.
func Fetch(ctx context.Context, l *lock.Lock, o Options) ([]*Image, error) {
	var out []*Image
	for _, li := range l.Images {
		im, err := o.fetch(ctx, li)
		if err != nil {
			return nil, fmt.Errorf("image %s (lock): %w", li.Ref, err)
		}
		if li.Manifest != "" && (im.Lock.Manifest != li.Manifest || im.Lock.Size != li.Size) {
			return nil, fmt.Errorf("image %s: the lock pins manifest %s (%d bytes) for %s, the reference's digest gives %s (%d bytes): the lock is damaged, run `drover lock --refresh`",
				li.Ref, li.Manifest, li.Size, li.Platform, im.Lock.Manifest, im.Lock.Size)
		}
		out = append(out, im)
	}
	return out, nil
}

// fetch gets li.Ref's digest and, for an index, li.Platform's manifest,
// then the manifest's config and layers, from the cache or the registry.
func (o Options) fetch(ctx context.Context, li lock.Image) (*Image, error) {
	src, err := o.source(li.Ref)
	if err != nil {
		return nil, err
	}
	d, _ := name.NewDigest(li.Ref, name.StrictValidation)
	top, err := o.blob(ctx, src, d.DigestStr(), "", true)
	if err != nil {
		return nil, err
	}
	im := &Image{Lock: lock.Image{Ref: li.Ref, Platform: li.Platform}}
	data, err := os.ReadFile(top.Path)
	if err != nil {
		return nil, err
	}
	mt := mediaType(data)
	top.MediaType = mt
	switch types.MediaType(mt) {
	case types.OCIImageIndex, types.DockerManifestList:
		im.Index = &top
		idx, err := v1.ParseIndexManifest(strings.NewReader(string(data)))
		if err != nil {
			return nil, fmt.Errorf("index %s: %w", top.Digest, err)
		}
		want, err := v1.ParsePlatform(li.Platform)
		if err != nil {
			return nil, fmt.Errorf("platform %q: %w", li.Platform, err)
		}
		var found *v1.Descriptor
		var offered []string
		for i, m := range idx.Manifests {
			if m.Platform == nil {
				continue
			}
			offered = append(offered, m.Platform.String())
			if found == nil && m.Platform.Satisfies(*want) {
				found = &idx.Manifests[i]
			}
		}
		if found == nil {
			sort.Strings(offered)
			return nil, fmt.Errorf("index %s has no manifest for %s (it has %s): set the image's platform", top.Digest, li.Platform, strings.Join(offered, ", "))
		}
		man, err := o.blob(ctx, src, found.Digest.String(), string(found.MediaType), true)
		if err != nil {
			return nil, err
		}
		if man.Size != found.Size {
			return nil, fmt.Errorf("manifest %s has %d bytes, its index says %d", man.Digest, man.Size, found.Size)
		}
		im.Manifest = man
	case types.OCIManifestSchema1, types.DockerManifestSchema2:
		im.Manifest = top
	default:
		return nil, fmt.Errorf("%s is a %q, not an image index or manifest drover can cache", top.Digest, mt)
	}
	data, err = os.ReadFile(im.Manifest.Path)
	if err != nil {
		return nil, err
	}
	m, err := v1.ParseManifest(strings.NewReader(string(data)))
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", im.Manifest.Digest, err)
	}
	im.Manifest.MediaType = string(m.MediaType)
	if im.Manifest.MediaType == "" {
		im.Manifest.MediaType = mediaType(data)
	}
	if im.Config, err = o.sized(ctx, src, m.Config); err != nil {
		return nil, err
	}
	size := im.Manifest.Size + im.Config.Size
	for _, l := range m.Layers {
		b, err := o.sized(ctx, src, l)
		if err != nil {
			return nil, err
		}
		im.Layers = append(im.Layers, b)
		size += b.Size
	}
	im.Lock.Manifest, im.Lock.Size = im.Manifest.Digest, size
	return im, nil
}

func (o Options) sized(ctx context.Context, src name.Repository, d v1.Descriptor) (Blob, error) {
	b, err := o.blob(ctx, src, d.Digest.String(), string(d.MediaType), false)
	if err == nil && b.Size != d.Size {
		err = fmt.Errorf("blob %s has %d bytes, its manifest says %d", b.Digest, b.Size, d.Size)
	}
	return b, err
}

// blob makes the blob digest present in the cache: there already (each
// read re-hashed), else fetched from src, its manifest endpoint for a
// manifest or index, its blob endpoint otherwise, and verified while it is
// written.
func (o Options) blob(ctx context.Context, src name.Repository, digest, mt string, manifest bool) (Blob, error) {
	hexd, ok := strings.CutPrefix(digest, "sha256:")
	if !ok || cache.ValidSHA256(hexd) != nil {
		return Blob{}, fmt.Errorf("digest %q: drover caches sha256 content only", digest)
	}
	b := Blob{Digest: digest, MediaType: mt, Path: o.Cache.Path(hexd)}
	if ok, _, err := o.Cache.Check(hexd); err == nil && ok {
		fi, err := os.Stat(b.Path)
		if err != nil {
			return Blob{}, err
		}
		b.Size = fi.Size()
		return b, nil
	}
	ref := src.Digest(digest)
	var r io.ReadCloser
	if manifest {
		desc, err := remote.Get(ref, o.remote(ctx)...)
		if err != nil {
			return Blob{}, fmt.Errorf("fetching %s: %w", ref, err)
		}
		r = io.NopCloser(strings.NewReader(string(desc.Manifest)))
	} else {
		l, err := remote.Layer(ref, o.remote(ctx)...)
		if err != nil {
			return Blob{}, fmt.Errorf("fetching %s: %w", ref, err)
		}
		if r, err = l.Compressed(); err != nil {
			return Blob{}, fmt.Errorf("fetching %s: %w", ref, err)
		}
	}
	defer r.Close()
	p, err := o.Cache.Put(hexd, r)
	if err != nil {
		return Blob{}, fmt.Errorf("fetching %s: %w", ref, err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		return Blob{}, err
	}
	o.logf("images: fetched %s (%d bytes) from %s", digest, fi.Size(), src)
	b.Size = fi.Size()
	return b, nil
}

// mediaType is a manifest's or index's own mediaType field.
func mediaType(data []byte) string {
	var v struct {
		MediaType string `json:"mediaType"`
	}
	if json.Unmarshal(data, &v) != nil {
		return ""
	}
	return v.MediaType
}
