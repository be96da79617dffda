package ecsapi

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/requests"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ess"
)

func describeGroup(t *testing.T, e *env, group string) (ess.ScalingGroup, string) {
	t.Helper()
	dg := ess.CreateDescribeScalingGroupsRequest()
	dg.ScalingGroupId = &[]string{group}
	resp, err := e.ess.DescribeScalingGroups(dg)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ScalingGroups.ScalingGroup) != 1 {
		t.Fatalf("DescribeScalingGroups %s: %+v", group, resp.ScalingGroups)
	}
	return resp.ScalingGroups.ScalingGroup[0], resp.GetHttpContentString()
}

func states(t *testing.T, e *env, group string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, si := range scalingInstances(t, e, group, "") {
		out[si.InstanceId] = si.LifecycleState
	}
	return out
}

func adjust(t *testing.T, e *env, group string, n int) error {
	t.Helper()
	sa := ess.CreateScaleWithAdjustmentRequest()
	sa.ScalingGroupId, sa.AdjustmentType, sa.AdjustmentValue = group, "QuantityChangeInCapacity", requests.NewInteger(n)
	_, err := e.ess.ScaleWithAdjustment(sa)
	return err
}

// Standby and Protected instances count toward the desired capacity (no
// replacement is launched for them) and no scale-in removes them;
// RemoveInstances does.
func TestStandbyAndProtected(t *testing.T) {
	l := &fakeLauncher{}
	e, group, _, _ := groupEnv(t, l, 3)
	eventually(t, "three InService instances", func() bool { return len(scalingInstances(t, e, group, InService)) == 3 })
	waitIdle(t, e, group)
	ids := []string{}
	for _, si := range scalingInstances(t, e, group, "") {
		ids = append(ids, si.InstanceId)
	}
	standby, protected, plain := ids[0], ids[1], ids[2]

	es := ess.CreateEnterStandbyRequest()
	es.ScalingGroupId, es.InstanceId = group, &[]string{standby}
	resp, err := e.ess.EnterStandby(es)
	if err != nil || resp.ScalingActivityId == "" {
		t.Fatalf("EnterStandby: %v %+v", err, resp)
	}
	sp := ess.CreateSetInstancesProtectionRequest()
	sp.ScalingGroupId, sp.InstanceId, sp.ProtectedFromScaleIn = group, &[]string{protected}, requests.NewBoolean(true)
	if _, err := e.ess.SetInstancesProtection(sp); err != nil {
		t.Fatal(err)
	}
	time.Sleep(convergeWait) // a converging group would launch replacements now
	if got := states(t, e, group); len(got) != 3 || got[standby] != Standby || got[protected] != Protected || got[plain] != InService {
		t.Fatalf("states %v", got)
	}
	if got := scalingInstances(t, e, group, Standby); len(got) != 1 || got[0].InstanceId != standby {
		t.Fatalf("LifecycleState=Standby lists %+v", got)
	}
	g, _ := describeGroup(t, e, group)
	if g.DesiredCapacity != 3 || g.TotalCapacity != 3 || g.StandbyCapacity != 1 || g.ProtectedCapacity != 1 || g.ActiveCapacity != 1 {
		t.Fatalf("group: desired %d total %d standby %d protected %d active %d", g.DesiredCapacity, g.TotalCapacity, g.StandbyCapacity, g.ProtectedCapacity, g.ActiveCapacity)
	}

	// Wrong states and unknown instances are refused.
	sp.InstanceId = &[]string{standby}
	_, err = e.ess.SetInstancesProtection(sp)
	wantCode(t, err, "IncorrectInstanceStatus")
	es.InstanceId = &[]string{protected}
	_, err = e.ess.EnterStandby(es)
	wantCode(t, err, "IncorrectInstanceStatus")
	xs := ess.CreateExitStandbyRequest()
	xs.ScalingGroupId, xs.InstanceId = group, &[]string{plain}
	_, err = e.ess.ExitStandby(xs)
	wantCode(t, err, "IncorrectInstanceStatus")
	es.InstanceId = &[]string{"i-notinthegroup"}
	_, err = e.ess.EnterStandby(es)
	wantCode(t, err, "InvalidInstanceId.NotFound")
	missing := ess.CreateSetInstancesProtectionRequest()
	missing.ScalingGroupId, missing.InstanceId = group, &[]string{plain}
	_, err = e.ess.SetInstancesProtection(missing)
	wantCode(t, err, "MissingParameter")

	// A scale-in to 1 removes the InService instance only, and the group
	// stays above its desired capacity rather than touch the others.
	if err := adjust(t, e, group, -2); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the InService instance removed", func() bool { _, ok := states(t, e, group)[plain]; return !ok })
	waitIdle(t, e, group)
	time.Sleep(convergeWait)
	if got := states(t, e, group); len(got) != 2 || got[standby] != Standby || got[protected] != Protected {
		t.Fatalf("after the scale-in: %v", got)
	}
	if !l.instance(plain).Stopped() || l.instance(standby).Stopped() || l.instance(protected).Stopped() {
		t.Fatal("only the InService instance may be stopped")
	}

	// Out of Standby it is InService again and goes with the next scale-in;
	// a Protected instance leaves through RemoveInstances.
	xs.InstanceId = &[]string{standby}
	if _, err := e.ess.ExitStandby(xs); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the former Standby instance scaled in", func() bool { _, ok := states(t, e, group)[standby]; return !ok })
	waitIdle(t, e, group)
	mg := ess.CreateModifyScalingGroupRequest()
	mg.ScalingGroupId, mg.MinSize = group, requests.NewInteger(0)
	if _, err := e.ess.ModifyScalingGroup(mg); err != nil {
		t.Fatal(err)
	}
	ri := ess.CreateRemoveInstancesRequest()
	ri.ScalingGroupId, ri.InstanceId = group, &[]string{protected}
	if _, err := e.ess.RemoveInstances(ri); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Protected instance removed", func() bool { return len(states(t, e, group)) == 0 })
	if g, _ := describeGroup(t, e, group); g.DesiredCapacity != 0 {
		t.Fatalf("desired capacity %d, want 0", g.DesiredCapacity)
	}
}

// AttachInstances adds an instance launched outside the group: CreationType
// Attached, no launch template, the desired capacity one higher; removing
// it leaves it running unless it was entrusted.
func TestAttachInstances(t *testing.T) {
	l := &fakeLauncher{}
	e, group, ltID, _ := groupEnv(t, l, 2)
	eventually(t, "two InService instances", func() bool { return len(scalingInstances(t, e, group, InService)) == 2 })
	waitIdle(t, e, group)
	ctx := context.Background()
	loose, err := e.srv.RunInstance(ctx, ltID, "2")
	if err != nil {
		t.Fatal(err)
	}
	ai := ess.CreateAttachInstancesRequest()
	ai.ScalingGroupId, ai.InstanceId = group, &[]string{loose}
	if _, err := e.ess.AttachInstances(ai); err != nil {
		t.Fatal(err)
	}
	att := scalingInstances(t, e, group, "")
	byID := map[string]ess.ScalingInstance{}
	for _, si := range att {
		byID[si.InstanceId] = si
	}
	if si := byID[loose]; si.CreationType != Attached || si.LifecycleState != InService || si.LaunchTemplateId != "" || si.Entrusted {
		t.Fatalf("attached instance: %+v", si)
	}
	r := ess.CreateDescribeScalingInstancesRequest()
	r.ScalingGroupId, r.CreationType = group, Attached
	only, err := e.ess.DescribeScalingInstances(r)
	if err != nil || len(only.ScalingInstances.ScalingInstance) != 1 || only.ScalingInstances.ScalingInstance[0].InstanceId != loose {
		t.Fatalf("CreationType=Attached: %v %+v", err, only)
	}
	if g, _ := describeGroup(t, e, group); g.DesiredCapacity != 3 {
		t.Fatalf("desired capacity %d after attaching one to 2, want 3", g.DesiredCapacity)
	}
	time.Sleep(convergeWait)
	if n := len(scalingInstances(t, e, group, "")); n != 3 {
		t.Fatalf("%d instances, want 3 (no scale-in)", n)
	}

	_, err = e.ess.AttachInstances(ai)
	wantCode(t, err, "IncorrectInstanceStatus")
	ai.InstanceId = &[]string{"i-nosuchinstance"}
	_, err = e.ess.AttachInstances(ai)
	wantCode(t, err, "InvalidInstanceId.NotFound")
	mg := ess.CreateModifyScalingGroupRequest()
	mg.ScalingGroupId, mg.MaxSize = group, requests.NewInteger(3)
	if _, err := e.ess.ModifyScalingGroup(mg); err != nil {
		t.Fatal(err)
	}
	other, err := e.srv.RunInstance(ctx, ltID, "1")
	if err != nil {
		t.Fatal(err)
	}
	ai.InstanceId = &[]string{other}
	_, err = e.ess.AttachInstances(ai)
	wantCode(t, err, "IncorrectCapacity.MaxSize")

	ri := ess.CreateRemoveInstancesRequest()
	ri.ScalingGroupId, ri.InstanceId = group, &[]string{loose}
	if _, err := e.ess.RemoveInstances(ri); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the attached instance out of the group", func() bool { _, ok := states(t, e, group)[loose]; return !ok })
	if l.instance(loose).Stopped() {
		t.Fatal("an instance attached without Entrusted was stopped on removal")
	}
	ids, _ := json.Marshal([]string{loose})
	di := ecs.CreateDescribeInstancesRequest()
	di.InstanceIds = string(ids)
	if insts, err := e.ecs.DescribeInstances(di); err != nil || insts.TotalCount != 1 || insts.Instances.Instance[0].Status != "Running" {
		t.Fatalf("DescribeInstances of the removed attached instance: %v %+v", err, insts)
	}
}

// A group created without an expected number of instances answers none,
// refuses one later, keeps MinSize instances and runs one activity at a
// time.
func TestGroupWithoutDesiredCapacity(t *testing.T) {
	l := &fakeLauncher{gate: make(chan struct{})}
	e, _, ltID, _ := groupEnv(t, l, 0) // that group launches nothing
	group := e.srv.AddScalingGroup(ScalingGroup{LaunchTemplateID: ltID, LaunchTemplateVersion: "1", MinSize: 2, MaxSize: 3, NoDesiredCapacity: true})
	eventually(t, "two Pending instances", func() bool { return len(scalingInstances(t, e, group, Pending)) == 2 })
	g, raw := describeGroup(t, e, group)
	if g.EnableDesiredCapacity || strings.Contains(raw, `"DesiredCapacity"`) {
		t.Fatalf("a group without a desired capacity answers EnableDesiredCapacity %v, body %s", g.EnableDesiredCapacity, raw)
	}
	err := adjust(t, e, group, 1)
	wantCode(t, err, "ScalingActivityInProgress")
	close(l.gate)
	eventually(t, "two InService instances", func() bool { return len(scalingInstances(t, e, group, InService)) == 2 })
	waitIdle(t, e, group)
	if err := adjust(t, e, group, 1); err != nil {
		t.Fatal(err)
	}
	eventually(t, "three InService instances", func() bool { return len(scalingInstances(t, e, group, InService)) == 3 })
	mg := ess.CreateModifyScalingGroupRequest()
	mg.ScalingGroupId, mg.DesiredCapacity = group, requests.NewInteger(3)
	_, err = e.ess.ModifyScalingGroup(mg)
	wantCode(t, err, "InvalidParameter")
}

func listTags(t *testing.T, e *env, set func(*ess.ListTagResourcesRequest)) []ess.TagResource {
	t.Helper()
	r := ess.CreateListTagResourcesRequest()
	r.ResourceType = "scalinggroup"
	set(r)
	resp, err := e.ess.ListTagResources(r)
	if err != nil {
		t.Fatal(err)
	}
	return resp.TagResources.TagResource
}

func tagGroup(e *env, ids []string, tags ...ess.TagResourcesTag) error {
	tr := ess.CreateTagResourcesRequest() // a fresh one: the SDK keeps a request's earlier parameters
	tr.ResourceType, tr.ResourceId, tr.Tag = "scalinggroup", &ids, &tags
	_, err := e.ess.TagResources(tr)
	return err
}

func untagGroup(e *env, id string, all bool, keys ...string) error {
	ut := ess.CreateUntagResourcesRequest()
	ut.ResourceType, ut.ResourceId = "scalinggroup", &[]string{id}
	if len(keys) > 0 {
		ut.TagKey = &keys
	}
	if all {
		ut.All = requests.NewBoolean(true)
	}
	_, err := e.ess.UntagResources(ut)
	return err
}

func TestScalingGroupTags(t *testing.T) {
	e, group, ltID, _ := groupEnv(t, &fakeLauncher{}, 0)
	other := e.srv.AddScalingGroup(ScalingGroup{LaunchTemplateID: ltID, MinSize: 0, MaxSize: 1})
	if err := tagGroup(e, []string{group}, ess.TagResourcesTag{Key: "drover:lock:a", Value: "owner=x run=a"}, ess.TagResourcesTag{Key: "team", Value: "nodes"}); err != nil {
		t.Fatal(err)
	}
	tagsOf := func(id string) []ess.TagResource {
		return listTags(t, e, func(r *ess.ListTagResourcesRequest) { r.ResourceId = &[]string{id} })
	}
	got := tagsOf(group)
	if len(got) != 2 || got[0].TagKey != "drover:lock:a" || got[0].TagValue != "owner=x run=a" || got[0].ResourceId != group || got[0].ResourceType != "scalinggroup" {
		t.Fatalf("tags of %s: %+v", group, got)
	}
	byTag := listTags(t, e, func(r *ess.ListTagResourcesRequest) {
		r.Tag = &[]ess.ListTagResourcesTag{{Key: "team", Value: "nodes"}}
	})
	if len(byTag) != 2 || byTag[0].ResourceId != group {
		t.Fatalf("groups tagged team=nodes: %+v", byTag)
	}
	if n := len(tagsOf(other)); n != 0 {
		t.Fatalf("%d tags on the untagged group", n)
	}

	// A new value replaces the old; UntagResources removes by key.
	if err := tagGroup(e, []string{group}, ess.TagResourcesTag{Key: "team", Value: "edge"}); err != nil {
		t.Fatal(err)
	}
	if err := untagGroup(e, group, false, "drover:lock:a"); err != nil {
		t.Fatal(err)
	}
	if got = tagsOf(group); len(got) != 1 || got[0].TagKey != "team" || got[0].TagValue != "edge" {
		t.Fatalf("after replacing and untagging: %+v", got)
	}

	// 20 tags per group at most, checked before any is bound.
	var many []ess.TagResourcesTag
	for i := range 20 {
		many = append(many, ess.TagResourcesTag{Key: "k" + string(rune('a'+i)), Value: "v"})
	}
	wantCode(t, tagGroup(e, []string{group}, many...), "QuotaExceed.TagsPerResource")
	if n := len(tagsOf(group)); n != 1 {
		t.Fatalf("%d tags after a refused TagResources, want 1", n)
	}
	wantCode(t, tagGroup(e, []string{group}, ess.TagResourcesTag{Key: "aliyun:x", Value: "v"}), "InvalidParameter")
	wantCode(t, tagGroup(e, []string{"asg-missing"}, ess.TagResourcesTag{Key: "k", Value: "v"}), "InvalidResourceId.NotFound")
	tr := ess.CreateTagResourcesRequest()
	tr.ResourceType, tr.ResourceId, tr.Tag = "instance", &[]string{group}, &[]ess.TagResourcesTag{{Key: "k", Value: "v"}}
	_, err := e.ess.TagResources(tr)
	wantCode(t, err, "InvalidParameter")
	if err := untagGroup(e, group, true); err != nil {
		t.Fatal(err)
	}
	if n := len(tagsOf(group)); n != 0 {
		t.Fatalf("%d tags after All=true", n)
	}
}
