package sources

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/drover-os/drover/image/fetch"
	"github.com/drover-os/drover/image/lock"
	"github.com/drover-os/drover/image/ociimages"
	"github.com/drover-os/drover/image/recipe"
)

// Fetched maps every locked download to its verified file in the cache.
type Fetched struct {
	Debs  map[string]string // package name -> path
	URLs  map[string]string // component name -> path
	Bytes int64
	// Keyrings are the trust roots the suites' signatures were checked
	// against, one per suite in lock order.
	Keyrings []*TrustRoot
	// Images are the cached images the lock pins, every blob verified in
	// the cache.
	Images []*ociimages.Image
}

// Fetch downloads (or re-verifies in the cache) every .deb and URL file the
// lock pins. Go components are built by the image build, which caches them.
// It first refuses a lock whose suites were not signed by a key of the trust
// root (CheckSigners), then one with a deb line the signed Packages index of
// its suite does not list exactly (VerifyDebs): the .deb hashes are only as
// good as that signature, and the lock's word is not the archive's.
func Fetch(ctx context.Context, r *recipe.Recipe, l *lock.Lock, o Options) (*Fetched, error) {
	roots, err := checkSigners(r, l, o)
	if err != nil {
		return nil, err
	}
	if err := VerifyDebs(ctx, r, l, roots, o); err != nil {
		return nil, err
	}
	items := make([]fetch.Item, 0, len(l.Debs)+len(l.URLs))
	for _, d := range l.Debs {
		root, err := debArchive(l, d, o)
		if err != nil {
			return nil, err
		}
		items = append(items, fetch.Item{Name: d.FileName(), URL: strings.TrimSuffix(root, "/") + "/" + d.Path, SHA256: d.SHA256, Size: d.Size})
	}
	for _, u := range l.URLs {
		items = append(items, fetch.Item{Name: u.Name, URL: u.URL, SHA256: u.SHA256, Size: u.Size})
	}
	paths, err := o.fetcher().Fetch(ctx, items)
	if err != nil {
		return nil, err
	}
	f := &Fetched{Debs: map[string]string{}, URLs: map[string]string{}, Keyrings: roots}
	for _, d := range l.Debs {
		f.Debs[d.Name] = paths[d.SHA256]
		f.Bytes += d.Size
	}
	for _, u := range l.URLs {
		f.URLs[u.Name] = paths[u.SHA256]
		f.Bytes += u.Size
	}
	if f.Images, err = ociimages.Fetch(ctx, l, o.images()); err != nil {
		return nil, err
	}
	for _, im := range l.Images {
		f.Bytes += im.Size
	}
	return f, nil
}

// debArchive is the root of the archive d's path is relative to: its
// suite's, which must be one the lock pins (a deb line naming another suite
// was not resolved from a signed index of this lock).
func debArchive(l *lock.Lock, d lock.Deb, o Options) (string, error) {
	if !slices.ContainsFunc(l.Suites, func(s lock.Suite) bool { return s.Name == d.Suite }) {
		return "", fmt.Errorf("lock line %d: package %s %s names suite %q, which the lock does not pin: run `drover lock`", d.Line, d.Name, d.Version, d.Suite)
	}
	return o.Archive(d.Suite)
}
