package rollout

import (
	"context"
	"fmt"
	"strings"
)

// ActivityError stops a rollout: ESS did not carry out a scale-out the
// rollout asked for. Its scaling activity (DescribeScalingActivities of
// the ID ScaleWithAdjustment answered) ended Failed (no instance launched:
// a zone out of stock, a quota used up, an image or instance type ECS
// refuses), Warning (some launched, some not) or Rejected (ESS refused to
// start it). ESS's own words are in Activity.
type ActivityError struct {
	Group    string
	Activity Activity
}

func (e *ActivityError) Error() string {
	return fmt.Sprintf("scaling group %s: ESS did not launch the new instance(s): scaling activity %s; no old instance was removed. "+
		"Remove the cause ESS names (for %s: another instance type or zone in the launch template or the group's vSwitches; for %s: a quota increase in Quota Center) and run drover rollout again",
		e.Group, e.Activity, "OperationDenied.NoStock", "QuotaExceed.ElasticQuota")
}

// activityFailed reports a's failure as a failed event and returns the
// error that stops the rollout (run puts the group back).
func (e *Env) activityFailed(groupID string, a Activity) error {
	var b strings.Builder
	fmt.Fprintf(&b, "scaling activity %s %s: %s\n", a.ID, a.StatusCode, a.Description)
	if a.StatusMessage != "" {
		fmt.Fprintf(&b, "status message: %s\n", a.StatusMessage)
	}
	if a.ErrorCode != "" || a.ErrorMessage != "" {
		fmt.Fprintf(&b, "error: %s %s\n", a.ErrorCode, a.ErrorMessage)
	}
	if a.Cause != "" {
		fmt.Fprintf(&b, "cause: %s\n", a.Cause)
	}
	e.emit(Event{Kind: EventFailed, Group: groupID, Message: strings.TrimSuffix(b.String(), "\n")})
	return &ActivityError{Group: groupID, Activity: a}
}

// undoScaleOutTries bounds undoScaleOut's rounds.
const undoScaleOutTries = 3

// undoScaleOut lowers the desired capacity a failed scale-out left raised
// to the number of instances the group holds: a desired-capacity group
// whose instances are missing keeps launching (and, while the cause lasts,
// failing), and MaxSize cannot go back below it. It never asks for fewer
// instances than the group holds, Pending ones included: ESS would remove
// instances to get there, by its removal policy and without a drain. So a
// retry ESS has under way when the group is read keeps its place; if it
// fails, the next round (a poll later) lowers the desired capacity again.
func (e *Env) undoScaleOut(ctx context.Context, groupID string) {
	warn := func(err error) {
		e.emit(Event{Kind: EventWarning, Group: groupID, Message: "lowering the desired capacity the failed scale-out raised: " + err.Error()})
	}
	for try := 0; try < undoScaleOutTries; try++ {
		if try > 0 {
			if err := e.sleep(ctx); err != nil {
				warn(err)
				return
			}
		}
		g, err := e.Cloud.Group(ctx, groupID)
		if err != nil {
			warn(err)
			return
		}
		ins, err := e.Cloud.Instances(ctx, groupID)
		if err != nil {
			warn(err)
			return
		}
		n := 0
		for _, in := range ins {
			if !in.leaving() {
				n++
			}
		}
		n = max(n, g.MinSize)
		if g.DesiredCapacity <= n {
			return
		}
		if err := e.Cloud.SetDesiredCapacity(ctx, groupID, n); err != nil {
			warn(err)
			return
		}
		e.emit(Event{Kind: EventGroup, Group: groupID, Message: fmt.Sprintf("desired capacity %d again (was %d): ESS stops launching what the failed scale-out asked for", n, g.DesiredCapacity)})
	}
}
