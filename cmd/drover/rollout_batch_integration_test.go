//go:build integration

package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/drover-os/drover/agent/userdata"
	"github.com/drover-os/drover/harness/ecsapi"
)

// Scenarios of issue 35's batch control: a PodDisruptionBudget that blocks
// a drain, --max-unhealthy braking a repair, and a large group rolled with
// a percentage surge across zones.

// pdbBlocks: each old Node runs the pod of a ReplicaSet, and one
// PodDisruptionBudget (minAvailable 2) covers both pods, so the API server
// refuses every eviction (429). The rollout stops at --drain-timeout
// (exit 1) and its report names the budget (namespace/name) and the pod it
// held; nothing was removed: both old instances are still in the group, the
// Node being drained stays cordoned, the pods are still there.
func (e *rolloutEnv) pdbBlocks(t *testing.T) {
	s, old := e.newScenario(t, "pdb")
	ctx := context.Background()
	const ns, budget = "rollout-pdb", "blocker"
	if _, err := e.kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nodeOf := map[string]string{} // Node → old instance
	for i, id := range old {
		n := s.node(t, id)
		nodeOf[n.Name] = id
		// No scheduler and no kubelet: the pod template names the Node,
		// and the test posts the Ready status a kubelet would.
		labels := map[string]string{"app": "held", "held": strconv.Itoa(i)}
		one := int32(1)
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "held-" + strconv.Itoa(i), Namespace: ns},
			Spec: appsv1.ReplicaSetSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{NodeName: n.Name, Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}}}}
		if _, err := e.kc.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var pods []corev1.Pod
	waitFor(t, "the ReplicaSets' two pods", time.Minute, func() error {
		l, err := e.kc.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=held"})
		if err != nil || len(l.Items) != 2 {
			return fmt.Errorf("pods: %v, %d", err, len(l.Items))
		}
		pods = l.Items
		return nil
	})
	for _, p := range pods {
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
		if _, err := e.kc.CoreV1().Pods(ns).UpdateStatus(ctx, &p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	two := intstr.FromInt32(2)
	if _, err := e.kc.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: budget},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &two, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "held"}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the disruption controller to count the budget's pods", time.Minute, func() error {
		b, err := e.kc.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, budget, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if st := b.Status; st.ObservedGeneration != b.Generation || st.ExpectedPods != 2 || st.CurrentHealthy != 2 || st.DisruptionsAllowed != 0 {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})

	stdout, stderr, code := s.rollout(t, "--image", e.imageB, "--userdata", s.pool, "--ready-timeout", "60s", "--drain-timeout", "10s", "--json")
	if code != 1 {
		t.Errorf("rollout against a blocking budget: exit %d, want 1", code)
	}
	var cordoned []string
	for _, n := range s.nodes(t) {
		if n.Spec.Unschedulable {
			cordoned = append(cordoned, n.Name)
		}
	}
	if len(cordoned) != 1 || nodeOf[cordoned[0]] == "" {
		t.Fatalf("cordoned Nodes %v, want one of the old ones %v", cordoned, slices.Collect(maps.Keys(nodeOf)))
	}
	var held string // the pod on the Node the rollout was draining
	l, err := e.kc.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=held"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range l.Items {
		if p.DeletionTimestamp != nil {
			t.Errorf("pod %s/%s is being deleted: an eviction went through", ns, p.Name)
		}
		if p.Spec.NodeName == cordoned[0] {
			held = ns + "/" + p.Name
		}
	}
	if len(l.Items) != 2 || held == "" {
		t.Fatalf("pods %v, want the two, one on %s", l.Items, cordoned[0])
	}
	if !strings.Contains(stderr, "PodDisruptionBudget "+ns+"/"+budget) || !strings.Contains(stderr, held) {
		t.Errorf("the report does not name the budget %s/%s and the pod %s it held:\n%s", ns, budget, held, stderr)
	}
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var ev struct{ Event, Instance string }
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("--json line %q: %v", line, err)
		}
		if ev.Event == "remove" {
			t.Errorf("a remove event of %s although no drain finished", ev.Instance)
		}
	}
	ids := s.instanceIDs(t)
	for _, id := range old {
		if !contains(ids, id) {
			t.Errorf("old instance %s left the group (instances %v) although its Node was not drained", id, ids)
		}
	}
	for _, a := range s.activities(t) {
		if d := a.DestroyedInstances.DestroyedInstance; len(d) > 0 {
			t.Errorf("activity %s removed %v", a.ScalingActivityId, d)
		}
	}
}

// maxUnhealthy: two of a group's four Nodes stop heartbeating. A repair
// with --max-unhealthy 1, or 25 % (1 of 4), refuses to replace them: two
// unhealthy Nodes at once look like a problem of the cluster, not of the
// nodes. It says so and changes nothing — the emulator shows the same
// instances and no new scaling activity. With --max-unhealthy 50 % (2 of 4)
// the same repair replaces both.
func (e *rolloutEnv) maxUnhealthy(t *testing.T) {
	s, old := e.newScenarioWith(t, "maxunhealthy", ecsapi.ScalingGroup{MinSize: 4, MaxSize: 5, DesiredCapacity: 4}, 4)
	ud, err := userdata.Render(s.spec("a", e.cluster.BootstrapToken()))
	if err != nil {
		t.Fatal(err)
	}
	frozen, healthy := old[:2], old[2:]
	for _, id := range frozen {
		e.standins.Instance(id).Freeze()
	}
	var since time.Time
	waitFor(t, "the node lifecycle controller to mark both frozen Nodes Ready=Unknown", 3*time.Minute, func() error {
		since = time.Time{}
		for _, id := range frozen {
			n := s.node(t, id)
			if n == nil || ready(n) {
				return errNotYet
			}
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.LastTransitionTime.After(since) {
					since = c.LastTransitionTime.Time
				}
			}
		}
		return nil
	})
	time.Sleep(time.Until(since.Add(21 * time.Second))) // both past --after
	s.waitIdle(t)
	acts := len(s.activities(t))
	for _, limit := range []string{"1", "25%"} {
		stdout, stderr, code := s.rollout(t, "--repair", "--after", "20s", "--max-unhealthy", limit, "--ready-timeout", "60s")
		if code != 1 || !strings.Contains(stderr, "--max-unhealthy") || !strings.Contains(stderr, "2 of 4") {
			t.Errorf("repair with --max-unhealthy %s and 2 of 4 Nodes NotReady: exit %d; want 1 and a refusal saying 2 of 4 are unhealthy\n%s%s", limit, code, stdout, stderr)
		}
		if ids := s.instanceIDs(t); !sameSet(ids, old) || len(s.activities(t)) != acts {
			t.Errorf("--max-unhealthy %s: instances %v (were %v), %d scaling activities (were %d): the refused repair replaced something", limit, ids, old, len(s.activities(t)), acts)
		}
		for _, id := range frozen {
			if s.node(t, id) == nil {
				t.Errorf("--max-unhealthy %s: the Node of %s was deleted", limit, id)
			}
		}
		if g := s.scalingGroup(t); g.MinSize != 4 || g.DesiredCapacity != 4 || g.MaxSize != 5 || len(s.droverTags(t)) != 0 {
			t.Errorf("--max-unhealthy %s: MinSize %d, desired %d, MaxSize %d, drover tags %v; want 4, 4, 5 and none", limit, g.MinSize, g.DesiredCapacity, g.MaxSize, s.droverTags(t))
		}
	}

	if _, _, code := s.rollout(t, "--repair", "--after", "20s", "--max-unhealthy", "50%", "--ready-timeout", "60s"); code != 0 {
		t.Fatalf("repair with --max-unhealthy 50%% (2 of 4): exit %d, want 0", code)
	}
	now := s.instanceIDs(t)
	if len(now) != 4 || contains(now, frozen[0]) || contains(now, frozen[1]) || !contains(now, healthy[0]) || !contains(now, healthy[1]) {
		t.Errorf("instances %v after the repair, want %v and two replacements of %v", now, healthy, frozen)
	}
	s.serving(t, now, roBuildA, ud)
	if g := s.scalingGroup(t); g.MinSize != 4 || g.DesiredCapacity != 4 || g.MaxSize != 5 {
		t.Errorf("after the repair: MinSize %d, desired %d, MaxSize %d; want 4, 4, 5", g.MinSize, g.DesiredCapacity, g.MaxSize)
	}
}

func sameSet(a, b []string) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(x string) bool { return !slices.Contains(b, x) })
}

// surge50: a BALANCE group of 50 stand-ins in three zones rolled with
// --surge 20% (10 new instances at a time) and --max-unavailable 20%. The
// command must finish within the test's bound (it is killed past it); the
// removals, in the order of the --json remove events, take the zones in
// turn — after every removal the zones keep numbers of old instances that
// differ by at most one, as at the start (17, 17, 16) — each event naming
// the zone ESS answered for the instance; the group never holds more than 60 instances nor fewer than
// 40 serving Nodes; every old instance is replaced once; the zones end
// 17/17/16; MaxSize and MinSize are back at 50.
func (e *rolloutEnv) surge50(t *testing.T) {
	zones := []string{roRegion + "-p", roRegion + "-q", roRegion + "-r"} // of their own: StockOut must not touch them
	var vsw []ecsapi.VSwitch
	for _, z := range zones {
		vsw = append(vsw, ecsapi.VSwitch{ID: "vsw-surge50-" + z[len(z)-1:], ZoneID: z})
	}
	s, old := e.newScenarioWith(t, "surge50", ecsapi.ScalingGroup{MinSize: 50, MaxSize: 50, DesiredCapacity: 50, MultiAZPolicy: "BALANCE", VSwitches: vsw}, 50)
	ud, err := userdata.Render(s.spec("a", e.cluster.BootstrapToken()))
	if err != nil {
		t.Fatal(err)
	}
	zoneOf := map[string]string{}
	for _, in := range s.instances(t) {
		zoneOf[in.InstanceId] = in.ZoneId
	}
	even := func(when string) {
		t.Helper()
		got := s.zoneCount(t)
		n := []int{got[zones[0]], got[zones[1]], got[zones[2]]}
		slices.Sort(n)
		if !slices.Equal(n, []int{16, 17, 17}) {
			t.Errorf("%s: zones %v, want 17, 17 and 16 instances", when, got)
		}
	}
	even("setup")

	var mu sync.Mutex
	var batches [][]string // each RemoveInstances call's instances, in order
	defer e.srv.AfterCall(func(c ecsapi.Call) {
		if c.Product != "ess" || c.Action != "RemoveInstances" || c.Params.Get("ScalingGroupId") != s.group {
			return
		}
		var b []string
		for i := 1; c.Params.Get("InstanceId."+strconv.Itoa(i)) != ""; i++ {
			b = append(b, c.Params.Get("InstanceId."+strconv.Itoa(i)))
		}
		mu.Lock()
		batches = append(batches, b)
		mu.Unlock()
	})()

	const bound = 6 * time.Minute
	sm := s.sample()
	cmd := s.command(t, "--image", e.imageB, "--userdata", s.pool, "--surge", "20%", "--max-unavailable", "20%", "--ready-timeout", "2m", "--json")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var werr error
	select {
	case werr = <-done:
	case <-time.After(bound):
		_ = cmd.Process.Kill()
		<-done
		sm.finish(t)
		t.Fatalf("the rollout of 50 instances did not finish within %s\n%s%s", bound, out.String(), errb.String())
	}
	sm.finish(t)
	t.Logf("drover rollout of 50 instances: %v after %s\nstderr:\n%s", werr, time.Since(start).Round(time.Second), errb.String())
	if werr != nil {
		t.Fatalf("rollout: %v\n%s", werr, out.String())
	}
	if sm.maxIns > 60 || sm.minServing < 40 {
		t.Errorf("during the rollout: as many as %d instances (want ≤ 60: surge 10), as few as %d serving Nodes (want ≥ 40: max-unavailable 10)", sm.maxIns, sm.minServing)
	}

	// The zones' old instances go in turn: after every removal the old
	// instances each zone keeps differ by at most one, as they did before.
	oldIn := map[string]int{}
	for _, z := range zoneOf {
		oldIn[z]++
	}
	removed := map[string]int{} // zone → old instances removed so far
	var order []string
	uneven := false
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var ev struct{ Event, Instance, Message string }
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("--json line %q: %v", line, err)
		}
		if ev.Event != "remove" {
			continue
		}
		z, ok := zoneOf[ev.Instance]
		if !ok {
			t.Errorf("remove event of %s, not an old instance", ev.Instance)
			continue
		}
		if !strings.Contains(ev.Message, "zone "+z) {
			t.Errorf("remove event of %s does not name its zone %s: %s", ev.Instance, z, ev.Message)
		}
		removed[z]++
		order = append(order, strings.TrimPrefix(z, roRegion+"-"))
		var left []int
		for _, z := range zones {
			left = append(left, oldIn[z]-removed[z])
		}
		if slices.Max(left)-slices.Min(left) > 1 && !uneven {
			uneven = true
			t.Errorf("after %d removals the zones keep %v old instances (%s): not taken in turn (order so far %s)", len(order), left, strings.Join(zones, ", "), strings.Join(order, ""))
		}
	}
	t.Logf("removals by zone, in order: %s", strings.Join(order, ""))
	mu.Lock()
	for _, b := range batches {
		var zs []string
		for _, id := range b {
			zs = append(zs, cmp.Or(strings.TrimPrefix(zoneOf[id], roRegion+"-"), "(new "+id+")"))
		}
		t.Logf("RemoveInstances batch: %s", strings.Join(zs, ""))
	}
	mu.Unlock()
	if len(order) != 50 {
		t.Errorf("%d remove events, want 50", len(order))
	}

	now := s.instanceIDs(t)
	if len(now) != 50 {
		t.Errorf("%d instances after the rollout, want 50", len(now))
	}
	for _, id := range old {
		if contains(now, id) {
			t.Errorf("old instance %s is still in the group", id)
		}
	}
	destroyed := map[string]int{}
	for _, a := range s.activities(t) {
		for _, id := range a.DestroyedInstances.DestroyedInstance {
			destroyed[id]++
		}
	}
	if len(destroyed) != 50 {
		t.Errorf("scaling activities removed %d instances, want the 50 old ones: %v", len(destroyed), destroyed)
	}
	for id, n := range destroyed {
		if zoneOf[id] == "" || n != 1 {
			t.Errorf("%s removed %d time(s); old: %v", id, n, zoneOf[id] != "")
		}
	}
	even("after the rollout")
	if g := s.scalingGroup(t); g.MaxSize != 50 || g.MinSize != 50 || g.DesiredCapacity != 50 || len(s.droverTags(t)) != 0 {
		t.Errorf("after the rollout: MaxSize %d, MinSize %d, desired %d, drover tags %v; want 50, 50, 50 and none", g.MaxSize, g.MinSize, g.DesiredCapacity, s.droverTags(t))
	}
	s.serving(t, now, roBuildB, ud)
	if t.Failed() {
		t.Logf("the rollout's --json events:\n%s", out.String())
	}
}
