package fetch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/drover-os/drover/internal/retry"
)

// stallTimeout: no byte for this long, drop the connection and retry. A
// variable so a test can shrink it.
var stallTimeout = 60 * time.Second

const getLimit = 128 << 20 // Get is for small files; anything bigger is a mistake

// Policy is the downloads' retry policy: a broken, stalled or refused
// (5xx, 429, 408) transfer is retried 4 times, waits from 500 ms doubling
// to 30 s with up to half again at random, so several drover processes
// hitting one mirror spread out, and at least the server's Retry-After.
func Policy() retry.Policy {
	return retry.Policy{Base: 500 * time.Millisecond, Max: 30 * time.Second, Jitter: retry.AddHalf, Retries: 4,
		Retryable: func(err error) (bool, time.Duration) {
			var re *retryableError
			if errors.As(err, &re) {
				return true, re.after
			}
			return false, 0
		}}
}

// StatusError is an HTTP answer other than the one asked for.
type StatusError struct {
	URL        string
	StatusCode int
	Status     string // e.g. "404 Not Found"
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s returned %s", e.URL, e.Status)
}

// retryableError marks a failure worth another attempt: the connection
// broke, stalled, or the server said 5xx/429/408.
type retryableError struct {
	err   error
	after time.Duration // from Retry-After, when the server sent one
}

func (e *retryableError) Error() string { return e.err.Error() }
func (e *retryableError) Unwrap() error { return e.err }

func retryable(err error) error { return &retryableError{err: err} }

var errStalled = errors.New("stalled")

// rangeNotSatisfiable is a 416 answer to a resume: the offset is at or past
// the end. Total is the length the server reports, -1 when it did not say.
type rangeNotSatisfiable struct{ total int64 }

func (e *rangeNotSatisfiable) Error() string {
	return fmt.Sprintf("range not satisfiable (length %d)", e.total)
}

// withRetry runs fn under p until it succeeds, fails with an error not marked
// retryable, or has been retried p.Retries times; logf hears of each retry.
func withRetry(ctx context.Context, p retry.Policy, logf func(string, ...any), what string, fn func() error) error {
	err := p.Do(ctx, fn, func(n int, err error, wait time.Duration) {
		if logf != nil {
			logf("%s: %v; retrying in %s (attempt %d of %d)", what, err, wait.Round(time.Millisecond), n+2, p.Retries+1)
		}
	})
	var in *retry.Interrupted
	var ex *retry.Exhausted
	switch {
	case errors.As(err, &in):
		if errors.Is(in.Last, in.Cause) {
			return in.Last
		}
		return fmt.Errorf("%s: %w (after: %w)", what, in.Cause, in.Last)
	case errors.As(err, &ex) && ex.Attempts > 1:
		return fmt.Errorf("%w (gave up after %d attempts)", ex.Err, ex.Attempts)
	case errors.As(err, &ex):
		return ex.Err
	}
	return err
}

// stream is one GET response body that turns stalls and broken
// connections into retryable errors.
type stream struct {
	url    string
	start  int64 // offset of the first body byte: the Range start if honoured, else 0
	body   io.ReadCloser
	parent context.Context
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer
}

// openStream GETs rawURL, asking for bytes from offset on when offset > 0.
// A server that ignores Range answers 200 and start is 0.
func openStream(ctx context.Context, client *http.Client, rawURL string, offset int64) (*stream, error) {
	if err := checkURL(rawURL); err != nil {
		return nil, err
	}
	if client == nil {
		client = http.DefaultClient
	}
	rctx, cancel := context.WithCancelCause(ctx)
	s := &stream{url: rawURL, parent: ctx, ctx: rctx, cancel: cancel}
	s.timer = time.AfterFunc(stallTimeout, func() { cancel(errStalled) })
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, rawURL, nil)
	if err != nil {
		s.close()
		return nil, fmt.Errorf("GET %s: %w", rawURL, err)
	}
	if offset > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", offset))
	}
	resp, err := client.Do(req)
	if err != nil {
		err = s.classify(err)
		s.close()
		return nil, err
	}
	s.body = resp.Body
	switch {
	case resp.StatusCode == http.StatusOK:
		return s, nil
	case resp.StatusCode == http.StatusPartialContent && offset > 0:
		start, ok := contentRangeStart(resp.Header.Get("Content-Range"))
		if !ok || start != offset {
			s.Close()
			return nil, fmt.Errorf("GET %s: asked for bytes=%d- and got Content-Range %q", rawURL, offset, resp.Header.Get("Content-Range"))
		}
		s.start = start
		return s, nil
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable && offset > 0:
		s.Close()
		total := int64(-1)
		if _, t, ok := strings.Cut(resp.Header.Get("Content-Range"), "*/"); ok {
			if v, err := strconv.ParseInt(t, 10, 64); err == nil {
				total = v
			}
		}
		return nil, &rangeNotSatisfiable{total: total}
	}
	// Drain a little so the connection can be reused for the retry.
	io.CopyN(io.Discard, resp.Body, 4<<10)
	s.Close()
	serr := &StatusError{URL: rawURL, StatusCode: resp.StatusCode, Status: resp.Status}
	switch c := resp.StatusCode; {
	case c >= 500, c == http.StatusTooManyRequests, c == http.StatusRequestTimeout:
		return nil, &retryableError{err: serr, after: retry.ParseRetryAfter(resp.Header.Get("Retry-After"))}
	}
	return nil, serr
}

func (s *stream) Read(p []byte) (int, error) {
	n, err := s.body.Read(p)
	if n > 0 {
		s.timer.Reset(stallTimeout)
	}
	if err != nil && err != io.EOF {
		err = s.classify(err)
	}
	return n, err
}

func (s *stream) Close() error {
	err := s.body.Close()
	s.close()
	return err
}

func (s *stream) close() {
	s.timer.Stop()
	s.cancel(nil)
}

// classify says why a request failed: the caller's context (final), a stall
// or a transport error (both worth a retry).
func (s *stream) classify(err error) error {
	if s.parent.Err() != nil {
		return s.parent.Err()
	}
	if context.Cause(s.ctx) == errStalled {
		return retryable(fmt.Errorf("GET %s: no data received for %s", s.url, stallTimeout))
	}
	return retryable(fmt.Errorf("GET %s: %w", s.url, err))
}

func checkURL(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("GET %q: %w", rawURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("GET %q: only http and https URLs can be fetched", rawURL)
	}
	return nil
}

// contentRangeStart parses "bytes START-END/TOTAL".
func contentRangeStart(h string) (int64, bool) {
	rest, ok := strings.CutPrefix(h, "bytes ")
	if !ok {
		return 0, false
	}
	first, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(first, 10, 64)
	return n, err == nil
}

// Get fetches a small resource that has no known sha256 yet (an InRelease
// file, which is then checked by its signature), with the same retry policy
// as Fetch (p: Policy(), unless a test passes a faster one).
func Get(ctx context.Context, client *http.Client, p retry.Policy, rawURL string) ([]byte, error) {
	var data []byte
	err := withRetry(ctx, p, nil, "GET "+rawURL, func() error {
		s, err := openStream(ctx, client, rawURL, 0)
		if err != nil {
			return err
		}
		defer s.Close()
		var buf bytes.Buffer
		n, err := io.Copy(&buf, io.LimitReader(s, getLimit+1))
		if err != nil {
			return err
		}
		if n > getLimit {
			return fmt.Errorf("GET %s: larger than %d MiB; fetch it by sha256 instead", rawURL, getLimit>>20)
		}
		data = buf.Bytes()
		return nil
	})
	return data, err
}

// Download streams rawURL into w and returns the sha256 and length of what
// was written, for inputs whose digest is only learnt at lock time. Broken
// transfers resume where w left off (w never sees a byte twice).
func Download(ctx context.Context, client *http.Client, p retry.Policy, rawURL string, w io.Writer) (sha string, n int64, err error) {
	h := sha256.New()
	out := io.MultiWriter(w, h)
	err = withRetry(ctx, p, nil, "GET "+rawURL, func() error {
		s, err := openStream(ctx, client, rawURL, n)
		var rns *rangeNotSatisfiable
		if errors.As(err, &rns) {
			if rns.total == n {
				// Everything was received; only the end of the body broke.
				return nil
			}
			return fmt.Errorf("GET %s: the file changed during the download (now %d bytes, %d already received)", rawURL, rns.total, n)
		}
		if err != nil {
			return err
		}
		defer s.Close()
		if skip := n - s.start; skip > 0 {
			// The server ignored Range: skip what w already has.
			if _, err := io.CopyN(io.Discard, s, skip); err != nil {
				if err == io.EOF {
					return fmt.Errorf("GET %s: now shorter than the %d bytes already received; the file changed during the download", rawURL, n)
				}
				return err
			}
		}
		m, err := io.Copy(out, s)
		n += m
		return err
	})
	if err != nil {
		return "", n, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}
