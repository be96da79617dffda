package ecsapi

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/requests"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ess"
)

// groupEnv sets up image A (template version 1) and image B (version 2) and a
// group on version 1.
func groupEnv(t *testing.T, l Launcher, desired int) (e *env, group, ltID, imageB string) {
	t.Helper()
	e = newEnv(t, Config{Launcher: l, LaunchRetry: testLaunchRetry})
	e.srv.CreateBucket("images")
	put(t, e, "images", "a.raw", "image-A")
	put(t, e, "images", "b.raw", "image-B")
	imgA, err := e.ecs.ImportImage(importReq("images", "a.raw", "A"))
	if err != nil {
		t.Fatal(err)
	}
	imgB, err := e.ecs.ImportImage(importReq("images", "b.raw", "B"))
	if err != nil {
		t.Fatal(err)
	}
	ct := ecs.CreateCreateLaunchTemplateRequest()
	ct.LaunchTemplateName = "pool"
	ct.ImageId = imgA.ImageId
	ct.UserData = base64.StdEncoding.EncodeToString([]byte("node-config-1"))
	lt, err := e.ecs.CreateLaunchTemplate(ct)
	if err != nil {
		t.Fatal(err)
	}
	cv := ecs.CreateCreateLaunchTemplateVersionRequest()
	cv.LaunchTemplateId = lt.LaunchTemplateId
	cv.ImageId = imgB.ImageId
	cv.UserData = base64.StdEncoding.EncodeToString([]byte("node-config-2"))
	if _, err := e.ecs.CreateLaunchTemplateVersion(cv); err != nil {
		t.Fatal(err)
	}
	group = e.srv.AddScalingGroup(ScalingGroup{Name: "pool", LaunchTemplateID: lt.LaunchTemplateId,
		LaunchTemplateVersion: "1", MinSize: 1, MaxSize: 4, DesiredCapacity: desired})
	return e, group, lt.LaunchTemplateId, imgB.ImageId
}

func scalingInstances(t *testing.T, e *env, group string, state string) []ess.ScalingInstance {
	t.Helper()
	r := ess.CreateDescribeScalingInstancesRequest()
	r.ScalingGroupId = group
	r.LifecycleState = state
	resp, err := e.ess.DescribeScalingInstances(r)
	if err != nil {
		t.Fatal(err)
	}
	return resp.ScalingInstances.ScalingInstance
}

func TestScalingGroupConverges(t *testing.T) {
	l := &fakeLauncher{}
	e, group, ltID, imageB := groupEnv(t, l, 2)

	eventually(t, "two InService instances", func() bool { return len(scalingInstances(t, e, group, InService)) == 2 })
	old := scalingInstances(t, e, group, "")
	for _, si := range old {
		if si.LaunchTemplateId != ltID || si.LaunchTemplateVersion != "1" || si.CreationType != "AutoCreated" ||
			si.HealthStatus != "Healthy" || si.ZoneId != testRegion+"-a" || si.CreatedTime == "" {
			t.Fatalf("scaling instance: %+v", si)
		}
		if in := l.instance(si.InstanceId); in == nil || string(in.Spec.UserData) != "node-config-1" {
			t.Fatalf("instance %s was not launched with version 1's user-data", si.InstanceId)
		}
	}

	dg := ess.CreateDescribeScalingGroupsRequest()
	dg.ScalingGroupId = &[]string{group}
	groups, err := e.ess.DescribeScalingGroups(dg)
	if err != nil {
		t.Fatal(err)
	}
	g := groups.ScalingGroups.ScalingGroup
	if len(g) != 1 || g[0].ScalingGroupId != group || g[0].LaunchTemplateId != ltID || g[0].LaunchTemplateVersion != "1" ||
		g[0].DesiredCapacity != 2 || g[0].MinSize != 1 || g[0].MaxSize != 4 || g[0].TotalCapacity != 2 ||
		g[0].ActiveCapacity != 2 || g[0].MultiAZPolicy != "PRIORITY" || g[0].LifecycleState != "Active" {
		t.Fatalf("scaling group: %+v", g)
	}

	// ECS sees the instances and their consoles.
	ids, _ := json.Marshal([]string{old[0].InstanceId, old[1].InstanceId})
	di := ecs.CreateDescribeInstancesRequest()
	di.InstanceIds = string(ids)
	insts, err := e.ecs.DescribeInstances(di)
	if err != nil {
		t.Fatal(err)
	}
	if insts.TotalCount != 2 || len(insts.Instances.Instance) != 2 || insts.Instances.Instance[0].Status != "Running" {
		t.Fatalf("DescribeInstances: %+v", insts.Instances)
	}
	co := ecs.CreateGetInstanceConsoleOutputRequest()
	co.InstanceId = old[0].InstanceId
	out, err := e.ecs.GetInstanceConsoleOutput(co)
	if err != nil {
		t.Fatal(err)
	}
	text, err := base64.StdEncoding.DecodeString(out.ConsoleOutput)
	if err != nil || string(text) != "booted "+old[0].InstanceId+" from image-A\n" || out.InstanceId != old[0].InstanceId {
		t.Fatalf("console output %q (%v)", text, err)
	}

	// Point the group at version 2 and surge by one: the new instance boots B.
	mg := ess.CreateModifyScalingGroupRequest()
	mg.ScalingGroupId = group
	mg.LaunchTemplateId = ltID
	mg.LaunchTemplateVersion = "2"
	if _, err := e.ess.ModifyScalingGroup(mg); err != nil {
		t.Fatal(err)
	}
	sa := ess.CreateScaleWithAdjustmentRequest()
	sa.ScalingGroupId = group
	sa.AdjustmentType = "QuantityChangeInCapacity"
	sa.AdjustmentValue = requests.NewInteger(1)
	adj, err := e.ess.ScaleWithAdjustment(sa)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "a version 2 instance", func() bool {
		for _, si := range scalingInstances(t, e, group, InService) {
			if si.LaunchTemplateVersion == "2" {
				in := l.instance(si.InstanceId)
				return in != nil && in.Spec.ImageID == imageB && string(in.Spec.UserData) == "node-config-2"
			}
		}
		return false
	})

	// Remove an old instance: it is stopped and released, and the desired
	// capacity drops with it (DecreaseDesiredCapacity defaults to true).
	waitIdle(t, e, group)
	ri := ess.CreateRemoveInstancesRequest()
	ri.ScalingGroupId = group
	ri.InstanceId = &[]string{old[0].InstanceId}
	rm, err := e.ess.RemoveInstances(ri)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the old instance released", func() bool {
		for _, si := range scalingInstances(t, e, group, "") {
			if si.InstanceId == old[0].InstanceId {
				return false
			}
		}
		return true
	})
	if !l.instance(old[0].InstanceId).Stopped() {
		t.Fatal("the removed instance was not stopped")
	}
	_, err = e.ecs.GetInstanceConsoleOutput(co)
	wantCode(t, err, "InvalidInstanceId.NotFound")
	groups, err = e.ess.DescribeScalingGroups(dg)
	if err != nil {
		t.Fatal(err)
	}
	if d := groups.ScalingGroups.ScalingGroup[0].DesiredCapacity; d != 2 {
		t.Fatalf("desired capacity %d after removing one of 3, want 2", d)
	}

	da := ess.CreateDescribeScalingActivitiesRequest()
	da.ScalingGroupId = group
	da.ScalingActivityId = &[]string{adj.ScalingActivityId, rm.ScalingActivityId}
	acts, err := e.ess.DescribeScalingActivities(da)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]ess.ScalingActivity{}
	for _, a := range acts.ScalingActivities.ScalingActivity {
		byID[a.ScalingActivityId] = a
	}
	if a := byID[rm.ScalingActivityId]; a.StatusCode != "Successful" || len(a.DestroyedInstances.DestroyedInstance) != 1 ||
		a.DestroyedInstances.DestroyedInstance[0] != old[0].InstanceId {
		t.Fatalf("remove activity: %+v", a)
	}
	if a := byID[adj.ScalingActivityId]; a.StatusCode != "Successful" || len(a.CreatedInstances.CreatedInstance) != 1 {
		t.Fatalf("adjustment activity: %+v", a)
	}
}

func waitIdle(t *testing.T, e *env, group string) {
	t.Helper()
	eventually(t, "no activity in progress", func() bool {
		da := ess.CreateDescribeScalingActivitiesRequest()
		da.ScalingGroupId = group
		da.StatusCode = "InProgress"
		acts, err := e.ess.DescribeScalingActivities(da)
		return err == nil && acts.TotalCount == 0
	})
}

func TestScalingErrors(t *testing.T) {
	l := &fakeLauncher{gate: make(chan struct{})}
	e, group, _, _ := groupEnv(t, l, 1)

	// While the launch hangs, the group refuses new activities.
	eventually(t, "a Pending instance", func() bool { return len(scalingInstances(t, e, group, Pending)) == 1 })
	sa := ess.CreateScaleWithAdjustmentRequest()
	sa.ScalingGroupId = group
	sa.AdjustmentType = "QuantityChangeInCapacity"
	sa.AdjustmentValue = requests.NewInteger(1)
	_, err := e.ess.ScaleWithAdjustment(sa)
	wantCode(t, err, "ScalingActivityInProgress")
	close(l.gate)
	eventually(t, "one InService instance", func() bool { return len(scalingInstances(t, e, group, InService)) == 1 })
	waitIdle(t, e, group)

	only := scalingInstances(t, e, group, InService)[0].InstanceId
	ri := ess.CreateRemoveInstancesRequest()
	ri.ScalingGroupId = group
	ri.InstanceId = &[]string{only}
	_, err = e.ess.RemoveInstances(ri)
	wantCode(t, err, "IncorrectCapacity.MinSize")
	ri.InstanceId = &[]string{"i-notinthegroup"}
	_, err = e.ess.RemoveInstances(ri)
	wantCode(t, err, "InvalidInstanceId.NotFound")
	ri.ScalingGroupId = "asg-missing"
	_, err = e.ess.RemoveInstances(ri)
	wantCode(t, err, "InvalidScalingGroupId.NotFound")

	mg := ess.CreateModifyScalingGroupRequest()
	mg.ScalingGroupId = group
	mg.MinSize = requests.NewInteger(5)
	_, err = e.ess.ModifyScalingGroup(mg)
	wantCode(t, err, "InvalidParameter")
	mg = ess.CreateModifyScalingGroupRequest() // the SDK keeps a request's earlier parameters
	mg.ScalingGroupId = group
	mg.LaunchTemplateVersion = "7"
	_, err = e.ess.ModifyScalingGroup(mg)
	wantCode(t, err, "LaunchTemplateVersionSet.NotFound")

	// An adjustment past MaxSize is clamped to it.
	sa.AdjustmentValue = requests.NewInteger(10)
	if _, err := e.ess.ScaleWithAdjustment(sa); err != nil {
		t.Fatal(err)
	}
	eventually(t, "MaxSize instances", func() bool { return len(scalingInstances(t, e, group, InService)) == 4 })
	e.srv.ThrottleNext("DescribeScalingGroups", 1)
	_, err = e.ess.DescribeScalingGroups(ess.CreateDescribeScalingGroupsRequest())
	wantCode(t, err, "Throttling.User")
}

func TestFailedLaunchIsRetried(t *testing.T) {
	l := &fakeLauncher{}
	e := newEnv(t, Config{Launcher: l, LaunchRetry: testLaunchRetry})
	e.srv.FailLaunch(1)
	e.srv.CreateBucket("images")
	put(t, e, "images", "a.raw", "A")
	img, err := e.ecs.ImportImage(importReq("images", "a.raw", "A"))
	if err != nil {
		t.Fatal(err)
	}
	ct := ecs.CreateCreateLaunchTemplateRequest()
	ct.LaunchTemplateName, ct.ImageId = "pool", img.ImageId
	lt, err := e.ecs.CreateLaunchTemplate(ct)
	if err != nil {
		t.Fatal(err)
	}
	group := e.srv.AddScalingGroup(ScalingGroup{LaunchTemplateID: lt.LaunchTemplateId, LaunchTemplateVersion: "Latest",
		MinSize: 0, MaxSize: 2, DesiredCapacity: 1})
	eventually(t, "an InService instance", func() bool { return len(scalingInstances(t, e, group, InService)) == 1 })
	da := ess.CreateDescribeScalingActivitiesRequest()
	da.ScalingGroupId = group
	acts, err := e.ess.DescribeScalingActivities(da)
	if err != nil {
		t.Fatal(err)
	}
	list := acts.ScalingActivities.ScalingActivity
	if len(list) != 2 || list[0].StatusCode != "Successful" || list[1].StatusCode != "Failed" ||
		!strings.Contains(list[1].StatusMessage, "FailLaunch") {
		t.Fatalf("activities (newest first): %+v", list)
	}
	time.Sleep(2 * testLaunchRetry)
	if n := len(scalingInstances(t, e, group, "")); n != 1 {
		t.Fatalf("%d instances for a desired capacity of 1", n)
	}
}

// An instance names the launch template version it is created from from
// the moment it is in the group (Pending), and launches from that version
// although the group is switched to another before the launch starts: a
// client never sees an instance of its group without a version (rollout
// would take it for an old one).
func TestLaunchKeepsItsVersion(t *testing.T) {
	l := &fakeLauncher{}
	e, group, ltID, _ := groupEnv(t, l, 1)
	eventually(t, "one InService instance", func() bool { return len(scalingInstances(t, e, group, InService)) == 1 })
	waitIdle(t, e, group)
	e.srv.mu.Lock()
	g := e.srv.groups[group]
	e.srv.launchBatch(g, 1, "a test asked", time.Now())
	g.DesiredCapacity++
	m := g.members[len(g.members)-1]
	id, asked := m.inst.id, m.ltID+":"+m.ltVer // what DescribeScalingInstances answers now
	g.LaunchTemplateVersion = "2"              // before the launch goroutine runs: it waits for mu
	e.srv.mu.Unlock()
	if asked != ltID+":1" {
		t.Fatalf("a Pending instance names launch template %q, want %s:1", asked, ltID)
	}
	eventually(t, "the new instance InService", func() bool { return len(scalingInstances(t, e, group, InService)) == 2 })
	for _, in := range scalingInstances(t, e, group, InService) {
		if in.InstanceId == id && in.LaunchTemplateVersion != "1" {
			t.Errorf("instance %s: version %q, want 1 (the one it was created from)", id, in.LaunchTemplateVersion)
		}
	}
	if b := l.instance(id).Console(); !strings.Contains(string(b), "image-A") {
		t.Errorf("instance %s booted %q, want image A (version 1)", id, b)
	}
}
