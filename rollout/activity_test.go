package rollout

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// A scale-out whose scaling activity fails (the zone is out of stock)
// stops the rollout at once with ESS's reason, not a timeout; the group
// goes back to the old version, the desired capacity the scale-out raised
// and the MaxSize the surge raised come back, and no old instance is
// touched.
func TestFailedScaleOutSwitchesBack(t *testing.T) {
	ud := userData(t, "abcdef.0123456789abcdef", nil)
	a, b := desired(t, "m-a", "build-a", ud), desired(t, "m-b", "build-b", ud)
	w := newWorld(t, 2, a)
	w.builds["m-b"] = "build-b"
	w.env.ReadyTimeout = time.Minute
	w.cloud.ScaleOutResult = func(int) Activity {
		return Activity{StatusCode: ActivityFailed, Cause: "A user requested an adjustment",
			StatusMessage: "Fail to create ECS instance in zone cn-test-a: Code=OperationDenied.NoStock, Message=The requested resource is sold out in the specified zone",
			ErrorCode:     "OperationDenied.NoStock", ErrorMessage: "The requested resource is sold out in the specified zone"}
	}
	start := time.Now()
	err := w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 1, Surge: 1}, false)
	var ae *ActivityError
	if !errors.As(err, &ae) || ae.Activity.ErrorCode != "OperationDenied.NoStock" || !strings.Contains(err.Error(), "sold out") {
		t.Fatalf("err %v, want the failed activity with ESS's reason", err)
	}
	if time.Since(start) > w.env.ReadyTimeout/2 {
		t.Errorf("took %s: waited instead of reading the activity", time.Since(start))
	}
	want := []string{"CreateTemplateVersion from 1 m-b", "SetTemplateVersion 2", "SetMaxSize 3", "ScaleOut 1",
		"SetTemplateVersion 1", "SetDesiredCapacity 2", "SetMaxSize 2"}
	if got := w.cloud.Writes(); !slices.Equal(got, want) {
		t.Errorf("writes\n%v\nwant\n%v", got, want)
	}
	if g := w.cloud.G; g.TemplateVersion != "1" || g.DesiredCapacity != 2 || g.MaxSize != 2 {
		t.Errorf("group %+v, want version 1, desired 2, MaxSize 2", g)
	}
	if _, ok := w.cloud.Tags[SurgeTag]; ok || len(w.cloud.Tags) != 0 {
		t.Errorf("tags left: %v", w.cloud.Tags)
	}
	if f := w.messages(EventFailed); !strings.Contains(f, "OperationDenied.NoStock") || !strings.Contains(f, "cause: A user requested") {
		t.Errorf("failed event %q does not carry ESS's reason", f)
	}
	if c := w.cluster.Writes(); len(c) != 0 {
		t.Errorf("cluster writes %v: no old Node may be touched", c)
	}
	w.allOn(a, 2)
}

// A scale-out activity still InProgress does not stop the rollout:
// the new instance is waited for as usual.
func TestScaleOutActivityInProgressIsWaitedFor(t *testing.T) {
	ud := userData(t, "abcdef.0123456789abcdef", nil)
	a, b := desired(t, "m-a", "build-a", ud), desired(t, "m-b", "build-b", ud)
	w := newWorld(t, 1, a)
	w.builds["m-b"] = "build-b"
	w.cloud.ScaleOutResult = func(int) Activity { return Activity{StatusCode: ActivityInProgress} }
	if err := w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 1, Surge: 1}, false); err != nil {
		t.Fatal(err)
	}
	w.allOn(b, 1)
}

// A scale-in lifecycle hook holds each removed old instance in
// Removing:Wait for a while: the rollout says so once per instance, goes
// on when ESS lets the instance go, and ends only once the last one left
// the group.
func TestRemovingWaitIsReported(t *testing.T) {
	ud := userData(t, "abcdef.0123456789abcdef", nil)
	a, b := desired(t, "m-a", "build-a", ud), desired(t, "m-b", "build-b", ud)
	w := newWorld(t, 2, a)
	w.builds["m-b"] = "build-b"
	w.cloud.RemoveWait = 3
	if err := w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 1, Surge: 1}, false); err != nil {
		t.Fatal(err)
	}
	for _, in := range w.cloud.Insts { // as listed, without another Instances call
		if in.State == RemovingWait {
			t.Errorf("the rollout ended with %s still %s in the group", in.ID, in.State)
		}
	}
	w.allOn(b, 2)
	got := w.messages(EventWaiting)
	if n := strings.Count(got, "instance Removing:Wait: a scale-in lifecycle hook holds it"); n != 2 {
		t.Errorf("%d Removing:Wait events, want one per old instance:\n%s", n, got)
	}
}

// The failed event carries each of ESS's fields of the activity that it
// answered, one line each, and no line for a field ESS left empty.
func TestActivityFailedReport(t *testing.T) {
	for _, c := range []struct {
		name string
		a    Activity
		want string
	}{
		{"every field", Activity{ID: "asa-1", StatusCode: ActivityFailed, Description: "Add \"1\" ECS instance(s)", StatusMessage: "Fail to create ECS instance",
			ErrorCode: "OperationDenied.NoStock", ErrorMessage: "sold out", Cause: "A user requested an adjustment"},
			"scaling activity asa-1 Failed: Add \"1\" ECS instance(s)\nstatus message: Fail to create ECS instance\nerror: OperationDenied.NoStock sold out\ncause: A user requested an adjustment"},
		{"only the status", Activity{ID: "asa-2", StatusCode: ActivityRejected, Description: "Adjust by 1"},
			"scaling activity asa-2 Rejected: Adjust by 1"},
		{"an error code without a message", Activity{ID: "asa-3", StatusCode: ActivityWarning, Description: "Add \"2\" ECS instance(s)", ErrorCode: "QuotaExceed.ElasticQuota"},
			"scaling activity asa-3 Warning: Add \"2\" ECS instance(s)\nerror: QuotaExceed.ElasticQuota "},
		{"an error message without a code", Activity{ID: "asa-4", StatusCode: ActivityFailed, Description: "d", StatusMessage: "s", ErrorMessage: "The specified image is not found"},
			"scaling activity asa-4 Failed: d\nstatus message: s\nerror:  The specified image is not found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var evs []Event
			e := &Env{Event: func(ev Event) { evs = append(evs, ev) }}
			err := e.activityFailed("asg-1", c.a)
			var ae *ActivityError
			if !errors.As(err, &ae) || ae.Group != "asg-1" || ae.Activity != c.a {
				t.Errorf("err %#v, want the ActivityError of asg-1 with the activity", err)
			}
			if len(evs) != 1 || evs[0].Kind != EventFailed || evs[0].Group != "asg-1" || evs[0].Message != c.want {
				var got []string
				for _, ev := range evs {
					got = append(got, ev.Kind+" "+ev.Group+": "+ev.Message)
				}
				t.Errorf("events:\n%s\nwant one failed event of asg-1:\n%s", strings.Join(got, "\n"), c.want)
			}
		})
	}
}

// retryingCloud plays ESS retrying a failed scale-out while undoScaleOut
// puts the desired capacity down: each Instances call lists the group's
// two InService instances and Pending retries, one fewer each call (each
// retry fails and its instance goes). Its SetDesiredCapacity records the
// value and launches nothing; cancel, when set, runs after it.
type retryingCloud struct {
	*FakeCloud
	pending int
	sets    []int
	cancel  func()
}

func (c *retryingCloud) Instances(context.Context, string) ([]Instance, error) {
	ins := []Instance{inst("i-1", "1"), inst("i-2", "1")}
	for i := range c.pending {
		ins = append(ins, Instance{ID: "i-retry" + formatInt(int64(i)), State: Pending, TemplateID: "lt-1", TemplateVersion: "2"})
	}
	c.pending = max(c.pending-1, 0)
	return ins, nil
}

func (c *retryingCloud) SetDesiredCapacity(_ context.Context, _ string, n int) error {
	c.sets = append(c.sets, n)
	if len(c.sets) > 2*undoScaleOutTries {
		return errors.New("SetDesiredCapacity called too often")
	}
	c.G.DesiredCapacity = n
	if c.cancel != nil {
		c.cancel()
	}
	return nil
}

// undoScaleOut lowers the desired capacity to what the group holds,
// Pending retries included, at once and then once a poll for as long as a
// retry fails, up to undoScaleOutTries rounds; never below MinSize.
func TestUndoScaleOutRounds(t *testing.T) {
	for _, c := range []struct {
		name           string
		desired, min   int
		pending        int
		want           []int
		wantDesired    int
		poll           time.Duration
		cancelAfterSet bool
		wantWarn       string
	}{
		// Two retries under way, then one, then none: three rounds, the
		// last ending at the two instances the group holds.
		{name: "retries fail one by one", desired: 5, pending: 2, want: []int{4, 3, 2}, wantDesired: 2, poll: time.Millisecond},
		// Retries failing longer than the rounds last: the desired
		// capacity stays where the third round left it.
		{name: "bounded", desired: 6, pending: 3, want: []int{5, 4, 3}, wantDesired: 3, poll: time.Millisecond},
		{name: "not below MinSize", desired: 5, min: 3, pending: 1, want: []int{3}, wantDesired: 3, poll: time.Millisecond},
		{name: "nothing raised", desired: 2, pending: 0, want: nil, wantDesired: 2, poll: time.Millisecond},
		// The first round does not wait a poll; the second does, and a
		// run whose time to put the group back is up stops there.
		{name: "first round at once", desired: 3, pending: 0, want: []int{2}, wantDesired: 2, poll: time.Hour, cancelAfterSet: true,
			wantWarn: "lowering the desired capacity the failed scale-out raised: context canceled"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			cl := &retryingCloud{FakeCloud: &FakeCloud{G: Group{ID: "asg-1", MinSize: c.min, MaxSize: 10, DesiredCapacity: c.desired}}, pending: c.pending}
			if c.cancelAfterSet {
				cl.cancel = cancel
			}
			var warns []string
			e := &Env{Cloud: cl, Poll: c.poll, Event: func(ev Event) {
				if ev.Kind == EventWarning {
					warns = append(warns, ev.Message)
				}
			}}
			e.undoScaleOut(ctx, "asg-1")
			if !slices.Equal(cl.sets, c.want) || cl.G.DesiredCapacity != c.wantDesired {
				t.Errorf("SetDesiredCapacity %v, desired capacity %d; want %v, %d", cl.sets, cl.G.DesiredCapacity, c.want, c.wantDesired)
			}
			if strings.Join(warns, "\n") != c.wantWarn {
				t.Errorf("warnings %q, want %q", warns, c.wantWarn)
			}
		})
	}
}
