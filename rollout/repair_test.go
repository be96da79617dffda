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
	// NotReady first, whatever the IDs: i-9 is NotReady, i-10 (before it by
	// ID) Ready with a read-only filesystem.
	order := State{Region: region, Group: group("1", 2), Instances: []Instance{inst("i-10", "1"), inst("i-9", "1")},
		Nodes: []Node{
			node("i-10", Condition{Type: "Ready", Status: "True", Since: old}, Condition{Type: "ReadonlyFilesystem", Status: "True", Since: old}),
			node("i-9", Condition{Type: "Ready", Status: "False", Since: old}),
		}}
	if rp := PlanRepair(order, now, 10*time.Minute); ids(rp.Replace) != "i-9,i-10" {
		t.Errorf("NotReady first: replace %s, want i-9,i-10", ids(rp.Replace))
	}
	// "For longer than --after": exactly --after is not yet.
	exact := now.Add(-10 * time.Minute)
	edge := State{Region: region, Group: group("1", 2), Instances: []Instance{inst("i-1", "1"), inst("i-2", "1")},
		Nodes: []Node{
			node("i-1", Condition{Type: "Ready", Status: "False", Since: exact}),
			node("i-2", Condition{Type: "Ready", Status: "True", Since: old}, Condition{Type: "ReadonlyFilesystem", Status: "True", Since: exact}),
		}}
	if rp := PlanRepair(edge, now, 10*time.Minute); len(rp.Replace) != 0 || rp.Healthy != 2 {
		t.Errorf("unhealthy for exactly --after: replace %s (%v), healthy %d; want none, 2", ids(rp.Replace), rp.Replace, rp.Healthy)
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
	// In service without a Node: the report says the Node is missing.
	if !strings.Contains(w.messages(EventFailed), "not Ready after 200ms: no Node with providerID cn-test-1.i-new1 yet") {
		t.Errorf("report %s; want the missing Node named", w.messages(EventFailed))
	}
}

// pendingCloud lists the group's replacements (i-new…) Pending forever, as
// ESS does while an instance's launch (or a scale-out lifecycle hook) is
// not done.
type pendingCloud struct{ *FakeCloud }

func (c pendingCloud) Instances(ctx context.Context, id string) ([]Instance, error) {
	ins, err := c.FakeCloud.Instances(ctx, id)
	for i := range ins {
		if strings.HasPrefix(ins[i].ID, "i-new") {
			ins[i].State = Pending
		}
	}
	return ins, err
}

// TestRepairReplacementPending: a replacement counts once ESS has it in
// service, not when its Node is Ready while ESS still lists it Pending.
func TestRepairReplacementPending(t *testing.T) {
	a := desired(t, "m-a", "build-a", userData(t, "abcdef.0123456789abcdef", nil))
	w := newWorld(t, 2, a)
	w.cloud.BeforeRemove = nil
	w.env.Cloud = pendingCloud{w.cloud}
	w.cluster.Update("node-i-old1", func(n *Node) {
		n.Conditions = []Condition{{Type: "Ready", Status: "False", Since: time.Now().Add(-time.Hour)}}
	})
	err := w.env.Repair(context.Background(), "asg-1", 10*time.Minute, Options{MaxUnavailable: 1, Surge: 1})
	if err == nil || w.messages(EventReady) != "" || !strings.Contains(w.messages(EventFailed), "new instance i-new1 is not Ready after 200ms: instance Pending (its Node node-i-new1 is Ready)") {
		t.Errorf("err %v, ready %q, report %s; want the Pending replacement not counted", err, w.messages(EventReady), w.messages(EventFailed))
	}
}

// TestRepairMinSize: ESS refuses RemoveInstances below MinSize even
// without lowering the desired capacity, so a group at its MinSize is
// repaired with MinSize lowered by one until the replacement is Ready; a
// group above its MinSize is repaired without touching it.
func TestRepairMinSize(t *testing.T) {
	for _, c := range []struct {
		name        string
		size        int
		writes, evs []string
	}{
		{name: "above", size: 3, writes: []string{"Remove i-old1 false"}},
		{name: "at", size: 2, writes: []string{"SetMinSize 1", "Remove i-old1 false", "SetMinSize 2"},
			evs: []string{"MinSize 1 while the replacement launches (was 2)", "MinSize 2 again (a repair had lowered it to 1)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := desired(t, "m-a", "build-a", userData(t, "abcdef.0123456789abcdef", nil))
			w := newWorld(t, c.size, a)
			w.cloud.BeforeRemove = nil
			w.cloud.G.MinSize = 2
			w.cluster.Update("node-i-old1", func(n *Node) {
				n.Conditions = []Condition{{Type: "Ready", Status: "Unknown", Reason: "NodeStatusUnknown", Since: time.Now().Add(-time.Hour)}}
			})
			if err := w.env.Repair(context.Background(), "asg-1", 10*time.Minute, Options{MaxUnavailable: 1, Surge: 1}); err != nil {
				t.Fatal(err)
			}
			if got := w.cloud.Writes(); !slices.Equal(got, c.writes) {
				t.Errorf("cloud calls %v, want %v", got, c.writes)
			}
			if n := len(w.instances()); n != c.size || w.cloud.G.MinSize != 2 {
				t.Errorf("%d instances, MinSize %d; want %d, 2", n, w.cloud.G.MinSize, c.size)
			}
			got := slices.DeleteFunc(strings.Split(w.messages(EventGroup), "\n"), func(m string) bool { return !strings.HasPrefix(m, "MinSize") })
			if !slices.Equal(got, c.evs) {
				t.Errorf("MinSize events %q, want %q", got, c.evs)
			}
		})
	}
}

// TestRepairMaxUnhealthy: more unhealthy Nodes than --max-unhealthy (a
// count or a percentage of the judged ones) stops the repair before it
// replaces any; at the limit it repairs.
func TestRepairMaxUnhealthy(t *testing.T) {
	for _, c := range []struct {
		o       Options
		refused string // the limit as the refusal names it
	}{
		{Options{MaxUnavailable: 2, MaxUnhealthy: 1}, "more than --max-unhealthy 1:"},
		{Options{MaxUnavailable: 2, MaxUnhealthyPercent: 50}, "more than --max-unhealthy 50% (1 of 3):"}, // 50% of 3 is 1
		{Options{MaxUnavailable: 2, MaxUnhealthy: 2}, ""},
		{Options{MaxUnavailable: 2, MaxUnhealthyPercent: 67}, ""},
		{Options{MaxUnavailable: 2}, ""},
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
		if c.refused != "" {
			if err == nil || !strings.Contains(err.Error(), "2 of 3 judged Nodes are unhealthy, "+c.refused) || len(w.cloud.Writes()) != 0 || len(w.cluster.Writes()) != 0 {
				t.Errorf("%+v: %v, cloud %v, cluster %v; want a refusal and nothing done", c.o, err, w.cloud.Writes(), w.cluster.Writes())
			}
			continue
		}
		if err != nil || len(w.cloud.Writes()) != 2 {
			t.Errorf("%+v: %v, cloud %v; want both replaced", c.o, err, w.cloud.Writes())
		}
	}
}

// tickCluster advances a clock by step at each Nodes call (one per
// observation) and calls atWatch with how many observations followed the
// first Remove.
type tickCluster struct {
	*FakeCluster
	cloud   *FakeCloud
	clock   *time.Time
	step    time.Duration
	after   int
	atWatch func(n int)
}

func (c *tickCluster) Nodes(ctx context.Context) ([]Node, error) {
	*c.clock = c.clock.Add(c.step)
	if len(c.cloud.Writes()) > 0 {
		c.after++
		c.atWatch(c.after)
	}
	return c.FakeCluster.Nodes(ctx)
}

// TestRepairReadyTimeoutBoundary: a replacement not Ready when exactly
// --ready-timeout has passed is looked at again; it fails only after
// longer than that.
func TestRepairReadyTimeoutBoundary(t *testing.T) {
	a := desired(t, "m-a", "build-a", userData(t, "abcdef.0123456789abcdef", nil))
	w := newWorld(t, 2, a)
	w.cloud.BeforeRemove = nil
	clock := time.Now()
	w.env.Now = func() time.Time { return clock }
	w.env.ReadyTimeout = time.Hour
	w.cluster.Update("node-i-old1", func(n *Node) {
		n.Conditions = []Condition{{Type: "Ready", Status: "False", Since: clock.Add(-time.Hour)}}
	})
	// The replacement joins NotReady and turns Ready at the third
	// observation after the Remove: 1.5 h after it, the second one being
	// at exactly the hour.
	w.cloud.Launched = func(in Instance, v TemplateVersion) {
		w.launch(in, v)
		w.cluster.Update("node-"+in.ID, func(n *Node) { n.Conditions[0].Status = "False" })
	}
	w.env.Cluster = &tickCluster{FakeCluster: w.cluster, cloud: w.cloud, clock: &clock, step: 30 * time.Minute, atWatch: func(n int) {
		if n == 3 {
			w.cluster.Update("node-i-new1", func(n *Node) { n.Conditions[0].Status = "True" })
		}
	}}
	if err := w.env.Repair(context.Background(), "asg-1", 10*time.Minute, Options{MaxUnavailable: 1, Surge: 1}); err != nil || w.messages(EventReady) != "replacement of i-old1 Ready" {
		t.Errorf("err %v, ready %q; want the replacement Ready after the exact hour's look", err, w.messages(EventReady))
	}
}
