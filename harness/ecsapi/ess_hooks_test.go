package ecsapi

import (
	"strings"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/requests"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ess"
)

func lifecycleActions(t *testing.T, e *env, activity string) []ess.LifecycleAction {
	t.Helper()
	r := ess.CreateDescribeLifecycleActionsRequest()
	r.ScalingActivityId = activity
	resp, err := e.ess.DescribeLifecycleActions(r)
	if err != nil {
		t.Fatal(err)
	}
	return resp.LifecycleActions.LifecycleAction
}

func completeAction(e *env, hook, token, result string) error {
	r := ess.CreateCompleteLifecycleActionRequest()
	r.LifecycleHookId, r.LifecycleActionToken, r.LifecycleActionResult = hook, token, result
	_, err := e.ess.CompleteLifecycleAction(r)
	return err
}

func createHook(e *env, group, transition, result string, timeout int) (string, error) {
	r := ess.CreateCreateLifecycleHookRequest()
	r.ScalingGroupId, r.LifecycleHookName, r.LifecycleTransition = group, strings.ToLower(transition), transition
	r.DefaultResult, r.HeartbeatTimeout = result, requests.NewInteger(timeout)
	resp, err := e.ess.CreateLifecycleHook(r)
	if err != nil {
		return "", err
	}
	return resp.LifecycleHookId, nil
}

// A scale-in hook holds a removed instance in Removing:Wait until its
// action is completed; a scale-out hook holds a launched one in
// Pending:Wait: completed with CONTINUE it is InService, timed out with
// the hook's DefaultResult ABANDON it is released and the activity fails.
func TestLifecycleHooks(t *testing.T) {
	l := &fakeLauncher{}
	e, group, _, _ := groupEnv(t, l, 2)
	e.srv.mu.Lock()
	e.srv.cfg.HookSecond = 10 * time.Millisecond // the 30 s minimum lasts 300 ms
	e.srv.mu.Unlock()
	eventually(t, "two InService instances", func() bool { return len(scalingInstances(t, e, group, InService)) == 2 })
	waitIdle(t, e, group)

	_, err := createHook(e, group, ScaleIn, Continue, 29)
	wantCode(t, err, "InvalidParameter")
	_, err = createHook(e, group, "SCALE_SIDEWAYS", Continue, 30)
	wantCode(t, err, "InvalidParameter")
	in, err := createHook(e, group, ScaleIn, Continue, 21600)
	if err != nil {
		t.Fatal(err)
	}
	victim := scalingInstances(t, e, group, InService)[0].InstanceId
	ri := ess.CreateRemoveInstancesRequest()
	ri.ScalingGroupId, ri.InstanceId = group, &[]string{victim}
	rm, err := e.ess.RemoveInstances(ri)
	if err != nil {
		t.Fatal(err)
	}
	if st := states(t, e, group)[victim]; st != RemovingWait {
		t.Fatalf("removed instance %s is %q, want %s while the scale-in hook holds it", victim, st, RemovingWait)
	}
	acts := lifecycleActions(t, e, rm.ScalingActivityId)
	if len(acts) != 1 || acts[0].LifecycleHookId != in || acts[0].LifecycleActionStatus != "Pending" ||
		strings.Join(acts[0].InstanceIds.InstanceId, ",") != victim || acts[0].LifecycleActionToken == "" {
		t.Fatalf("lifecycle actions of the removal: %+v", acts)
	}
	wantCode(t, completeAction(e, in, "not-a-token", Continue), "InvalidLifecycleActionToken.NotFound")
	if err := completeAction(e, in, acts[0].LifecycleActionToken, Continue); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the removed instance gone", func() bool { _, ok := states(t, e, group)[victim]; return !ok })
	wantCode(t, completeAction(e, in, acts[0].LifecycleActionToken, Continue), "IncorrectLifecycleActionStatus")
	if a := settled(t, e, rm.ScalingActivityId); a.StatusCode != "Successful" {
		t.Fatalf("removal activity: %+v", a)
	}

	out, err := createHook(e, group, ScaleOut, Abandon, 30)
	if err != nil {
		t.Fatal(err)
	}
	_, err = createHook(e, group, ScaleOut, Continue, 30)
	wantCode(t, err, "Unsupported.MultipleLifecycleHooks")
	id := scaleOut(t, e, group, 1)
	var pending string
	eventually(t, "an instance in Pending:Wait", func() bool {
		for i, st := range states(t, e, group) {
			if st == PendingWait {
				pending = i
			}
		}
		return pending != ""
	})
	acts = lifecycleActions(t, e, id)
	if len(acts) != 1 || acts[0].LifecycleHookId != out || acts[0].InstanceIds.InstanceId[0] != pending {
		t.Fatalf("lifecycle actions of the launch: %+v", acts)
	}
	if err := completeAction(e, out, acts[0].LifecycleActionToken, Continue); err != nil {
		t.Fatal(err)
	}
	if a := settled(t, e, id); a.StatusCode != "Successful" || states(t, e, group)[pending] != InService {
		t.Fatalf("launch completed with CONTINUE: activity %+v, instance %s", a, states(t, e, group)[pending])
	}

	id = scaleOut(t, e, group, 1)
	a := settled(t, e, id) // the hook times out after 300 ms with ABANDON
	if a.StatusCode != "Failed" || !strings.Contains(a.StatusMessage, "ABANDON") || len(a.CreatedInstances.CreatedInstance) != 0 {
		t.Fatalf("launch whose hook timed out with ABANDON: %+v", a)
	}
	if acts := lifecycleActions(t, e, id); len(acts) != 1 || acts[0].LifecycleActionStatus != "Timeout" || acts[0].LifecycleActionResult != Abandon {
		t.Fatalf("lifecycle actions: %+v", acts)
	}
}
