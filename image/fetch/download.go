package fetch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
)

const copyBuf = 1 << 20

// fetchItem makes one item present under its lock. Another process may have
// fetched it while we waited, so the cache is checked again first.
func (f *Fetcher) fetchItem(ctx context.Context, it Item, rep *reporter) (string, error) {
	unlock, err := f.Cache.LockContext(ctx, "sha256:"+it.SHA256)
	if err != nil {
		return "", fmt.Errorf("fetching %s: %w", it.Name, err)
	}
	defer unlock()
	ok, actual, err := f.Cache.Check(it.SHA256)
	if err != nil {
		return "", fmt.Errorf("fetching %s: %w", it.Name, err)
	}
	if ok {
		rep.skip(it)
		return f.Cache.Path(it.SHA256), nil
	}
	if actual != "" {
		rep.logf("cache: %s is corrupt (want sha256 %s, got %s); fetching it again", it.Name, it.SHA256, actual)
		if err := f.Cache.Remove(it.SHA256); err != nil {
			return "", fmt.Errorf("fetching %s: %w", it.Name, err)
		}
	}
	d := &download{f: f, it: it, rep: rep, partial: f.Cache.PartialPath(it.SHA256)}
	err = withRetry(ctx, f.policy(), rep.logf, "fetching "+it.Name, func() error { return d.attempt(ctx) })
	if err != nil {
		// Keep a partial worth resuming, not an empty file from a refused request.
		if fi, serr := os.Stat(d.partial); serr == nil && fi.Size() == 0 {
			os.Remove(d.partial)
		}
		return "", d.explain(err)
	}
	path, err := f.Cache.Commit(it.SHA256, d.partial)
	if err != nil {
		return "", fmt.Errorf("fetching %s: %w", it.Name, err)
	}
	rep.done(it, d.have)
	return path, nil
}

// download is one item's transfer into its partial file, across attempts.
type download struct {
	f       *Fetcher
	it      Item
	rep     *reporter
	partial string
	have    int64 // bytes in the partial file after the last attempt
}

// explain turns the final error into one that names the item and, for a
// missing file, says what to do.
func (d *download) explain(err error) error {
	var se *StatusError
	if errors.As(err, &se) && se.StatusCode == http.StatusNotFound {
		return fmt.Errorf("fetching %s: %w; the lock may be stale (run drover lock)", d.it.Name, err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var m *mismatchError
	if errors.As(err, &m) {
		return err
	}
	return fmt.Errorf("fetching %s: %w", d.it.Name, err)
}

// mismatchError already names the item, so explain does not wrap it again.
type mismatchError struct{ msg string }

func (e *mismatchError) Error() string { return e.msg }

// attempt continues the partial file from where it ends (or starts it) and
// leaves it complete and verified, or returns why not. A broken transfer
// keeps the partial so the next attempt, or the next run, resumes it.
func (d *download) attempt(ctx context.Context) error {
	it := d.it
	file, err := os.OpenFile(d.partial, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer file.Close()
	h := sha256.New()
	buf := make([]byte, copyBuf)
	// Hash what an earlier attempt left; this also leaves the offset at its end.
	have, err := io.CopyBuffer(h, struct{ io.Reader }{file}, buf)
	if err != nil {
		return err
	}
	restart := func() error {
		d.rep.progress(it, -have)
		have = 0
		h.Reset()
		if err := file.Truncate(0); err != nil {
			return err
		}
		_, err := file.Seek(0, io.SeekStart)
		return err
	}
	if it.Size > 0 && have >= it.Size {
		if have == it.Size && hex.EncodeToString(h.Sum(nil)) == it.SHA256 {
			d.have = have // finished before an earlier run could commit it
			return nil
		}
		if err := restart(); err != nil {
			return err
		}
	}
	resumed := have > 0
	if resumed {
		d.rep.logf("fetching %s: resuming at byte %d", it.Name, have)
	}
	s, err := openStream(ctx, d.f.HTTP, it.URL, have)
	var rns *rangeNotSatisfiable
	if errors.As(err, &rns) {
		// Our partial is at or past the server's end: start over.
		if err := restart(); err != nil {
			return err
		}
		resumed = false
		s, err = openStream(ctx, d.f.HTTP, it.URL, 0)
	}
	if err != nil {
		return err
	}
	defer s.Close()
	if s.start != have {
		d.rep.logf("fetching %s: the server ignored the range request; downloading from the start", it.Name)
		if err := restart(); err != nil {
			return err
		}
		resumed = false
	}

	src := io.Reader(s)
	if it.Size > 0 {
		src = io.LimitReader(s, it.Size-have+1) // one byte more reveals an oversized file
	}
	n, err := copyCounting(file, h, src, buf, func(n int) { d.rep.progress(it, int64(n)) })
	have += n
	d.have = have
	if err != nil {
		return err
	}
	if it.Size > 0 && have > it.Size {
		os.Remove(d.partial)
		return &mismatchError{fmt.Sprintf("fetching %s from %s: the server sent more than the %d bytes the lock records; the lock may be stale (run drover lock)", it.Name, it.URL, it.Size)}
	}
	if it.Size > 0 && have < it.Size {
		// The body ended cleanly but early (no Content-Length): resume.
		return retryable(fmt.Errorf("GET %s: body ended after %d of %d bytes", it.URL, have, it.Size))
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != it.SHA256 {
		// Never leave bad bytes to resume from.
		os.Remove(d.partial)
		d.rep.progress(it, -have)
		d.have = 0
		err := &mismatchError{fmt.Sprintf("fetching %s from %s: sha256 mismatch: want %s, got %s; the file changed upstream or the lock is stale (run drover lock)", it.Name, it.URL, it.SHA256, got)}
		if resumed {
			// The old partial may have come from different content; one
			// clean download decides.
			return retryable(err)
		}
		return err
	}
	return nil
}

// copyCounting copies src to file and h, reporting progress per chunk.
// Write errors are returned as they are (not retryable: a full disk does
// not heal by waiting); read errors come classified from the stream.
func copyCounting(file *os.File, h hash.Hash, src io.Reader, buf []byte, progress func(int)) (int64, error) {
	var n int64
	for {
		m, rerr := src.Read(buf)
		if m > 0 {
			if _, err := file.Write(buf[:m]); err != nil {
				return n, fmt.Errorf("writing %s: %w", file.Name(), err)
			}
			h.Write(buf[:m])
			n += int64(m)
			progress(m)
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}
