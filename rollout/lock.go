package rollout

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// A rollout or a repair holds a lock on its scaling group while it writes:
// a tag on the group (ESS TagResources, ResourceType scalinggroup) with the
// key LockTagPrefix+<run ID> and the value "owner=<user@host> run=<run ID>
// until=<RFC 3339 UTC>". The holder renews it (a later until) while it
// runs and removes it at the end; a tag whose until has passed belongs to a
// dead holder and is ignored (and deleted by the next holder).
//
// ESS tags have no compare-and-swap, so each contender writes a key of its
// own and then reads the group's tags back: it holds the lock only if its
// tag is there and no other live one is. Of two that start together at
// least one sees the other and withdraws (both may, and both then refuse;
// a re-run settles it). That holds as long as a read sees every write that
// finished before it, which ListTagResources does not document.
const LockTagPrefix = "drover:lock:"

// DefaultLockTTL is how long a lock lasts without renewal: a holder killed
// with no chance to remove its tag blocks the group at most this long
// (--break-lock removes it sooner). The holder renews at a third of it, so
// clocks may differ by up to a third before a live holder looks dead.
const DefaultLockTTL = 10 * time.Minute

// Lock is a holder of a group's lock, as its tag names it.
type Lock struct {
	Key   string
	Owner string
	RunID string
	Until time.Time
}

func (l Lock) value() string {
	return "owner=" + l.Owner + " run=" + l.RunID + " until=" + l.Until.UTC().Format(time.RFC3339)
}

func (l Lock) String() string {
	return fmt.Sprintf("%s (run %s) until %s", l.Owner, l.RunID, l.Until.UTC().Format(time.RFC3339))
}

// parseLock reads a lock tag; ok is false for a tag that is not one.
func parseLock(key, value string) (l Lock, ok bool) {
	if !strings.HasPrefix(key, LockTagPrefix) {
		return Lock{}, false
	}
	l.Key = key
	for _, f := range strings.Fields(value) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "owner":
			l.Owner = v
		case "run":
			l.RunID = v
		case "until":
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return l, true // a lock whose end cannot be read never expires
			}
			l.Until = t
		}
	}
	if l.RunID == "" {
		l.RunID = strings.TrimPrefix(key, LockTagPrefix)
	}
	return l, true
}

// locks are the lock tags among a group's tags, by key.
func locks(tags map[string]string) []Lock {
	var out []Lock
	for k, v := range tags {
		if l, ok := parseLock(k, v); ok {
			out = append(out, l)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

func (l Lock) live(now time.Time) bool { return l.Until.IsZero() || now.Before(l.Until) }

// LockedError refuses to act on a group another drover holds.
type LockedError struct {
	Group   string
	Holders []Lock
	// Race: the holders started at the same time as this run.
	Race bool
}

func (e *LockedError) Error() string {
	var hs []string
	for _, h := range e.Holders {
		hs = append(hs, h.String())
	}
	if e.Race {
		return fmt.Sprintf("scaling group %s: another drover locked it at the same time (%s): run again", e.Group, strings.Join(hs, "; "))
	}
	return fmt.Sprintf("scaling group %s is locked by %s (tag %s…): another drover rollout or repair is acting on it; wait for it, or, if that run is dead (killed, its runner gone), run again with --break-lock",
		e.Group, strings.Join(hs, "; "), LockTagPrefix)
}

// NewRunID is a random run ID for a lock.
func NewRunID() string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// held is the lock a run holds; stop ends its renewal and removes it.
type held struct {
	stop func()
}

// checkLock refuses when a live lock of another run is on the group's
// tags (read, not written: a dry run and a run with nothing to do check
// this way).
func (e *Env) checkLock(groupID string, tags map[string]string) error {
	var live []Lock
	for _, l := range locks(tags) {
		if l.live(e.now()) && l.RunID != e.runID() {
			live = append(live, l)
		}
	}
	if len(live) == 0 || e.BreakLock {
		return nil
	}
	return &LockedError{Group: groupID, Holders: live}
}

func (e *Env) runID() string {
	if e.RunID == "" {
		e.RunID = NewRunID()
	}
	return e.RunID
}

func (e *Env) lockTTL() time.Duration {
	if e.LockTTL > 0 {
		return e.LockTTL
	}
	return DefaultLockTTL
}

// lock takes the group's lock and renews it until the returned held's
// stop; ctx is cancelled (with the reason as its cause) when the lock is
// lost: broken by --break-lock elsewhere, or not renewable until it
// expired.
func (e *Env) lock(ctx context.Context, groupID string, cancel context.CancelCauseFunc) (*held, error) {
	tags, err := e.Cloud.GroupTags(ctx, groupID)
	if err != nil {
		return nil, err
	}
	if err := e.checkLock(groupID, tags); err != nil {
		return nil, err
	}
	now := e.now()
	var stale []string
	for _, l := range locks(tags) {
		switch {
		case l.RunID == e.runID():
		case !l.live(now):
			stale = append(stale, l.Key)
			e.emit(Event{Kind: EventWarning, Group: groupID, Message: "lock of " + l.String() + " expired: its holder is gone; taking over"})
		case e.BreakLock:
			stale = append(stale, l.Key)
			e.emit(Event{Kind: EventWarning, Group: groupID, Message: "--break-lock: removing the lock of " + l.String()})
		}
	}
	if len(stale) > 0 {
		if err := e.Cloud.RemoveGroupTags(ctx, groupID, stale); err != nil {
			return nil, fmt.Errorf("removing the stale lock of scaling group %s: %w", groupID, err)
		}
	}
	mine := Lock{Key: LockTagPrefix + e.runID(), Owner: e.Owner, RunID: e.runID(), Until: now.Add(e.lockTTL())}
	if mine.Owner == "" {
		mine.Owner = "unknown"
	}
	if err := e.Cloud.SetGroupTags(ctx, groupID, map[string]string{mine.Key: mine.value()}); err != nil {
		return nil, fmt.Errorf("locking scaling group %s (tag %s): %w", groupID, mine.Key, err)
	}
	release := func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := e.Cloud.RemoveGroupTags(rctx, groupID, []string{mine.Key}); err != nil {
			e.emit(Event{Kind: EventWarning, Group: groupID, Message: fmt.Sprintf("removing the lock tag %s: %v: it expires at %s, or remove it by hand (UntagResources)", mine.Key, err, mine.Until.UTC().Format(time.RFC3339))})
		}
	}
	// Read back: another run that wrote its tag before this read is seen
	// here, and one that writes after it sees this run's tag.
	if tags, err = e.Cloud.GroupTags(ctx, groupID); err != nil {
		release()
		return nil, err
	}
	var others []Lock
	ok := false
	for _, l := range locks(tags) {
		switch {
		case l.Key == mine.Key:
			ok = true
		case l.live(e.now()):
			others = append(others, l)
		}
	}
	if !ok || len(others) > 0 {
		release()
		return nil, &LockedError{Group: groupID, Holders: others, Race: true}
	}
	e.emit(Event{Kind: EventGroup, Group: groupID, Message: "locked: tag " + mine.Key + "=" + mine.value()})
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		e.renew(ctx, groupID, &mine, done, cancel)
	}()
	stopped := false
	return &held{stop: func() {
		if stopped {
			return
		}
		stopped = true
		close(done)
		<-finished
		release()
	}}, nil
}

// renew extends the lock every third of its TTL until done; it cancels
// the run when the lock is gone (another run broke it) or could not be
// renewed before it expired.
func (e *Env) renew(ctx context.Context, groupID string, l *Lock, done <-chan struct{}, cancel context.CancelCauseFunc) {
	every := e.lockTTL() / 3
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
		tags, err := e.Cloud.GroupTags(ctx, groupID)
		if err == nil {
			if _, ok := tags[l.Key]; !ok {
				cancel(fmt.Errorf("scaling group %s: this run's lock (tag %s) was removed, by --break-lock elsewhere?: stopped so that two runs do not act on the group", groupID, l.Key))
				return
			}
			next := *l
			next.Until = e.now().Add(e.lockTTL())
			if err = e.Cloud.SetGroupTags(ctx, groupID, map[string]string{l.Key: next.value()}); err == nil {
				*l = next
				continue
			}
		}
		if e.now().After(l.Until.Add(-every)) {
			cancel(fmt.Errorf("scaling group %s: renewing this run's lock: %w: stopped before the lock expires and another run may take the group", groupID, err))
			return
		}
		e.emit(Event{Kind: EventWarning, Group: groupID, Message: "renewing the lock: " + err.Error() + "; trying again"})
	}
}

// underLock runs fn holding the group's lock, renewed meanwhile; fn's
// context ends when the lock is lost, and the error then says so.
func (e *Env) underLock(ctx context.Context, groupID string, fn func(context.Context) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	h, err := e.lock(ctx, groupID, cancel)
	if err != nil {
		return err
	}
	defer h.stop()
	err = fn(ctx)
	if cause := context.Cause(ctx); err != nil && cause != nil && !errors.Is(cause, context.Canceled) {
		err = cause // the lock was lost
	}
	return err
}
