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
