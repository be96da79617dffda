package rollout

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func lockedWorld(t *testing.T) (*world, Desired) {
	ud := userData(t, "abcdef.0123456789abcdef", nil)
	a, b := desired(t, "m-a", "build-a", ud), desired(t, "m-b", "build-b", ud)
	w := newWorld(t, 2, a)
	w.builds["m-b"] = "build-b"
	w.env.Owner, w.env.RunID = "ci@runner-1", "run1"
	return w, b
}

func lockTags(w *world) []string {
	var ks []string
	w.cloud.mu.Lock()
	defer w.cloud.mu.Unlock()
	for k := range w.cloud.Tags {
		if strings.HasPrefix(k, LockTagPrefix) {
			ks = append(ks, k)
		}
	}
	return ks
}

func TestRunHoldsTheLockAndReleasesIt(t *testing.T) {
	w, b := lockedWorld(t)
	held := 0
	w.cluster.DrainFunc = func(context.Context, string) error {
		tags, _ := w.cloud.GroupTags(context.Background(), "asg-1")
		if ks := lockTags(w); len(ks) == 1 && ks[0] == LockTagPrefix+"run1" &&
			strings.HasPrefix(tags[ks[0]], "owner=ci@runner-1 run=run1 until=") {
			held++
		}
		return nil
	}
	if err := w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 1, Surge: 1}, false); err != nil {
		t.Fatal(err)
	}
	if held != 2 || len(lockTags(w)) != 0 {
		t.Errorf("lock held at %d of 2 drains, lock tags after: %v", held, lockTags(w))
	}
	// The surge is recorded while MaxSize is raised.
	if strings.Contains(w.messages(EventWarning), "lock") {
		t.Errorf("warnings about the lock: %s", w.messages(EventWarning))
	}
	if got := w.cloud.TagWrites(); len(got) != 4 || !strings.HasPrefix(got[0], "Tag drover:lock:run1=") ||
		got[1] != "Tag drover:surge=max=2 surge=3" || got[2] != "Untag drover:surge" || got[3] != "Untag drover:lock:run1" {
		t.Errorf("tag writes %v", got)
	}
}

func TestLockedGroupIsRefused(t *testing.T) {
	w, b := lockedWorld(t)
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	w.cloud.Tags = map[string]string{LockTagPrefix + "other": "owner=ops@laptop run=other until=" + until.Format(time.RFC3339)}
	for name, run := range map[string]func() error{
		"rollout": func() error {
			return w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 1, Surge: 1}, true)
		},
		"repair": func() error {
			return w.env.Repair(context.Background(), "asg-1", time.Minute, Options{MaxUnavailable: 1, Surge: 1})
		},
	} {
		err := run()
		var le *LockedError
		if !errors.As(err, &le) || !strings.Contains(err.Error(), "locked by ops@laptop (run other) until "+until.Format(time.RFC3339)) ||
			!strings.Contains(err.Error(), "--break-lock") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if len(w.cloud.Writes())+len(w.cloud.TagWrites())+len(w.cluster.Writes()) != 0 {
		t.Errorf("a refused run wrote %v %v %v", w.cloud.Writes(), w.cloud.TagWrites(), w.cluster.Writes())
	}
	// Two holders are named in their tags' order; a tag without run= is
	// named by its key's run ID.
	w.cloud.Tags[LockTagPrefix+"a0"] = "owner=bob@host until=" + until.Format(time.RFC3339)
	err := w.env.Repair(context.Background(), "asg-1", time.Minute, Options{MaxUnavailable: 1, Surge: 1})
	if want := "locked by bob@host (run a0) until " + until.Format(time.RFC3339) + "; ops@laptop (run other)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("two holders: %v; want %q", err, want)
	}
	delete(w.cloud.Tags, LockTagPrefix+"a0")
	// A dry run says so and writes nothing.
	w.env.DryRun = true
	if err := w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 1, Surge: 1}, false); err != nil || !strings.Contains(w.messages(EventPlan), "is locked by ops@laptop") {
		t.Errorf("dry run: %v\n%s", err, w.messages(EventPlan))
	}
}

func TestExpiredOrBrokenLockIsTakenOver(t *testing.T) {
	for _, c := range []struct {
		name  string
		until time.Time
		brk   bool
		warn  string
	}{
		{"expired", time.Now().Add(-time.Minute), false, "expired: its holder is gone; taking over"},
		{"broken", time.Now().Add(time.Hour), true, "--break-lock: removing the lock of ops@laptop (run dead)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, b := lockedWorld(t)
			w.env.BreakLock = c.brk
			w.cloud.Tags = map[string]string{LockTagPrefix + "dead": "owner=ops@laptop run=dead until=" + c.until.UTC().Format(time.RFC3339)}
			if err := w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 1, Surge: 1}, false); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(w.messages(EventWarning), c.warn) || len(lockTags(w)) != 0 {
				t.Errorf("warnings %q, lock tags left %v", w.messages(EventWarning), lockTags(w))
			}
			w.allOn(b, 2)
		})
	}
}

// racingCloud is FakeCloud where another run writes its lock right after
// this one wrote its own: both wrote before either read back.
type racingCloud struct {
	*FakeCloud
	once sync.Once
}

func (r *racingCloud) SetGroupTags(ctx context.Context, id string, tags map[string]string) error {
	if err := r.FakeCloud.SetGroupTags(ctx, id, tags); err != nil {
		return err
	}
	r.once.Do(func() {
		_ = r.FakeCloud.SetGroupTags(ctx, id, map[string]string{LockTagPrefix + "twin": "owner=ci@runner-2 run=twin until=" + time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
	})
	return nil
}

func TestSimultaneousLocksWithdraw(t *testing.T) {
	w, b := lockedWorld(t)
	w.env.Cloud = &racingCloud{FakeCloud: w.cloud}
	err := w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 1, Surge: 1}, false)
	var le *LockedError
	if !errors.As(err, &le) || !le.Race || !strings.Contains(err.Error(), "ci@runner-2 (run twin)") {
		t.Fatalf("err %v", err)
	}
	if ks := lockTags(w); len(ks) != 1 || ks[0] != LockTagPrefix+"twin" || len(w.cloud.Writes()) != 0 {
		t.Errorf("lock tags %v (want the other's only), writes %v", ks, w.cloud.Writes())
	}
}

// A run whose lock another run removed (--break-lock elsewhere) stops at
// its next renewal.
func TestLostLockStopsTheRun(t *testing.T) {
	w, b := lockedWorld(t)
	w.env.LockTTL = 300 * time.Millisecond
	w.env.DrainTimeout = 5 * time.Second
	renewed := make(chan struct{})
	var late time.Duration
	w.cluster.DrainFunc = func(ctx context.Context, _ string) error {
		// Wait for a renewal, which must come before the lock (taken
		// before this drain) expires, then break the lock.
		start := time.Now()
		for !strings.Contains(strings.Join(w.cloud.TagWrites(), "\n"), "Tag drover:lock:run1=owner=ci@runner-1 run=run1 until=") ||
			strings.Count(strings.Join(w.cloud.TagWrites(), "\n"), "Tag drover:lock:run1") < 2 {
			time.Sleep(5 * time.Millisecond)
		}
		if d := time.Since(start); d >= w.env.LockTTL {
			late = d
		}
		close(renewed)
		_ = w.cloud.RemoveGroupTags(ctx, "asg-1", []string{LockTagPrefix + "run1"})
		<-ctx.Done()
		return ctx.Err()
	}
	err := w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 1, Surge: 1}, false)
	<-renewed
	if late > 0 {
		t.Errorf("first renewal %s into the drain: the lock (TTL %s) had expired", late, w.env.LockTTL)
	}
	if err == nil || !strings.Contains(err.Error(), "this run's lock (tag drover:lock:run1) was removed") {
		t.Fatalf("err %v", err)
	}
	for _, c := range w.cloud.Writes() {
		if strings.HasPrefix(c, "Remove") {
			t.Errorf("removed an instance after losing the lock: %s", c)
		}
	}
}
