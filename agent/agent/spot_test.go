package agent

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeSpot answers no notice until notice is set; err is its answer
// besides.
type fakeSpot struct {
	mu     sync.Mutex
	polls  int
	at     time.Time
	after  int // the notice comes with this poll (0: never)
	answer error
}

func (f *fakeSpot) SpotTermination(ctx context.Context) (time.Time, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.polls++
	if f.after > 0 && f.polls >= f.after {
		return f.at, true, nil
	}
	return time.Time{}, false, f.answer
}

func joinedRig(t *testing.T) (*rig, *Agent, *[]string) {
	t.Helper()
	r := newRig(t, userData(t, "hello"))
	a := r.agent()
	var off []string
	a.env.PowerOff = func(context.Context) error { off = append(off, "poweroff"); return nil }
	if err := a.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return r, a, &off
}

func TestWatchSpotActsOnTheNotice(t *testing.T) {
	r, a, off := joinedRig(t)
	at := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	src := &fakeSpot{at: at, after: 3, answer: errors.New("instance/spot/termination-time answered \"x\", not a time: taken as no notice")}
	a.WatchSpot(context.Background(), src, time.Millisecond)
	if src.polls != 3 {
		t.Errorf("%d polls, want 3 (the third brought the notice)", src.polls)
	}
	if strings.Join(r.api.cordoned, ",") != a.nodeName {
		t.Errorf("cordoned %v, want %s", r.api.cordoned, a.nodeName)
	}
	ev := strings.Join(r.api.events, "\n")
	if !strings.Contains(ev, SpotInterruption+": ECS reclaims this spot instance at 2026-12-02T08:00:00Z") {
		t.Errorf("events %q", ev)
	}
	if len(*off) != 1 {
		t.Errorf("power-off asked %d times, want once", len(*off))
	}
	log := strings.Join(r.log, "\n")
	if strings.Count(log, "spot watch: instance/spot/termination-time answered") != 1 {
		t.Errorf("an odd answer must be noted once:\n%s", log)
	}
}

// TestWatchSpotPowersOffWithoutTheAPI: an API server that refuses every
// update must not hold back the power-off, which the notice's time bounds.
func TestWatchSpotPowersOffWithoutTheAPI(t *testing.T) {
	r, a, off := joinedRig(t)
	r.api.refuse = 1000
	a.WatchSpot(context.Background(), &fakeSpot{at: time.Now().Add(time.Minute), after: 1}, time.Millisecond)
	if len(*off) != 1 {
		t.Errorf("power-off asked %d times, want once", len(*off))
	}
	if len(r.api.cordoned) != 0 || len(r.api.events) != 0 {
		t.Errorf("refused updates recorded: %v %v", r.api.cordoned, r.api.events)
	}
	if log := strings.Join(r.log, "\n"); strings.Count(log, "spot: cordoning the Node: 503") != spotTries {
		t.Errorf("want %d cordon attempts noted:\n%s", spotTries, log)
	}
}

func TestWatchSpotNoNotice(t *testing.T) {
	r, a, off := joinedRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	src := &fakeSpot{}
	a.WatchSpot(ctx, src, time.Millisecond)
	if src.polls < 2 || len(*off) != 0 || len(r.api.cordoned) != 0 {
		t.Errorf("no notice: %d polls, power-off %v, cordoned %v", src.polls, *off, r.api.cordoned)
	}
}
