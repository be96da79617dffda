// Package retry is drover's one way of trying a call again: a Policy per
// domain (the Alibaba Cloud APIs, downloads, the agent's calls to the
// metadata service and the API server) says how long to wait and how
// often; Do is the loop. A Policy is a value: tests pass a fast one
// instead of changing a package's variables.
package retry

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Jitter is how a wait is spread around its exponential step d.
type Jitter int

const (
	// None waits d: few callers, and a rhythm the service documents.
	None Jitter = iota
	// AddHalf waits d plus up to half of d again: several builds
	// hitting one mirror spread out.
	AddHalf
	// Equal waits half of d plus up to the other half ("equal
	// jitter"), d capped first: many nodes booting together spread out
	// and none retries at once.
	Equal
)

// Policy is when and how often to try again.
type Policy struct {
	// Base is the first retry's step, doubled for each further one up
	// to Max; Max also caps the wait a server asks for.
	Base, Max time.Duration
	Jitter    Jitter
	// Retries is how many times Do tries again after the first attempt.
	Retries int
	// Retryable says whether an error is worth another attempt and the
	// wait the server asked for (Retry-After, 0 when none); nil: no
	// error is.
	Retryable func(error) (ok bool, after time.Duration)
}

// Wait is the pause before retry n (0 after the first failure): the
// exponential step with the policy's jitter (r in [0,1) the random
// part), at least after, at most Max.
func (p Policy) Wait(n int, after time.Duration, r float64) time.Duration {
	d := p.Base << min(max(n, 0), 16) // past 16 doublings every policy is at its cap
	switch p.Jitter {
	case AddHalf:
		d += time.Duration(r * float64(d/2))
	case Equal:
		d = min(d, p.Max)
		d = d/2 + time.Duration(r*float64(d/2))
	}
	return min(max(d, after), p.Max)
}

// Exhausted is Do's error when the retries ran out; it unwraps to the
// last attempt's error.
type Exhausted struct {
	Err      error
	Attempts int
}

func (e *Exhausted) Error() string { return e.Err.Error() }
func (e *Exhausted) Unwrap() error { return e.Err }

// Interrupted is Do's error when ctx ended: Cause is ctx's error, Last
// the last attempt's. It unwraps to both.
type Interrupted struct {
	Cause, Last error
}

func (e *Interrupted) Error() string   { return fmt.Sprintf("%v (last error: %v)", e.Cause, e.Last) }
func (e *Interrupted) Unwrap() []error { return []error{e.Cause, e.Last} }

// Do calls fn until it succeeds, fails with an error p.Retryable refuses
// (returned as is), has been retried p.Retries times (*Exhausted) or ctx
// ends (*Interrupted, also when fn failed because it ended). onRetry, when
// not nil, hears of each failure before the wait: the retry's number
// (0 first), the error and the wait.
func (p Policy) Do(ctx context.Context, fn func() error, onRetry func(n int, err error, wait time.Duration)) error {
	for n := 0; ; n++ {
		err := fn()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return &Interrupted{Cause: ctx.Err(), Last: err}
		}
		ok, after := false, time.Duration(0)
		if p.Retryable != nil {
			ok, after = p.Retryable(err)
		}
		if !ok {
			return err
		}
		if n >= p.Retries {
			return &Exhausted{Err: err, Attempts: n + 1}
		}
		wait := p.Wait(n, after, rand.Float64())
		if onRetry != nil {
			onRetry(n, err, wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return &Interrupted{Cause: ctx.Err(), Last: err}
		case <-t.C:
		}
	}
}

// ParseRetryAfter reads an HTTP Retry-After header given in seconds (RFC
// 9110 10.2.3, delay-seconds); 0 for anything else, the HTTP-date form
// included: the caller's own backoff applies then.
func ParseRetryAfter(h string) time.Duration {
	secs, err := strconv.Atoi(strings.TrimSpace(h))
	if err != nil || secs <= 0 {
		return 0
	}
	return time.Duration(secs) * time.Second
}
