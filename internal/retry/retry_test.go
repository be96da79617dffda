package retry

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Wait gives, for every jitter mode, the waits of the copy it replaced
// (written out here as they were): cloud/aliyun's Backoff, image/fetch's
// backoff and agent/provider's Backoff with the Retry-After cap of its
// client.
func TestWaitAsTheCopiesItReplaced(t *testing.T) {
	aliyun := func(n int) time.Duration { return min(time.Second<<min(n, 5), 30*time.Second) }
	fetch := func(n int, after time.Duration, r float64) time.Duration {
		base, maxWait := 500*time.Millisecond, 30*time.Second
		d := base << min(n, 16)
		d += time.Duration(r * float64(d/2)) // was rand.N(d/2+1)
		d = max(d, after)
		return min(d, maxWait)
	}
	provider := func(attempt int, after time.Duration, r float64) time.Duration {
		base, cap := 200*time.Millisecond, 5*time.Second
		d := cap
		if attempt < 16 {
			d = min(base<<(max(attempt, 1)-1), cap)
		}
		wait := d/2 + time.Duration(r*float64(d/2))
		if ra := min(after, cap); ra > wait {
			wait = ra
		}
		return wait
	}
	pa := Policy{Base: time.Second, Max: 30 * time.Second}
	pf := Policy{Base: 500 * time.Millisecond, Max: 30 * time.Second, Jitter: AddHalf}
	pp := Policy{Base: 200 * time.Millisecond, Max: 5 * time.Second, Jitter: Equal}
	for n := 0; n < 40; n++ {
		for _, r := range []float64{0, 0.3, 0.999999} {
			for _, after := range []time.Duration{0, 2 * time.Second, time.Hour} {
				if got, want := pa.Wait(n, 0, r), aliyun(n); got != want {
					t.Errorf("aliyun retry %d: %s, was %s", n, got, want)
				}
				if got, want := pf.Wait(n, after, r), fetch(n, after, r); got != want {
					t.Errorf("fetch retry %d (r %v, Retry-After %s): %s, was %s", n, r, after, got, want)
				}
				if got, want := pp.Wait(n, after, r), provider(n+1, after, r); got != want {
					t.Errorf("provider attempt %d (r %v, Retry-After %s): %s, was %s", n+1, r, after, got, want)
				}
			}
		}
	}
	if got := pp.Wait(-1, 0, 0); got != 100*time.Millisecond {
		t.Errorf("Wait(-1) = %s, want the first step's", got)
	}
}

var (
	errAgain = errors.New("again")
	errNo    = errors.New("no")
	fast     = Policy{Base: time.Millisecond, Max: time.Millisecond, Retries: 3,
		Retryable: func(err error) (bool, time.Duration) { return errors.Is(err, errAgain), 0 }}
)

func TestDo(t *testing.T) {
	ctx := context.Background()
	calls := 0
	var heard []int
	err := fast.Do(ctx, func() error {
		if calls++; calls < 3 {
			return errAgain
		}
		return nil
	}, func(n int, err error, wait time.Duration) { heard = append(heard, n) })
	if err != nil || calls != 3 || len(heard) != 2 || heard[0] != 0 || heard[1] != 1 {
		t.Errorf("two failures then success: %v after %d calls, retries heard %v", err, calls, heard)
	}

	calls = 0
	err = fast.Do(ctx, func() error { calls++; return errNo }, nil)
	if err != errNo || calls != 1 {
		t.Errorf("a refused error: %v after %d calls, want it as is after 1", err, calls)
	}

	calls = 0
	err = fast.Do(ctx, func() error { calls++; return errAgain }, nil)
	var ex *Exhausted
	if !errors.As(err, &ex) || ex.Attempts != 4 || !errors.Is(err, errAgain) || calls != 4 {
		t.Errorf("always failing: %v (%+v) after %d calls, want Exhausted after 4", err, ex, calls)
	}
}

// A cancelled context ends the wait at once, and an attempt that failed
// under a cancelled context is reported as interrupted, whatever its
// error (the caller was stopped; the error is likely the stop's echo).
func TestDoInterrupted(t *testing.T) {
	slow := fast
	slow.Base, slow.Max = time.Hour, time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	start, calls := time.Now(), 0
	err := slow.Do(ctx, func() error { calls++; return errAgain }, nil)
	var in *Interrupted
	if !errors.As(err, &in) || !errors.Is(err, context.Canceled) || !errors.Is(err, errAgain) || calls != 1 {
		t.Errorf("cancelled while waiting: %v after %d calls", err, calls)
	}
	if time.Since(start) > time.Minute {
		t.Errorf("the wait was not cut short: %s", time.Since(start))
	}
	calls = 0
	err = fast.Do(ctx, func() error { calls++; return errNo }, nil)
	if !errors.As(err, &in) || !errors.Is(err, errNo) || calls != 1 {
		t.Errorf("failing under a cancelled context: %v after %d calls, want Interrupted after 1", err, calls)
	}
}

func TestParseRetryAfter(t *testing.T) {
	for h, want := range map[string]time.Duration{
		"120": 2 * time.Minute, " 3 ": 3 * time.Second, "0": 0, "-1": 0, "": 0, "1.5": 0,
		"Wed, 21 Oct 2015 07:28:00 GMT": 0, // the HTTP-date form: the caller's backoff applies
	} {
		if got := ParseRetryAfter(h); got != want {
			t.Errorf("ParseRetryAfter(%q) = %s, want %s", h, got, want)
		}
	}
}
