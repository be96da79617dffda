package rollout

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// withSkipped adds to w's group a Standby, a Protected and an attached
// instance, each with a Ready Node, counted in its desired capacity as ESS
// counts them; MaxSize stays at the desired capacity.
func withSkipped(w *world, d Desired) {
	for _, in := range []Instance{
		{ID: "i-standby", State: Standby, TemplateID: "lt-1", TemplateVersion: "1"},
		{ID: "i-protected", State: Protected, TemplateID: "lt-1", TemplateVersion: "1"},
		{ID: "i-attached", State: InService, CreationType: Attached},
	} {
		w.cloud.Insts = append(w.cloud.Insts, in)
		w.cluster.Put(readyNode(in.ID, d))
	}
	w.cloud.G.DesiredCapacity += 3
	w.cloud.G.MaxSize += 3
}

func TestRunSkipsStandbyProtectedAndAttached(t *testing.T) {
	ud := userData(t, "abcdef.0123456789abcdef", nil)
	a, b := desired(t, "m-a", "build-a", ud), desired(t, "m-b", "build-b", ud)
	w := newWorld(t, 2, a)
	w.builds["m-b"] = "build-b"
	withSkipped(w, a)
	if err := w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 1, Surge: 1}, false); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"CreateTemplateVersion from 1 m-b", "SetTemplateVersion 2",
		"SetMaxSize 6", "ScaleOut 1", "Remove i-old1 true",
		"ScaleOut 1", "Remove i-old2 true", "SetMaxSize 5",
	}
	if got := w.cloud.Writes(); !slices.Equal(got, want) {
		t.Errorf("cloud calls:\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	var left []string
	for _, in := range w.instances() {
		if !strings.HasPrefix(in.ID, "i-new") {
			left = append(left, in.ID+" "+in.State)
		}
	}
	if strings.Join(left, ",") != "i-standby Standby,i-protected Protected,i-attached InService" {
		t.Errorf("instances left: %v", left)
	}
	if g := w.cloud.G; g.DesiredCapacity != 5 || g.MaxSize != 5 {
		t.Errorf("group %+v, want desired 5 and MaxSize 5 again", g)
	}
	if v := w.cloud.Versions[1]; !strings.Contains(v.Description, "size=5 max=5") {
		t.Errorf("stamp %q: the size counts the skipped instances", v.Description)
	}
	plan := w.messages(EventPlan)
	for _, s := range []string{"skip i-standby (node node-i-standby): in Standby", "skip i-protected (node node-i-protected): Protected from scale-in",
		"skip i-attached (node node-i-attached): attached to the group by hand (CreationType Attached)"} {
		if !strings.Contains(plan, s) {
			t.Errorf("plan lacks %q:\n%s", s, plan)
		}
	}
	// Nothing is left to do: the skipped instances do not make a rollout.
	before := len(w.cloud.Writes())
	if err := w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 1, Surge: 1}, false); err != nil || len(w.cloud.Writes()) != before {
		t.Errorf("re-run: %v, wrote %v", err, w.cloud.Writes()[before:])
	}
}

func TestRepairDoesNotJudgeAttached(t *testing.T) {
	a := desired(t, "m-a", "build-a", userData(t, "abcdef.0123456789abcdef", nil))
	st := State{Region: region, Group: group("1", 2), Versions: []TemplateVersion{version(1, a, false)},
		Instances: []Instance{{ID: "i-attached", State: InService, CreationType: Attached}, inst("i-1", "1")},
		Nodes:     []Node{readyNode("i-attached", a), readyNode("i-1", a)}}
	st.Nodes[0].Conditions[0].Status = "False"
	rp := PlanRepair(st, time.Now(), time.Minute)
	if len(rp.Replace) != 0 || !strings.Contains(rp.Text(time.Minute), "i-attached: attached to the group by hand") {
		t.Errorf("repair plan %+v:\n%s", rp.Replace, rp.Text(time.Minute))
	}
}

func TestNoDesiredCapacityIsRefused(t *testing.T) {
	ud := userData(t, "abcdef.0123456789abcdef", nil)
	a, b := desired(t, "m-a", "build-a", ud), desired(t, "m-b", "build-b", ud)
	w := newWorld(t, 2, a)
	w.cloud.G.NoDesiredCapacity, w.cloud.G.DesiredCapacity = true, 0
	for _, run := range map[string]func() error{
		"rollout": func() error {
			return w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 1, Surge: 1}, false)
		},
		"repair": func() error {
			return w.env.Repair(context.Background(), "asg-1", time.Minute, Options{MaxUnavailable: 1, Surge: 1})
		},
	} {
		if err := run(); err == nil || !strings.Contains(err.Error(), "has no desired capacity") {
			t.Errorf("err %v", err)
		}
	}
	if len(w.cloud.Writes())+len(w.cloud.TagWrites()) != 0 {
		t.Errorf("wrote %v %v", w.cloud.Writes(), w.cloud.TagWrites())
	}
}

// surgeLeft is a group a killed rollout left after its last removal: on
// the new version, MaxSize raised to 3 for the surge and recorded.
func surgeLeft(t *testing.T) (*world, Desired) {
	ud := userData(t, "abcdef.0123456789abcdef", nil)
	a, b := desired(t, "m-a", "build-a", ud), desired(t, "m-b", "build-b", ud)
	w := newWorld(t, 2, a)
	w.builds["m-b"] = "build-b"
	w.cloud.Versions = append(w.cloud.Versions, version(2, b, true)) // size=2 max=2
	w.cloud.G.TemplateVersion, w.cloud.G.MaxSize = "2", 3
	w.cloud.Insts = []Instance{inst("i-new1", "2"), inst("i-new2", "2")}
	w.cluster = NewFakeCluster(readyNode("i-new1", b), readyNode("i-new2", b))
	w.env.Cluster = w.cluster
	w.cloud.Tags = map[string]string{SurgeTag: "max=2 surge=3"}
	return w, b
}

func TestRerunRestoresMaxSizeLeftBySurge(t *testing.T) {
	for _, resume := range []bool{false, true} {
		w, b := surgeLeft(t)
		if err := w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 1, Surge: 1}, resume); err != nil {
			t.Fatal(err)
		}
		if got := w.cloud.Writes(); !slices.Equal(got, []string{"SetMaxSize 2"}) || w.cloud.G.MaxSize != 2 {
			t.Errorf("resume %v: cloud calls %v, MaxSize %d; want MaxSize 2 again", resume, got, w.cloud.G.MaxSize)
		}
		if _, ok := w.cloud.Tags[SurgeTag]; ok || !strings.Contains(w.messages(EventGroup), "MaxSize 2 again") {
			t.Errorf("tags %v, events %s", w.cloud.Tags, w.messages(EventGroup))
		}
		if !strings.Contains(w.messages(EventPlan), "restore MaxSize 2 (now 3)") {
			t.Errorf("plan:\n%s", w.messages(EventPlan))
		}
	}
}

// restoreMax never skips without saying why.
func TestRestoreMaxSaysWhy(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(*world)
		max   int
		why   string
		kept  bool // the surge tag stays
	}{
		{"not raised by drover", func(w *world) { delete(w.cloud.Tags, SurgeTag) }, 3, "MaxSize 3 stays: above the 2 this rollout started from, but drover did not raise it", false},
		{"changed since", func(w *world) { w.cloud.G.MaxSize = 4 }, 4, "MaxSize 4 stays: drover raised it to 3 for a surge", false},
		{"surge still there", func(w *world) {
			w.cloud.Insts = append(w.cloud.Insts, inst("i-new3", "2"))
			w.cloud.G.DesiredCapacity = 3
		}, 3, "MaxSize 3 stays for now: the group wants 3 instances, more than the MaxSize 2", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, _ := surgeLeft(t)
			c.setup(w)
			if err := w.env.restoreMax(context.Background(), "asg-1", 2); err != nil {
				t.Fatal(err)
			}
			if w.cloud.G.MaxSize != c.max || len(w.cloud.Writes()) != 0 {
				t.Errorf("MaxSize %d, writes %v; want %d and none", w.cloud.G.MaxSize, w.cloud.Writes(), c.max)
			}
			if _, ok := w.cloud.Tags[SurgeTag]; ok != c.kept {
				t.Errorf("surge tag kept: %v, want %v", ok, c.kept)
			}
			if !strings.Contains(w.messages(EventWarning), c.why) {
				t.Errorf("warnings %q, want %q", w.messages(EventWarning), c.why)
			}
		})
	}
}

// A drain that times out stops the rollout with a surge instance above the
// MaxSize it started from: MaxSize stays, and says why; once a later run
// finishes, it is restored.
func TestStoppedRolloutRestoresMaxSizeWhenSafe(t *testing.T) {
	ud := userData(t, "abcdef.0123456789abcdef", nil)
	a, b := desired(t, "m-a", "build-a", ud), desired(t, "m-b", "build-b", ud)
	w := newWorld(t, 2, a)
	w.builds["m-b"] = "build-b"
	w.cluster.DrainFunc = func(ctx context.Context, _ string) error { <-ctx.Done(); return ctx.Err() }
	if err := w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 1, Surge: 1}, false); err == nil || !strings.Contains(err.Error(), "--drain-timeout") {
		t.Fatalf("err %v", err)
	}
	if g := w.cloud.G; g.MaxSize != 3 || !strings.Contains(w.messages(EventWarning), "MaxSize 3 stays for now: the group wants 3 instances") {
		t.Errorf("MaxSize %d, warnings %s", g.MaxSize, w.messages(EventWarning))
	}
	w.cluster.DrainFunc = nil
	if err := w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 1, Surge: 1}, true); err != nil {
		t.Fatal(err)
	}
	if g := w.cloud.G; g.MaxSize != 2 || g.DesiredCapacity != 2 {
		t.Errorf("after --resume: %+v", g)
	}
	// A failed instance kept for inspection holds the surge up too, and
	// that is said.
	w2 := newWorld(t, 2, a)
	w2.broken["m-b"] = true
	w2.env.KeepFailed = true
	var nr *NotReadyError
	if err := w2.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 1, Surge: 1}, false); !errors.As(err, &nr) {
		t.Fatalf("err %v", err)
	}
	if g := w2.cloud.G; g.MaxSize != 3 || !strings.Contains(w2.messages(EventWarning), "MaxSize 3 stays for now") {
		t.Errorf("kept failed instance: MaxSize %d (want 3: the instance is still there), warnings %s", g.MaxSize, w2.messages(EventWarning))
	}
}

// A ScaleOut ESS rejects (MaxSize held down by someone else: the
// adjustment changes nothing) stops the rollout at once with ESS's reason,
// instead of asking again forever or waiting out --ready-timeout.
func TestRejectedScaleOutStops(t *testing.T) {
	ud := userData(t, "abcdef.0123456789abcdef", nil)
	a, b := desired(t, "m-a", "build-a", ud), desired(t, "m-b", "build-b", ud)
	w := newWorld(t, 2, a)
	w.builds["m-b"] = "build-b"
	w.env.ReadyTimeout = time.Minute
	w.cloud.AfterSetMaxSize = func(n int) {
		if n > 2 {
			w.cloud.mu.Lock()
			w.cloud.G.MaxSize = 2 // Terraform puts it back
			w.cloud.mu.Unlock()
		}
	}
	start := time.Now()
	err := w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 1, Surge: 1}, false)
	var ae *ActivityError
	if !errors.As(err, &ae) || ae.Activity.StatusCode != ActivityRejected || !strings.Contains(err.Error(), "at its MaxSize") {
		t.Fatalf("err %v", err)
	}
	if n := strings.Count(strings.Join(w.cloud.Writes(), "\n"), "ScaleOut"); n != 1 {
		t.Errorf("%d ScaleOut calls, want 1: %v", n, w.cloud.Writes())
	}
	if g := w.cloud.G; g.TemplateVersion != "1" || g.DesiredCapacity != 2 {
		t.Errorf("group %+v, want on version 1 again with desired capacity 2", g)
	}
	if time.Since(start) > w.env.ReadyTimeout/2 {
		t.Errorf("took %s: waited instead of reading the activity", time.Since(start))
	}
}

// A ScaleOut whose activity ESS calls Successful but that leaves the
// desired capacity where it was stops the rollout after --ready-timeout
// with the group's last scaling activity, instead of asking again forever.
func TestScaleOutThatDoesNotGrowStops(t *testing.T) {
	ud := userData(t, "abcdef.0123456789abcdef", nil)
	a, b := desired(t, "m-a", "build-a", ud), desired(t, "m-b", "build-b", ud)
	w := newWorld(t, 2, a)
	w.builds["m-b"] = "build-b"
	w.cloud.AfterSetMaxSize = func(n int) {
		if n > 2 {
			w.cloud.mu.Lock()
			w.cloud.G.MaxSize = 2
			w.cloud.mu.Unlock()
		}
	}
	w.cloud.ScaleOutResult = func(int) Activity {
		return Activity{ID: "asa-7", StatusCode: ActivitySuccessful, Description: "Adjust by 1"}
	}
	start := time.Now()
	err := w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 1, Surge: 1}, false)
	if err == nil || !strings.Contains(err.Error(), "did not grow") || !strings.Contains(err.Error(), "asa-7 Successful") {
		t.Fatalf("err %v", err)
	}
	if n := strings.Count(strings.Join(w.cloud.Writes(), "\n"), "ScaleOut"); n != 1 {
		t.Errorf("%d ScaleOut calls, want 1: %v", n, w.cloud.Writes())
	}
	if time.Since(start) > 10*w.env.ReadyTimeout {
		t.Errorf("took %s", time.Since(start))
	}
}

// A repair killed after it lowered MinSize left the drover:min tag: the
// next rollout (nothing to replace) or repair (nothing to repair) puts
// MinSize back first; a MinSize changed since is left, with a warning.
func TestNextRunRestoresMinSizeLeftByRepair(t *testing.T) {
	ud := userData(t, "abcdef.0123456789abcdef", nil)
	a := desired(t, "m-a", "build-a", ud)
	for _, c := range []struct {
		name    string
		run     func(w *world) error
		minNow  int
		wantMin int
		writes  []string
	}{
		{"rollout", func(w *world) error {
			return w.env.Run(context.Background(), "asg-1", a, Options{MaxUnavailable: 1, Surge: 1}, false)
		}, 1, 2, []string{"SetMinSize 2"}},
		{"repair", func(w *world) error {
			return w.env.Repair(context.Background(), "asg-1", time.Minute, Options{MaxUnavailable: 1, Surge: 1})
		}, 1, 2, []string{"SetMinSize 2"}},
		{"changed since", func(w *world) error {
			return w.env.Repair(context.Background(), "asg-1", time.Minute, Options{MaxUnavailable: 1, Surge: 1})
		}, 0, 0, nil},
	} {
		w := newWorld(t, 2, a)
		w.cloud.G.MinSize = c.minNow
		w.cloud.Tags = map[string]string{MinTag: "min=2 lowered=1"}
		if err := c.run(w); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := w.cloud.Writes(); !slices.Equal(got, c.writes) || w.cloud.G.MinSize != c.wantMin {
			t.Errorf("%s: cloud calls %v, MinSize %d; want %v, %d", c.name, got, w.cloud.G.MinSize, c.writes, c.wantMin)
		}
		if _, ok := w.cloud.Tags[MinTag]; ok {
			t.Errorf("%s: tag %s left: %v", c.name, MinTag, w.cloud.Tags)
		}
		if c.wantMin == 0 && !strings.Contains(w.messages(EventWarning), "MinSize 0 stays") {
			t.Errorf("%s: warnings %s", c.name, w.messages(EventWarning))
		}
	}
}
