//go:build integration

package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/requests"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ess"

	"github.com/drover-os/drover/agent/userdata"
	"github.com/drover-os/drover/harness/ecsapi"
)

// Scenarios of issue 35: what a real group holds besides the instances it
// launched, and more than one drover acting on it.

// skippedStates: a Standby, a Protected and an attached instance count in
// the group's desired capacity and are left alone; the one other instance
// is replaced and MaxSize comes back after the surge.
func (e *rolloutEnv) skippedStates(t *testing.T) {
	s, old := e.newScenarioWith(t, "skipped", ecsapi.ScalingGroup{MinSize: 2, MaxSize: 4, DesiredCapacity: 3}, 3)
	ud, err := userdata.Render(s.spec("a", e.cluster.BootstrapToken()))
	if err != nil {
		t.Fatal(err)
	}
	standby, protected, plain := old[0], old[1], old[2]
	s.waitIdle(t)
	es := ess.CreateEnterStandbyRequest()
	es.ScalingGroupId, es.InstanceId = s.group, &[]string{standby}
	if _, err := e.ess.EnterStandby(es); err != nil {
		t.Fatal(err)
	}
	sp := ess.CreateSetInstancesProtectionRequest()
	sp.ScalingGroupId, sp.InstanceId, sp.ProtectedFromScaleIn = s.group, &[]string{protected}, requests.NewBoolean(true)
	if _, err := e.ess.SetInstancesProtection(sp); err != nil {
		t.Fatal(err)
	}
	attached, err := e.srv.RunInstance(context.Background(), s.template, "1")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the loose instance's Node Ready", time.Minute, func() error {
		if n := s.node(t, attached); n == nil || !ready(n) {
			return errNotYet
		}
		return nil
	})
	s.waitIdle(t)
	ai := ess.CreateAttachInstancesRequest()
	ai.ScalingGroupId, ai.InstanceId = s.group, &[]string{attached}
	if _, err := e.ess.AttachInstances(ai); err != nil {
		t.Fatal(err)
	}
	if g := s.scalingGroup(t); g.DesiredCapacity != 4 || g.MaxSize != 4 {
		t.Fatalf("setup: desired %d, MaxSize %d; want 4 and 4", g.DesiredCapacity, g.MaxSize)
	}

	sm := s.sample()
	stdout, stderr, code := s.rollout(t, "--image", e.imageB, "--userdata", s.pool, "--ready-timeout", "30s")
	sm.finish(t)
	if code != 0 {
		t.Errorf("rollout exit %d, want 0", code)
	}
	for id, why := range map[string]string{standby: "Standby", protected: "Protected", attached: "Attached"} {
		if !strings.Contains(stdout, "skip "+id) || !strings.Contains(stdout, why) {
			t.Errorf("the plan does not list %s as skipped (%s):\n%s", id, why, stdout)
		}
	}
	got := map[string]ess.ScalingInstance{}
	var fresh []string
	for _, in := range s.instances(t) {
		got[in.InstanceId] = in
		if !contains(old, in.InstanceId) && in.InstanceId != attached {
			fresh = append(fresh, in.InstanceId)
		}
	}
	if got[standby].LifecycleState != "Standby" || got[protected].LifecycleState != "Protected" ||
		got[attached].LifecycleState != "InService" || got[attached].CreationType != "Attached" {
		t.Errorf("the skipped instances: %+v", got)
	}
	if _, ok := got[plain]; ok || len(fresh) != 1 || len(got) != 4 {
		t.Errorf("instances %v: want %s replaced by one new instance, 4 in all", got, plain)
	}
	s.serving(t, fresh, roBuildB, ud)
	s.serving(t, []string{attached}, roBuildA, ud)
	if g := s.scalingGroup(t); g.DesiredCapacity != 4 || g.MaxSize != 4 {
		t.Errorf("after the rollout: desired %d, MaxSize %d; want 4 and 4 again\n%s", g.DesiredCapacity, g.MaxSize, stderr)
	}
	if sm.maxIns > 5 {
		t.Errorf("as many as %d instances, want ≤ 5 (surge 1)", sm.maxIns)
	}
}

// locked: while a rollout runs, a second one (--resume) and a repair are
// refused, each naming the holder of the group's lock and until when; the
// lock is gone when the rollout ends.
func (e *rolloutEnv) locked(t *testing.T) {
	s, old := e.newScenario(t, "locked")
	ud, err := userdata.Render(s.spec("a", e.cluster.BootstrapToken()))
	if err != nil {
		t.Fatal(err)
	}
	cmd := s.command(t, "--image", e.imageB, "--userdata", s.pool, "--ready-timeout", "60s", "--poll-interval", "3s")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	waitFor(t, "the first rollout to switch the group", time.Minute, func() error {
		if s.scalingGroup(t).LaunchTemplateVersion != "2" {
			return errNotYet
		}
		return nil
	})
	holder := s.lockTags(t)
	if len(holder) != 1 {
		t.Errorf("lock tags on the group while a rollout runs: %v, want one", holder)
	}
	for _, args := range [][]string{{"--resume"}, {"--repair", "--after", "10m"}} {
		stdout, stderr, code := s.rollout(t, args...)
		msg := stdout + stderr
		if code != 1 || !strings.Contains(msg, "locked") {
			t.Errorf("drover rollout %v during a rollout: exit %d; want 1 and a refusal naming the lock's holder:\n%s", args, code, msg)
		}
		for _, v := range holder {
			for _, f := range strings.Fields(v) { // owner=…, run=…, until=…
				if _, val, _ := strings.Cut(f, "="); !strings.Contains(msg, val) {
					t.Errorf("drover rollout %v: the refusal does not name %s:\n%s", args, f, msg)
				}
			}
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the first rollout: %v\n%s", err, out.String())
		}
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("the first rollout did not finish\n%s", out.String())
	}
	t.Logf("the first rollout:\n%s", out.String())
	if tags := s.lockTags(t); len(tags) != 0 {
		t.Errorf("lock tags left after the rollout: %v", tags)
	}
	now := s.instanceIDs(t)
	if len(now) != 2 || contains(now, old[0]) || contains(now, old[1]) {
		t.Errorf("instances %v after the rollout, want 2 new ones", now)
	}
	s.serving(t, now, roBuildB, ud)
}

// killedBeforeMaxSize: a rollout that raised MaxSize for its surge is
// killed right after its last RemoveInstances; --resume puts MaxSize back
// although nothing is left to replace.
func (e *rolloutEnv) killedBeforeMaxSize(t *testing.T) {
	s, old := e.newScenarioWith(t, "killed", ecsapi.ScalingGroup{MinSize: 2, MaxSize: 2, DesiredCapacity: 2}, 2)
	args := []string{"--image", e.imageB, "--userdata", s.pool, "--ready-timeout", "60s"}
	var mu sync.Mutex
	removed := map[string]bool{}
	out := s.killAfter(t, args, "no RemoveInstances of both old instances", func(c ecsapi.Call) bool {
		if c.Product != "ess" || c.Action != "RemoveInstances" || c.Params.Get("ScalingGroupId") != s.group {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		for k, v := range c.Params {
			if strings.HasPrefix(k, "InstanceId.") {
				removed[v[0]] = true
			}
		}
		return removed[old[0]] && removed[old[1]]
	})
	t.Logf("killed drover rollout after its last RemoveInstances; its output:\n%s", out)
	s.waitIdle(t)
	if g := s.scalingGroup(t); g.MaxSize != 3 {
		t.Fatalf("setup: MaxSize %d after the kill, want the surge's 3", g.MaxSize)
	}

	// The killed run's lock is still there: --resume names it; the dead
	// holder's lock is broken with --break-lock.
	dead := s.lockTags(t)
	stdout, stderr, code := s.rollout(t, append(args, "--resume")...)
	if g := s.scalingGroup(t); len(dead) != 1 || code != 1 || !strings.Contains(stdout+stderr, "--break-lock") || g.MaxSize != 3 {
		t.Errorf("--resume over the killed run's lock %v: exit %d, MaxSize %d; want 1, a hint at --break-lock and no change\n%s%s", dead, code, g.MaxSize, stdout, stderr)
	}
	stdout, stderr, code = s.rollout(t, append(args, "--resume", "--break-lock")...)
	if g := s.scalingGroup(t); code != 0 || g.MaxSize != 2 || g.DesiredCapacity != 2 {
		t.Errorf("--resume: exit %d, MaxSize %d, desired %d; want 0, 2, 2\n%s%s", code, g.MaxSize, g.DesiredCapacity, stdout, stderr)
	}
	if !strings.Contains(stdout+stderr, "MaxSize 2 again") {
		t.Errorf("--resume does not say it restored MaxSize 2:\n%s%s", stdout, stderr)
	}
	if tags := s.lockTags(t); len(tags) != 0 {
		t.Errorf("lock tags left: %v", tags)
	}
}

// noDesiredCapacity: a group created without a desired capacity is refused
// before anything changes.
func (e *rolloutEnv) noDesiredCapacity(t *testing.T) {
	s, old := e.newScenarioWith(t, "nodesired", ecsapi.ScalingGroup{MinSize: 2, MaxSize: 3, NoDesiredCapacity: true}, 2)
	s.waitIdle(t)
	acts := len(s.activities(t))
	stdout, stderr, code := s.rollout(t, "--image", e.imageB, "--userdata", s.pool, "--ready-timeout", "30s")
	if code != 1 || !strings.Contains(stdout+stderr, "desired capacity") {
		t.Errorf("rollout of a group without a desired capacity: exit %d; want 1 and a refusal naming the desired capacity\n%s%s", code, stdout, stderr)
	}
	if g := s.scalingGroup(t); len(s.versions(t)) != 1 || g.LaunchTemplateVersion != "1" || len(s.activities(t)) != acts ||
		strings.Join(s.instanceIDs(t), " ") != strings.Join(old, " ") {
		t.Errorf("the refused rollout changed the group: %d versions, group on %q, %d activities (were %d), instances %v (were %v)",
			len(s.versions(t)), g.LaunchTemplateVersion, len(s.activities(t)), acts, s.instanceIDs(t), old)
	}
}

// stockOut: the group's zone is out of stock when the rollout scales out.
// The rollout reads the failed scaling activity and stops at once with
// ESS's reason (not a timeout), the group launching from its old version
// again with its desired capacity and MaxSize back and no drover tag left,
// so ESS stops trying. Once the stock is back, a re-run rolls the group.
func (e *rolloutEnv) stockOut(t *testing.T) {
	const zone = roRegion + "-z" // a zone of its own: the scenarios run in parallel
	s, old := e.newScenarioWith(t, "stockout", ecsapi.ScalingGroup{ZoneID: zone, MinSize: 2, MaxSize: 2, DesiredCapacity: 2}, 2)
	ud, err := userdata.Render(s.spec("a", e.cluster.BootstrapToken()))
	if err != nil {
		t.Fatal(err)
	}
	s.waitIdle(t)
	e.srv.StockOut(zone, true)
	args := []string{"--image", e.imageB, "--userdata", s.pool, "--ready-timeout", "2m"}
	start := time.Now()
	stdout, stderr, code := s.rollout(t, args...)
	took := time.Since(start)
	out := stdout + stderr
	if code != 1 || !strings.Contains(out, ecsapi.NoStock) || !strings.Contains(out, "sold out in the specified zone") || !strings.Contains(out, zone) {
		t.Errorf("rollout into a zone out of stock: exit %d; want 1 and ESS's reason (%s in %s)", code, ecsapi.NoStock, zone)
	}
	if took > time.Minute || strings.Contains(out, "after 2m") {
		t.Errorf("the rollout stopped after %s: it waited for --ready-timeout instead of reading the failed activity", took)
	}
	s.waitIdle(t)
	if g := s.scalingGroup(t); g.LaunchTemplateVersion != "1" || g.MaxSize != 2 || g.DesiredCapacity != 2 {
		t.Errorf("after the failed scale-out: group on version %q, MaxSize %d, desired %d; want 1, 2, 2", g.LaunchTemplateVersion, g.MaxSize, g.DesiredCapacity)
	}
	if tags := s.droverTags(t); len(tags) != 0 {
		t.Errorf("drover tags left on the group: %v", tags)
	}
	if ids := s.instanceIDs(t); strings.Join(ids, " ") != strings.Join(old, " ") {
		t.Errorf("instances %v, want the old %v untouched", ids, old)
	}
	// What stops ESS's retries is the desired capacity back at the
	// instances' number (checked above); TestRollout's emulator retries a
	// failed launch after 1 s, so a group still wanting more instances
	// shows a new activity within these 2 s.
	acts := len(s.activities(t))
	time.Sleep(2 * time.Second)
	if n := len(s.activities(t)); n != acts {
		t.Errorf("%d scaling activities 2 s after the rollout stopped (were %d): ESS is still trying to launch", n, acts)
	}
	s.serving(t, old, roBuildA, ud)

	e.srv.StockOut(zone, false)
	if _, _, code := s.rollout(t, args...); code != 0 {
		t.Fatalf("re-run once the stock is back: exit %d, want 0", code)
	}
	now := s.instanceIDs(t)
	if len(now) != 2 || contains(now, old[0]) || contains(now, old[1]) {
		t.Errorf("instances %v after the re-run, want 2 new ones", now)
	}
	s.serving(t, now, roBuildB, ud)
}

// droverTags are the group's tags whose key starts with drover:.
func (s *scenario) droverTags(t *testing.T) map[string]string {
	t.Helper()
	req := ess.CreateListTagResourcesRequest()
	req.ResourceType, req.ResourceId = "scalinggroup", &[]string{s.group}
	resp, err := s.e.ess.ListTagResources(req)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, tr := range resp.TagResources.TagResource {
		if strings.HasPrefix(tr.TagKey, "drover:") {
			out[tr.TagKey] = tr.TagValue
		}
	}
	return out
}

type notYet struct{}

func (notYet) Error() string { return "not yet" }

var errNotYet = notYet{}

// waitIdle waits until the group has no scaling activity in progress.
func (s *scenario) waitIdle(t *testing.T) {
	t.Helper()
	waitFor(t, "no scaling activity in progress", time.Minute, func() error {
		for _, a := range s.activities(t) {
			if a.StatusCode == "InProgress" {
				return errNotYet
			}
		}
		return nil
	})
}

// lockTags are the group's drover:lock:… tags, key → value.
func (s *scenario) lockTags(t *testing.T) map[string]string {
	t.Helper()
	req := ess.CreateListTagResourcesRequest()
	req.ResourceType, req.ResourceId = "scalinggroup", &[]string{s.group}
	resp, err := s.e.ess.ListTagResources(req)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, tr := range resp.TagResources.TagResource {
		if strings.HasPrefix(tr.TagKey, "drover:lock:") {
			out[tr.TagKey] = tr.TagValue
		}
	}
	return out
}

// killAfter runs drover rollout with args and kills it right after the
// emulator answered the first call match accepts (match may be called
// from several goroutines at once); after two minutes without one it
// kills it and fails with what. It returns the killed run's output.
func (s *scenario) killAfter(t *testing.T, args []string, what string, match func(c ecsapi.Call) bool) string {
	t.Helper()
	cmd := s.command(t, args...)
	var out bytes.Buffer // one writer for both: exec writes it from one goroutine at a time
	cmd.Stdout, cmd.Stderr = &out, &out
	killed := make(chan struct{})
	var once sync.Once
	defer s.e.srv.AfterCall(func(c ecsapi.Call) {
		if match(c) {
			once.Do(func() { _ = cmd.Process.Kill(); close(killed) })
		}
	})()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-killed:
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("%s\n%s", what, out.String())
	}
	_ = cmd.Wait()
	return out.String()
}

// killedAtEachStep: a rollout of a group at its MaxSize (so the surge
// raises it) is killed right after each step the emulator sees, one group
// per step: the new launch template version made, the group switched to
// it, the surge recorded (tag drover:surge), MaxSize raised, the scale-out,
// the first of two removals (KilledBeforeMaxSize kills after the last).
// Each time --resume (--break-lock: the killed run's lock is still there)
// finishes the rollout: every old instance removed once, two new ones
// serving, MaxSize back at 2 and no drover tag left.
func (e *rolloutEnv) killedAtEachStep(t *testing.T) {
	for _, step := range []struct {
		name string
		at   func(s *scenario, c ecsapi.Call) bool
	}{
		{"NewVersion", func(s *scenario, c ecsapi.Call) bool {
			return c.Action == "CreateLaunchTemplateVersion" && c.Params.Get("LaunchTemplateId") == s.template
		}},
		{"Switched", func(s *scenario, c ecsapi.Call) bool {
			return c.Action == "ModifyScalingGroup" && c.Params.Get("LaunchTemplateVersion") != ""
		}},
		{"SurgeRecorded", func(s *scenario, c ecsapi.Call) bool {
			return c.Action == "TagResources" && c.Params.Get("Tag.1.Key") == "drover:surge"
		}},
		{"MaxSizeRaised", func(s *scenario, c ecsapi.Call) bool {
			return c.Action == "ModifyScalingGroup" && c.Params.Get("MaxSize") == "3"
		}},
		{"ScaledOut", func(s *scenario, c ecsapi.Call) bool { return c.Action == "ScaleWithAdjustment" }},
		{"FirstRemoval", func(s *scenario, c ecsapi.Call) bool { return c.Action == "RemoveInstances" }},
	} {
		t.Run(step.name, func(t *testing.T) {
			t.Parallel()
			s, old := e.newScenarioWith(t, "killed-"+strings.ToLower(step.name), ecsapi.ScalingGroup{MinSize: 2, MaxSize: 2, DesiredCapacity: 2}, 2)
			ud, err := userdata.Render(s.spec("a", e.cluster.BootstrapToken()))
			if err != nil {
				t.Fatal(err)
			}
			args := []string{"--image", e.imageB, "--userdata", s.pool, "--ready-timeout", "60s"}
			out := s.killAfter(t, args, "the rollout never took the step "+step.name, func(c ecsapi.Call) bool {
				return (c.Params.Get("ScalingGroupId") == s.group || c.Params.Get("ResourceId.1") == s.group || c.Product == "ecs") && step.at(s, c)
			})
			t.Logf("killed drover rollout after the step %s; its output:\n%s", step.name, out)
			s.waitIdle(t)

			stdout, stderr, code := s.rollout(t, append(args, "--resume", "--break-lock")...)
			if code != 0 {
				t.Fatalf("--resume after a kill at %s: exit %d, want 0\n%s%s", step.name, code, stdout, stderr)
			}
			destroyed := map[string]int{}
			for _, a := range s.activities(t) {
				for _, id := range a.DestroyedInstances.DestroyedInstance {
					destroyed[id]++
				}
			}
			if len(destroyed) != 2 || destroyed[old[0]] != 1 || destroyed[old[1]] != 1 {
				t.Errorf("removed %v, want each old instance %v once and nothing else", destroyed, old)
			}
			now := s.instanceIDs(t)
			if len(now) != 2 || contains(now, old[0]) || contains(now, old[1]) {
				t.Errorf("instances %v after --resume, want 2 new ones", now)
			}
			s.serving(t, now, roBuildB, ud)
			if g := s.scalingGroup(t); g.MaxSize != 2 || g.MinSize != 2 || g.DesiredCapacity != 2 || len(s.droverTags(t)) != 0 {
				t.Errorf("after --resume: MaxSize %d, MinSize %d, desired %d, drover tags %v; want 2, 2, 2 and none", g.MaxSize, g.MinSize, g.DesiredCapacity, s.droverTags(t))
			}
		})
	}
}
