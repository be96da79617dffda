package rollout

import (
	"context"
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
	if err := w.env.Run(context.Background(), "asg-1", b, Options{1, 1}, false); err != nil || len(w.cloud.Writes()) != before {
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
		"rollout": func() error { return w.env.Run(context.Background(), "asg-1", b, Options{1, 1}, false) },
		"repair":  func() error { return w.env.Repair(context.Background(), "asg-1", time.Minute, Options{1, 1}) },
	} {
		if err := run(); err == nil || !strings.Contains(err.Error(), "has no desired capacity") {
			t.Errorf("err %v", err)
		}
	}
	if len(w.cloud.Writes()) != 0 {
		t.Errorf("wrote %v", w.cloud.Writes())
	}
}
