// Package fetch downloads pinned inputs (Debian packages, release files)
// into the content-addressed cache: in parallel, resumable, retried, and
// verified against the sha256 from the lock before anything trusts them.
//
// Several drover processes may fetch into one cache at once: a per-sha
// lock makes sure each file is downloaded by one of them while the others
// wait and then find it in the cache.
package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sync"

	"github.com/drover-os/drover/image/cache"
	"github.com/drover-os/drover/internal/retry"
)

// Item is one file to fetch.
type Item struct {
	Name   string // for humans, e.g. containerd_1.7.24~ds1-6_amd64.deb
	URL    string
	SHA256 string // lowercase hex, from the lock
	Size   int64  // from the lock; 0 when unknown
}

// Fetcher downloads Items into Cache. The zero values of Parallel and
// Retry mean the defaults.
type Fetcher struct {
	Cache    *cache.Cache
	HTTP     *http.Client // nil: http.DefaultClient
	Parallel int          // concurrent downloads; 0 means 4
	Retry    retry.Policy // when to retry a download; zero: Policy()
	Log      io.Writer    // nil: silent
	// Progress shows a progress bar on Log when Log is a terminal;
	// otherwise (or when false) Fetch writes one line per finished download.
	Progress bool
}

func (f *Fetcher) parallel() int {
	if f.Parallel > 0 {
		return f.Parallel
	}
	return 4
}

func (f *Fetcher) policy() retry.Policy {
	if f.Retry.Base == 0 {
		return Policy()
	}
	return f.Retry
}

// FetchOne fetches a single file and returns its path in the cache (the
// image/debian.Store interface).
func (f *Fetcher) FetchOne(ctx context.Context, name, url, sha256 string, size int64) (string, error) {
	paths, err := f.Fetch(ctx, []Item{{Name: name, URL: url, SHA256: sha256, Size: size}})
	if err != nil {
		return "", err
	}
	return paths[sha256], nil
}

// Fetch makes every item present and verified in the cache and returns
// sha256 -> path for those that are. Entries already cached are re-hashed
// (in parallel, without touching the network); corrupt ones are reported,
// removed and downloaded again. Failures do not stop the other items: the
// error joins all of them. Cancelling ctx stops the remaining work.
func (f *Fetcher) Fetch(ctx context.Context, items []Item) (map[string]string, error) {
	if f.Cache == nil {
		return nil, errors.New("fetch: no cache configured")
	}
	var errs []error
	var todo []Item
	seen := make(map[string]bool)
	for _, it := range items {
		if it.Name == "" {
			it.Name = it.URL
		}
		if err := validate(it); err != nil {
			errs = append(errs, err)
			continue
		}
		if !seen[it.SHA256] { // one download serves every item with this content
			seen[it.SHA256] = true
			todo = append(todo, it)
		}
	}

	paths := make([]string, len(todo))
	// Warm path: verify what the cache holds, using every CPU, no locks. A
	// blob at its final path only changes by an atomic rename of verified
	// content, so reading it unlocked is safe.
	hashers := max(2, runtime.GOMAXPROCS(0))
	each(ctx, hashers, len(todo), func(i int) {
		if ok, _, err := f.Cache.Check(todo[i].SHA256); ok && err == nil {
			paths[i] = f.Cache.Path(todo[i].SHA256)
		}
	})
	var missing []int
	var total int64
	for i, p := range paths {
		if p == "" {
			missing = append(missing, i)
			if total >= 0 && todo[i].Size > 0 {
				total += todo[i].Size
			} else {
				total = -1
			}
		}
	}

	itemErrs := make([]error, len(todo))
	if len(missing) > 0 && ctx.Err() == nil {
		rep := newReporter(f.Log, f.Progress && isTerminal(f.Log), len(missing), total)
		each(ctx, f.parallel(), len(missing), func(j int) {
			i := missing[j]
			paths[i], itemErrs[i] = f.fetchItem(ctx, todo[i], rep)
		})
		rep.finish()
	}

	out := make(map[string]string, len(todo))
	for i, it := range todo {
		if paths[i] != "" {
			out[it.SHA256] = paths[i]
		}
		// One "cancelled" error for the whole call, not one per item.
		if err := itemErrs[i]; err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			errs = append(errs, err)
		}
	}
	if err := ctx.Err(); err != nil {
		errs = append(errs, fmt.Errorf("fetch: %d of %d files fetched: %w", len(out), len(todo), err))
	}
	return out, errors.Join(errs...)
}

func validate(it Item) error {
	if err := cache.ValidSHA256(it.SHA256); err != nil {
		return fmt.Errorf("fetching %s: %w; check the lock file (or regenerate it with drover lock)", it.Name, err)
	}
	if err := checkURL(it.URL); err != nil {
		return fmt.Errorf("fetching %s: %w", it.Name, err)
	}
	if it.Size < 0 {
		return fmt.Errorf("fetching %s: negative size %d in the lock", it.Name, it.Size)
	}
	return nil
}

// each runs fn(0..n-1) on up to workers goroutines, starting no new call
// once ctx is done.
func each(ctx context.Context, workers, n int, fn func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
}
