//go:build integration

package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/requests"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ess"

	"github.com/drover-os/drover/agent/userdata"
	"github.com/drover-os/drover/harness/ecsapi"
)

// templateCopy: a launch template with two data disks, two security
// groups, a NIC and booleans set false or left out. The version the
// rollout creates holds the same launch data as the group's old one but
// for the image and the user-data, as DescribeLaunchTemplateVersions
// answers it (the JSON, not the SDK's struct, which would hide an omitted
// boolean as false and drop fields it lacks).
func (e *rolloutEnv) templateCopy(t *testing.T) {
	s, old := e.newScenarioTemplate(t, "tplcopy", ecsapi.ScalingGroup{MinSize: 1, MaxSize: 1, DesiredCapacity: 1}, 1,
		func(r *ecs.CreateLaunchTemplateRequest) {
			r.SecurityGroupIds = &[]string{"sg-copy-a", "sg-copy-b"}
			r.SystemDiskCategory, r.SystemDiskSize = "cloud_essd", requests.NewInteger(40)
			r.SystemDiskDeleteWithInstance = requests.NewBoolean(false)
			r.DataDisk = &[]ecs.CreateLaunchTemplateDataDisk{
				{Category: "cloud_essd", Size: "100", DeleteWithInstance: "false", Device: "/dev/xvdb", Encrypted: "true"},
				{Category: "cloud_auto", Size: "200", BurstingEnabled: "true"}, // DeleteWithInstance left out
			}
			r.NetworkInterface = &[]ecs.CreateLaunchTemplateNetworkInterface{
				{SecurityGroupIds: &[]string{"sg-copy-c", "sg-copy-d"}, Description: "secondary"}, // DeleteOnRelease left out
			}
			r.Tag = &[]ecs.CreateLaunchTemplateTag{{Key: "team", Value: "nodes"}}
			r.HttpTokens = "required"
			r.QueryParams["SecurityOptions.TrustedSystemMode"] = "vTPM" // a field the SDK's types lack
		})
	stdout, stderr, code := s.rollout(t, "--image", e.imageB, "--userdata", s.pool, "--ready-timeout", "60s")
	if code != 0 {
		t.Fatalf("rollout exit %d, want 0\n%s%s", code, stdout, stderr)
	}
	now := s.instanceIDs(t)
	if len(now) != 1 || now[0] == old[0] {
		t.Fatalf("instances %v, want one new one", now)
	}
	g := s.scalingGroup(t)
	was, got := s.templateData(t, "1"), s.templateData(t, g.LaunchTemplateVersion)
	if got["ImageId"] != e.imageB || was["ImageId"] != e.imageA {
		t.Errorf("images: version 1 %v, version %s %v; want %s then %s", was["ImageId"], g.LaunchTemplateVersion, got["ImageId"], e.imageA, e.imageB)
	}
	for _, k := range []string{"ImageId", "UserData"} {
		delete(was, k)
		delete(got, k)
	}
	if !reflect.DeepEqual(was, got) {
		w, _ := json.MarshalIndent(was, "", " ")
		n, _ := json.MarshalIndent(got, "", " ")
		t.Errorf("version %s's launch data differs from version 1's beyond the image and user-data:\nversion 1\n%s\nversion %s\n%s", g.LaunchTemplateVersion, w, g.LaunchTemplateVersion, n)
	}
}

// templateData is a version's LaunchTemplateData as the JSON answer of
// DescribeLaunchTemplateVersions carries it.
func (s *scenario) templateData(t *testing.T, version string) map[string]any {
	t.Helper()
	req := ecs.CreateDescribeLaunchTemplateVersionsRequest()
	req.LaunchTemplateId, req.LaunchTemplateVersion, req.DetailFlag = s.template, &[]string{version}, requests.NewBoolean(true)
	resp, err := s.e.ecs.DescribeLaunchTemplateVersions(req)
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		LaunchTemplateVersionSets struct {
			LaunchTemplateVersionSet []struct {
				VersionNumber      json.Number
				LaunchTemplateData map[string]any
			}
		}
	}
	if err := json.Unmarshal(resp.GetHttpContentBytes(), &body); err != nil {
		t.Fatal(err)
	}
	for _, v := range body.LaunchTemplateVersionSets.LaunchTemplateVersionSet {
		if v.VersionNumber.String() == version {
			return v.LaunchTemplateData
		}
	}
	t.Fatalf("launch template %s has no version %s: %s", s.template, version, resp.GetHttpContentString())
	return nil
}

// lifecycleHooks: the group has a scale-out and a scale-in lifecycle hook
// (HeartbeatTimeout 600 s), whose actions another process — here the test,
// through DescribeLifecycleActions and CompleteLifecycleAction — completes
// a few seconds after they start. The rollout waits through both:
// instances in Pending:Wait are new ones coming up, not failures, and an
// old one held in Removing:Wait is said to be so; every old instance is
// replaced and each hook held at least one instance.
func (e *rolloutEnv) lifecycleHooks(t *testing.T) {
	s, old := e.newScenario(t, "hooks")
	ud, err := userdata.Render(s.spec("a", e.cluster.BootstrapToken()))
	if err != nil {
		t.Fatal(err)
	}
	s.waitIdle(t)
	hooks := map[string]string{}
	for _, tr := range []string{ecsapi.ScaleOut, ecsapi.ScaleIn} {
		r := ess.CreateCreateLifecycleHookRequest()
		r.ScalingGroupId, r.LifecycleHookName, r.LifecycleTransition = s.group, strings.ToLower(tr), tr
		r.DefaultResult, r.HeartbeatTimeout = ecsapi.Continue, requests.NewInteger(600)
		resp, err := e.ess.CreateLifecycleHook(r)
		if err != nil {
			t.Fatal(err)
		}
		hooks[resp.LifecycleHookId] = tr
	}

	// The hooks' consumer: each pending action is completed with CONTINUE
	// 3 s after it is first seen.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	held := map[string][]string{} // transition → instances its actions held
	wg.Add(1)
	go func() {
		defer wg.Done()
		first := map[string]time.Time{}
		for {
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
			req := ess.CreateDescribeScalingActivitiesRequest()
			req.ScalingGroupId, req.PageSize = s.group, requests.NewInteger(50)
			acts, err := e.ess.DescribeScalingActivities(req)
			if err != nil {
				continue
			}
			for _, a := range acts.ScalingActivities.ScalingActivity {
				if a.StatusCode != "InProgress" {
					continue
				}
				lr := ess.CreateDescribeLifecycleActionsRequest()
				lr.ScalingActivityId = a.ScalingActivityId
				la, err := e.ess.DescribeLifecycleActions(lr)
				if err != nil {
					continue
				}
				for _, l := range la.LifecycleActions.LifecycleAction {
					if l.LifecycleActionStatus != "Pending" {
						continue
					}
					if first[l.LifecycleActionToken].IsZero() {
						first[l.LifecycleActionToken] = time.Now()
						mu.Lock()
						held[hooks[l.LifecycleHookId]] = append(held[hooks[l.LifecycleHookId]], l.InstanceIds.InstanceId...)
						mu.Unlock()
					}
					if time.Since(first[l.LifecycleActionToken]) < 3*time.Second {
						continue
					}
					cr := ess.CreateCompleteLifecycleActionRequest()
					cr.LifecycleHookId, cr.LifecycleActionToken, cr.LifecycleActionResult = l.LifecycleHookId, l.LifecycleActionToken, ecsapi.Continue
					_, _ = e.ess.CompleteLifecycleAction(cr)
				}
			}
		}
	}()
	stdout, stderr, code := s.rollout(t, "--image", e.imageB, "--userdata", s.pool, "--ready-timeout", "90s", "--json")
	close(stop)
	wg.Wait()
	if code != 0 {
		t.Fatalf("rollout with lifecycle hooks: exit %d, want 0\n%s", code, stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(held[ecsapi.ScaleOut]) == 0 || len(held[ecsapi.ScaleIn]) == 0 {
		t.Fatalf("the hooks held %v: want a launch and a removal held (the scenario did not exercise them)", held)
	}
	// The rollout said which old instance a scale-in hook held, in the
	// lifecycle state ESS answered for it.
	said := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var ev struct{ Event, Instance, Message string }
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("--json line %q: %v", line, err)
		}
		if ev.Event == "waiting" && strings.Contains(ev.Message, ecsapi.RemovingWait) {
			said[ev.Instance] = true
		}
	}
	for _, id := range held[ecsapi.ScaleIn] {
		if !contains(old, id) {
			t.Errorf("the scale-in hook held %s, not an old instance (old: %v)", id, old)
		}
	}
	if !said[held[ecsapi.ScaleIn][0]] {
		t.Errorf("no waiting event names %s in %s:\n%s", held[ecsapi.ScaleIn][0], ecsapi.RemovingWait, stdout)
	}
	now := s.instanceIDs(t)
	if len(now) != 2 || contains(now, old[0]) || contains(now, old[1]) {
		t.Errorf("instances %v after the rollout, want 2 new ones", now)
	}
	for _, id := range held[ecsapi.ScaleOut] {
		if !contains(now, id) {
			t.Errorf("%s, held by the scale-out hook and then completed with CONTINUE, is not in the group: %v", id, now)
		}
	}
	s.serving(t, now, roBuildB, ud)
}

// killedRepair: a repair of a group at MinSize lowers MinSize while the
// replacement launches, and is killed right after (ModifyScalingGroup
// MinSize seen by the emulator). The next repair (--break-lock: the killed
// run's lock is still there) puts MinSize back before anything else and
// ends with the group's MinSize, desired capacity and no drover tag as
// they were, the frozen instance replaced.
func (e *rolloutEnv) killedRepair(t *testing.T) {
	s, old := e.newScenario(t, "killedrepair")
	frozen := old[0]
	e.standins.Instance(frozen).Freeze()
	waitFor(t, "the node lifecycle controller to mark "+frozen+"'s Node Ready=Unknown", 3*time.Minute, func() error {
		if n := s.node(t, frozen); n == nil || ready(n) {
			return errNotYet
		}
		return nil
	})
	time.Sleep(21 * time.Second) // past --after
	args := []string{"--repair", "--after", "20s", "--ready-timeout", "60s"}
	out := s.killAfter(t, args, "the repair did not lower MinSize", func(c ecsapi.Call) bool {
		return c.Product == "ess" && c.Action == "ModifyScalingGroup" && c.Params.Get("ScalingGroupId") == s.group && c.Params.Get("MinSize") == "1"
	})
	t.Logf("killed drover rollout --repair after it lowered MinSize; its output:\n%s", out)
	if g := s.scalingGroup(t); g.MinSize != 1 {
		t.Fatalf("setup: MinSize %d after the kill, want the repair's 1", g.MinSize)
	}
	stdout, stderr, code := s.rollout(t, append(args, "--break-lock")...)
	if code != 0 {
		t.Errorf("repair after the killed one: exit %d, want 0\n%s%s", code, stdout, stderr)
	}
	if g := s.scalingGroup(t); g.MinSize != 2 || g.DesiredCapacity != 2 || g.MaxSize != 3 {
		t.Errorf("after the second repair: MinSize %d, desired %d, MaxSize %d; want 2, 2, 3", g.MinSize, g.DesiredCapacity, g.MaxSize)
	}
	if tags := s.droverTags(t); len(tags) != 0 {
		t.Errorf("drover tags left on the group: %v", tags)
	}
	if now := s.instanceIDs(t); len(now) != 2 || contains(now, frozen) {
		t.Errorf("instances %v, want two, %s replaced", now, frozen)
	}
}
