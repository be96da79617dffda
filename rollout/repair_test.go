package rollout

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPlanRepair(t *testing.T) {
	now := time.Unix(100000, 0)
	a := desired(t, "m-a", "build-a", userData(t, "abcdef.0123456789abcdef", nil))
	node := func(id string, conds ...Condition) Node {
		n := readyNode(id, a)
		n.Conditions = conds
		return n
	}
	old, recent := now.Add(-11*time.Minute), now.Add(-9*time.Minute)
	st := State{Region: region, Group: group("1", 6), Instances: []Instance{inst("i-1", "1"), inst("i-2", "1"), inst("i-3", "1"), inst("i-4", "1"), inst("i-5", "1"), {ID: "i-6", State: Pending}, inst("i-7", "1"), inst("i-8", "1")},
		Nodes: []Node{
			node("i-1", Condition{Type: "Ready", Status: "True", Since: old}),
			node("i-2", Condition{Type: "Ready", Status: "Unknown", Reason: "NodeStatusUnknown", Since: old}),
			node("i-3", Condition{Type: "Ready", Status: "False", Since: recent}),
			node("i-4", Condition{Type: "Ready", Status: "True", Since: old}, Condition{Type: "ReadonlyFilesystem", Status: "True", Reason: "FilesystemIsReadOnly", Since: old}),
			node("i-5", Condition{Type: "Ready", Status: "True", Since: old}, Condition{Type: "DroverConfigDrift", Status: "True", Since: recent}),
			node("i-7", Condition{Type: "Ready", Status: "True", Since: old}, Condition{Type: "FrequentContainerdRestart", Status: "True", Reason: "FrequentContainerdRestart", Since: old}),
			node("i-8", Condition{Type: "Ready", Status: "True", Since: old}, Condition{Type: "NICLinkDown", Status: "True", Since: recent}),
		}}
	rp := PlanRepair(st, now, 10*time.Minute)
	if ids(rp.Replace) != "i-2,i-4,i-7" || rp.Healthy != 4 {
		t.Fatalf("replace %s healthy %d", ids(rp.Replace), rp.Healthy)
	}
	if !strings.Contains(rp.Replace[0].Reason, "NotReady (Ready=Unknown NodeStatusUnknown) for 11m0s") || !strings.Contains(rp.Replace[1].Reason, "ReadonlyFilesystem=True (FilesystemIsReadOnly") {
		t.Errorf("reasons %v", rp.Replace)
	}
	if len(rp.Notes) != 1 || !strings.Contains(rp.Notes[0], "i-6: Pending") {
		t.Errorf("notes %v", rp.Notes)
	}
	// Budget: i-2 is down already; i-4 still serves.
	if why := repairBudget(st, rp.Replace[0], 1); why != "" {
		t.Errorf("a NotReady node: %s", why)
	}
	if why := repairBudget(st, rp.Replace[1], 3); !strings.Contains(why, "would exceed --max-unavailable 3") {
		t.Errorf("i-2, i-3, i-6 down and i-4 drained: %q", why)
	}
	if why := repairBudget(st, rp.Replace[1], 4); why != "" {
		t.Errorf("budget 4: %s", why)
	}
	// A healthy group is left alone.
	st.Nodes = st.Nodes[:1]
	st.Instances = st.Instances[:1]
	if rp := PlanRepair(st, now, 10*time.Minute); len(rp.Replace) != 0 || !strings.Contains(rp.Text(10*time.Minute), "nothing to repair") {
		t.Errorf("healthy: %+v", rp)
	}
}

func TestRepair(t *testing.T) {
	a := desired(t, "m-a", "build-a", userData(t, "abcdef.0123456789abcdef", nil))
	w := newWorld(t, 3, a)
	w.cloud.BeforeRemove = nil
	w.cluster.OnCordon = nil
	now := time.Now()
	w.cluster.Update("node-i-old1", func(n *Node) {
		n.Conditions = []Condition{{Type: "Ready", Status: "Unknown", Reason: "NodeStatusUnknown", Since: now.Add(-time.Hour)}}
	})
	w.cluster.Update("node-i-old3", func(n *Node) {
		n.Conditions = append(n.Conditions, Condition{Type: "DroverConfigDrift", Status: "True", Reason: "LocalChange", Since: now.Add(-time.Hour)})
	})
	if err := w.env.Repair(context.Background(), "asg-1", 10*time.Minute, Options{MaxUnavailable: 1, Surge: 1}); err != nil {
		t.Fatal(err)
	}
	want := []string{"Remove i-old1 false", "Remove i-old3 false"}
	if got := w.cloud.Writes(); !slices.Equal(got, want) {
		t.Errorf("cloud calls %v, want %v", got, want)
	}
	// The NotReady node is not drained; the drifted one, still Ready, is.
	wantK := []string{"DeleteNode node-i-old1", "Cordon node-i-old3", "Drain node-i-old3 true", "DeleteNode node-i-old3"}
	if got := w.cluster.Writes(); !slices.Equal(got, wantK) {
		t.Errorf("cluster calls %v, want %v", got, wantK)
	}
	if n := len(w.instances()); n != 3 || w.cloud.G.DesiredCapacity != 3 {
		t.Errorf("%d instances, desired %d", n, w.cloud.G.DesiredCapacity)
	}
	// Healthy now: left alone.
	before := len(w.cloud.Writes())
	if err := w.env.Repair(context.Background(), "asg-1", 10*time.Minute, Options{MaxUnavailable: 1, Surge: 1}); err != nil || len(w.cloud.Writes()) != before {
		t.Errorf("healthy group: %v %v", err, w.cloud.Writes())
	}
	if !strings.Contains(w.messages(EventDone), "nothing to repair") {
		t.Errorf("done: %s", w.messages(EventDone))
	}
}

func TestRepairReplacementNotReady(t *testing.T) {
	a := desired(t, "m-a", "build-a", userData(t, "abcdef.0123456789abcdef", nil))
	w := newWorld(t, 2, a)
	w.cloud.BeforeRemove = nil
	w.broken["m-a"] = true // the replacement never joins
	w.cluster.Update("node-i-old1", func(n *Node) {
		n.Conditions = []Condition{{Type: "Ready", Status: "False", Since: time.Now().Add(-time.Hour)}}
	})
	err := w.env.Repair(context.Background(), "asg-1", 10*time.Minute, Options{MaxUnavailable: 1, Surge: 1})
	if err == nil || !strings.Contains(w.messages(EventFailed), "the node file is refused") || !strings.Contains(w.messages(EventFailed), "stays in the group") {
		t.Errorf("err %v, report %s", err, w.messages(EventFailed))
	}
}

// TestRepairAtMinSize: ESS refuses RemoveInstances below MinSize even
// without lowering the desired capacity, so a group at its MinSize is
// repaired with MinSize lowered by one until the replacement is Ready.
func TestRepairAtMinSize(t *testing.T) {
	a := desired(t, "m-a", "build-a", userData(t, "abcdef.0123456789abcdef", nil))
	w := newWorld(t, 2, a)
	w.cloud.BeforeRemove = nil
	w.cloud.G.MinSize = 2
	w.cluster.Update("node-i-old1", func(n *Node) {
		n.Conditions = []Condition{{Type: "Ready", Status: "Unknown", Reason: "NodeStatusUnknown", Since: time.Now().Add(-time.Hour)}}
	})
	if err := w.env.Repair(context.Background(), "asg-1", 10*time.Minute, Options{MaxUnavailable: 1, Surge: 1}); err != nil {
		t.Fatal(err)
	}
	want := []string{"SetMinSize 1", "Remove i-old1 false", "SetMinSize 2"}
	if got := w.cloud.Writes(); !slices.Equal(got, want) {
		t.Errorf("cloud calls %v, want %v", got, want)
	}
	if n := len(w.instances()); n != 2 || w.cloud.G.MinSize != 2 {
		t.Errorf("%d instances, MinSize %d; want 2, 2", n, w.cloud.G.MinSize)
	}
	want = []string{"MinSize 1 while the replacement launches (was 2)", "MinSize 2 again (a repair had lowered it to 1)"}
	got := slices.DeleteFunc(strings.Split(w.messages(EventGroup), "\n"), func(m string) bool { return !strings.HasPrefix(m, "MinSize") })
	if !slices.Equal(got, want) {
		t.Errorf("MinSize events %q, want %q", got, want)
	}
}

// TestRepairMaxUnhealthy: more unhealthy Nodes than --max-unhealthy (a
// count or a percentage of the judged ones) stops the repair before it
// replaces any; at the limit it repairs.
func TestRepairMaxUnhealthy(t *testing.T) {
	for _, c := range []struct {
		o       Options
		refused bool
	}{
		{Options{MaxUnavailable: 2, MaxUnhealthy: 1}, true},
		{Options{MaxUnavailable: 2, MaxUnhealthyPercent: 50}, true}, // 50% of 3 is 1
		{Options{MaxUnavailable: 2, MaxUnhealthy: 2}, false},
		{Options{MaxUnavailable: 2, MaxUnhealthyPercent: 67}, false},
		{Options{MaxUnavailable: 2}, false},
	} {
		a := desired(t, "m-a", "build-a", userData(t, "abcdef.0123456789abcdef", nil))
		w := newWorld(t, 3, a)
		w.cloud.BeforeRemove = nil
		w.cluster.OnCordon = nil
		for _, n := range []string{"node-i-old1", "node-i-old2"} {
			w.cluster.Update(n, func(n *Node) {
				n.Conditions = []Condition{{Type: "Ready", Status: "Unknown", Reason: "NodeStatusUnknown", Since: time.Now().Add(-time.Hour)}}
			})
		}
		err := w.env.Repair(context.Background(), "asg-1", 10*time.Minute, c.o)
		if c.refused {
			if err == nil || !strings.Contains(err.Error(), "2 of 3 judged Nodes are unhealthy") || len(w.cloud.Writes()) != 0 || len(w.cluster.Writes()) != 0 {
				t.Errorf("%+v: %v, cloud %v, cluster %v; want a refusal and nothing done", c.o, err, w.cloud.Writes(), w.cluster.Writes())
			}
			continue
		}
		if err != nil || len(w.cloud.Writes()) != 2 {
			t.Errorf("%+v: %v, cloud %v; want both replaced", c.o, err, w.cloud.Writes())
		}
	}
}
