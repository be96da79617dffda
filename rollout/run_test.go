package rollout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-os/drover/nodecontract"
)

// world is a group on FakeCloud whose launched instances register Nodes
// in a FakeCluster the way a joined drover node does, and which checks at
// every cordon and removal that the group keeps size schedulable Ready
// Nodes.
type world struct {
	t       *testing.T
	cloud   *FakeCloud
	cluster *FakeCluster
	env     *Env
	size    int
	// builds maps an image to its build ID; broken images never join.
	builds map[string]string
	broken map[string]bool
	mu     sync.Mutex
	events []Event
}

func newWorld(t *testing.T, n int, d Desired) *world {
	w := &world{t: t, size: n, builds: map[string]string{d.ImageID: d.BuildID}, broken: map[string]bool{}}
	v := version(1, d, false)
	v.Config = ""
	v.Default = true
	w.cloud = &FakeCloud{G: Group{ID: "asg-1", TemplateID: "lt-1", TemplateVersion: "1", MaxSize: n, DesiredCapacity: n},
		Versions: []TemplateVersion{v}, Console: map[string][]byte{}}
	w.cluster = NewFakeCluster()
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("i-old%d", i)
		w.cloud.Insts = append(w.cloud.Insts, inst(id, "1"))
		w.cluster.Put(readyNode(id, d))
	}
	w.cloud.Launched = w.launch
	w.cluster.OnCordon = func(string) { w.checkCapacity("cordon") }
	w.cloud.BeforeRemove = func(ids []string, decrease bool) error {
		if !decrease {
			return nil
		}
		drained := w.cluster.Writes()
		for _, id := range ids {
			if strings.HasPrefix(id, "i-old") && !slices.Contains(drained, "Drain node-"+id+" true") {
				t.Errorf("instance %s removed before its Node was drained", id)
			}
		}
		w.checkCapacity("remove " + strings.Join(ids, ","))
		return nil
	}
	w.env = &Env{Cloud: w.cloud, Cluster: w.cluster, Region: region, Poll: time.Millisecond,
		ReadyTimeout: 200 * time.Millisecond, DrainTimeout: 200 * time.Millisecond,
		Event: func(e Event) { w.mu.Lock(); w.events = append(w.events, e); w.mu.Unlock() }}
	return w
}

// launch registers the instance's Node as a joined drover node would: with
// the build ID of its image and the digest of its user-data.
func (w *world) launch(in Instance, v TemplateVersion) {
	if w.broken[v.ImageID] {
		w.cloud.Console[in.ID] = []byte("boot\ndrover-agent: the node file is refused: cluster.server: want https\nFAILED\n")
		return
	}
	d, err := nodecontract.ConfigDigest(v.UserData)
	if err != nil {
		w.t.Errorf("launched from user-data the agent refuses: %v", err)
		return
	}
	w.cluster.Put(readyNode(in.ID, Desired{BuildID: w.builds[v.ImageID], Config: d}))
}

// checkCapacity fails the test when fewer than size Nodes are Ready and
// schedulable: an old Node was taken away before its replacement was
// Ready.
func (w *world) checkCapacity(what string) {
	nodes, _ := w.cluster.Nodes(context.Background())
	ready := 0
	for _, n := range nodes {
		if n.Ready() && !n.Unschedulable {
			ready++
		}
	}
	// The cordoned or removed Node is out already: its Ready replacement
	// keeps the count.
	if ready < w.size {
		w.t.Errorf("%s: %d schedulable Ready Nodes, the group serves %d", what, ready, w.size)
	}
}

func (w *world) instances() []Instance {
	ins, _ := w.cloud.Instances(context.Background(), "asg-1")
	return ins
}

func (w *world) messages(kind string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var s []string
	for _, e := range w.events {
		if e.Kind == kind {
			s = append(s, e.Message)
		}
	}
	return strings.Join(s, "\n")
}

// allOn checks that the group holds n in-service instances, all with Nodes
// labelled for d.
func (w *world) allOn(d Desired, n int) {
	w.t.Helper()
	ins := w.instances()
	if len(ins) != n {
		w.t.Errorf("%d instances, want %d: %v", len(ins), n, ins)
	}
	for _, in := range ins {
		ok := w.cluster.Update("node-"+in.ID, func(nd *Node) {
			if nd.Labels[nodecontract.LabelNodeConfig] != d.ConfigLabel() || nd.Labels[nodecontract.LabelBuildID] != d.BuildID {
				w.t.Errorf("%s: labels %v", in.ID, nd.Labels)
			}
		})
		if !ok {
			w.t.Errorf("%s: no Node", in.ID)
		}
	}
}

func TestRunReplacesOneAtATime(t *testing.T) {
	ud := userData(t, "abcdef.0123456789abcdef", nil)
	a, b := desired(t, "m-a", "build-a", ud), desired(t, "m-b", "build-b", ud)
	w := newWorld(t, 2, a)
	w.builds["m-b"] = "build-b"
	if err := w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 1, Surge: 1}, false); err != nil {
		t.Fatal(err)
	}
	w.allOn(b, 2)
	want := []string{
		"CreateTemplateVersion from 1 m-b", "SetTemplateVersion 2",
		"SetMaxSize 3", "ScaleOut 1", "Remove i-old1 true",
		"ScaleOut 1", "Remove i-old2 true", "SetMaxSize 2",
	}
	if got := w.cloud.Writes(); !slices.Equal(got, want) {
		t.Errorf("cloud calls:\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	wantK := []string{"Cordon node-i-old1", "Drain node-i-old1 true", "DeleteNode node-i-old1", "Cordon node-i-old2", "Drain node-i-old2 true", "DeleteNode node-i-old2"}
	if got := w.cluster.Writes(); !slices.Equal(got, wantK) {
		t.Errorf("cluster calls %v, want %v", got, wantK)
	}
	if g := w.cloud.G; g.MaxSize != 2 || g.DesiredCapacity != 2 {
		t.Errorf("group %+v", g)
	}
	if v := w.cloud.Versions[1]; v.Description != (Stamp{BuildID: "build-b", Config: b.ConfigLabel(), ImageID: "m-b", Size: 2, MaxSize: 2}).String() {
		t.Errorf("description %q", v.Description)
	}
	if !strings.Contains(w.messages(EventReady), "Node node-i-new1 Ready") {
		t.Errorf("ready events: %s", w.messages(EventReady))
	}
	// Again: nothing to do, no write.
	before := len(w.cloud.Writes())
	if err := w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 1, Surge: 1}, false); err != nil {
		t.Fatal(err)
	}
	if len(w.cloud.Writes()) != before || !strings.Contains(w.messages(EventDone), "nothing to do") {
		t.Errorf("second run wrote %v", w.cloud.Writes()[before:])
	}
}

func TestRunSurgeAndMaxUnavailable(t *testing.T) {
	ud := userData(t, "abcdef.0123456789abcdef", nil)
	a, b := desired(t, "m-a", "build-a", ud), desired(t, "m-b", "build-b", ud)
	w := newWorld(t, 4, a)
	w.cloud.G.MaxSize = 10 // room for the surge: MaxSize is left alone
	w.builds["m-b"] = "build-b"
	if err := w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 2, Surge: 2}, false); err != nil {
		t.Fatal(err)
	}
	w.allOn(b, 4)
	want := []string{"CreateTemplateVersion from 1 m-b", "SetTemplateVersion 2",
		"ScaleOut 2", "Remove i-old1,i-old2 true", "ScaleOut 2", "Remove i-old3,i-old4 true"}
	if got := w.cloud.Writes(); !slices.Equal(got, want) {
		t.Errorf("cloud calls %v, want %v", got, want)
	}
}

// A surge above the number of old instances launches only as many as
// there are old ones: the group never grows past its size plus the old
// instances it still holds, and ends at its size. Also when a resumed run
// finds some instances replaced already.
func TestRunSurgeAboveOldInstances(t *testing.T) {
	ud := userData(t, "abcdef.0123456789abcdef", nil)
	a, b := desired(t, "m-a", "build-a", ud), desired(t, "m-b", "build-b", ud)
	w := newWorld(t, 2, a)
	w.builds["m-b"] = "build-b"
	if err := w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 5, Surge: 5}, false); err != nil {
		t.Fatal(err)
	}
	w.allOn(b, 2)
	want := []string{"CreateTemplateVersion from 1 m-b", "SetTemplateVersion 2",
		"SetMaxSize 4", "ScaleOut 2", "Remove i-old1,i-old2 true", "SetMaxSize 2"}
	if got := w.cloud.Writes(); !slices.Equal(got, want) {
		t.Errorf("cloud calls %v, want %v", got, want)
	}
	if g := w.cloud.G; g.MaxSize != 2 || g.DesiredCapacity != 2 {
		t.Errorf("group %+v, want MaxSize and DesiredCapacity 2", g)
	}

	w = newWorld(t, 3, a)
	w.builds["m-b"] = "build-b"
	if err := w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 1, Surge: 1, PauseAfterFirst: true}, false); err != nil {
		t.Fatal(err)
	}
	before := len(w.cloud.Writes())
	if err := w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 3, Surge: 3}, true); err != nil {
		t.Fatal(err)
	}
	w.allOn(b, 3)
	want = []string{"SetMaxSize 5", "ScaleOut 2", "Remove i-old2,i-old3 true", "SetMaxSize 3"}
	if got := w.cloud.Writes()[before:]; !slices.Equal(got, want) {
		t.Errorf("resumed with --surge 3 and 2 old instances: cloud calls %v, want %v", got, want)
	}
}

func TestRunNodeConfigChangeAndRotatedToken(t *testing.T) {
	a := desired(t, "m-a", "build-a", userData(t, "abcdef.0123456789abcdef", nil))
	w := newWorld(t, 2, a)
	// A rotated token: a new version, no instance replaced.
	rot := desired(t, "m-a", "build-a", userData(t, "zyxwvu.0123456789abcdef", nil))
	if err := w.env.Run(context.Background(), "asg-1", rot, Options{MaxUnavailable: 1, Surge: 1}, false); err != nil {
		t.Fatal(err)
	}
	if got := w.cloud.Writes(); !slices.Equal(got, []string{"CreateTemplateVersion from 1 m-a", "SetTemplateVersion 2"}) {
		t.Errorf("rotated token: %v", got)
	}
	if len(w.cluster.Writes()) != 0 {
		t.Errorf("rotated token touched Nodes: %v", w.cluster.Writes())
	}
	// An unchanged one: nothing.
	if err := w.env.Run(context.Background(), "asg-1", rot, Options{MaxUnavailable: 1, Surge: 1}, false); err != nil || len(w.cloud.Writes()) != 2 {
		t.Errorf("unchanged: %v %v", err, w.cloud.Writes())
	}
	// A node label: every instance replaced.
	lab := desired(t, "m-a", "build-a", userData(t, "zyxwvu.0123456789abcdef", map[string]string{"example.com/pool": "blue"}))
	if err := w.env.Run(context.Background(), "asg-1", lab, Options{MaxUnavailable: 1, Surge: 1}, false); err != nil {
		t.Fatal(err)
	}
	w.allOn(lab, 2)
	if n := strings.Count(strings.Join(w.cloud.Writes(), "\n"), "Remove "); n != 2 {
		t.Errorf("%d removals: %v", n, w.cloud.Writes())
	}
}

func TestRunStopsWhenNewNodeIsNotReady(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("keep=%v", keep), func(t *testing.T) {
			ud := userData(t, "abcdef.0123456789abcdef", nil)
			a, b := desired(t, "m-a", "build-a", ud), desired(t, "m-bad", "build-bad", ud)
			w := newWorld(t, 2, a)
			w.broken["m-bad"] = true
			w.env.KeepFailed = keep
			err := w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 1, Surge: 1}, false)
			var nr *NotReadyError
			if !errors.As(err, &nr) || nr.Instance != "i-new1" {
				t.Fatalf("err %v", err)
			}
			fail := w.messages(EventFailed)
			if !strings.Contains(fail, "the node file is refused: cluster.server: want https") || !strings.Contains(fail, "no Node with providerID "+region+".i-new1") {
				t.Errorf("failure report:\n%s", fail)
			}
			for _, c := range w.cloud.Writes() {
				if strings.Contains(c, "i-old") {
					t.Errorf("an old instance was touched: %s", c)
				}
			}
			if len(w.cluster.Writes()) != 0 {
				t.Errorf("Nodes touched: %v", w.cluster.Writes())
			}
			if w.cloud.G.TemplateVersion != "1" {
				t.Errorf("group left on version %s, want 1 again", w.cloud.G.TemplateVersion)
			}
			ins := w.instances()
			hasNew := slices.ContainsFunc(ins, func(i Instance) bool { return i.ID == "i-new1" })
			if hasNew != keep || len(ins) != 2+map[bool]int{true: 1}[keep] {
				t.Errorf("instances %v (keep %v)", ins, keep)
			}
			if !keep && (w.cloud.G.MaxSize != 2 || w.cloud.G.DesiredCapacity != 2) {
				t.Errorf("group %+v", w.cloud.G)
			}
		})
	}
}

func TestRunResumeReplacesNoNodeTwice(t *testing.T) {
	ud := userData(t, "abcdef.0123456789abcdef", nil)
	a, b := desired(t, "m-a", "build-a", ud), desired(t, "m-b", "build-b", ud)
	w := newWorld(t, 3, a)
	w.builds["m-b"] = "build-b"
	// Killed while draining the second old node.
	ctx, cancel := context.WithCancel(context.Background())
	drains := 0
	w.cluster.DrainFunc = func(dctx context.Context, node string) error {
		if drains++; drains == 2 {
			cancel()
			<-dctx.Done()
			return dctx.Err()
		}
		return nil
	}
	if err := w.env.Run(ctx, "asg-1", b, Options{MaxUnavailable: 1, Surge: 1}, false); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: %v", err)
	}
	w.cluster.DrainFunc = nil
	err := w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 1, Surge: 1}, false)
	if err == nil || !strings.Contains(err.Error(), "--resume") {
		t.Fatalf("a re-run without --resume: %v", err)
	}
	if err := w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 1, Surge: 1}, true); err != nil {
		t.Fatal(err)
	}
	w.allOn(b, 3)
	calls := strings.Join(w.cloud.Writes(), "\n")
	for _, s := range []string{"CreateTemplateVersion", "Remove i-old1 ", "Remove i-old2 ", "Remove i-old3 "} {
		if n := strings.Count(calls, s); n != 1 {
			t.Errorf("%q %d times:\n%s", s, n, calls)
		}
	}
	if n := strings.Count(calls, "ScaleOut 1"); n != 3 {
		t.Errorf("%d instances launched for 3 replacements:\n%s", n, calls)
	}
	if g := w.cloud.G; g.MaxSize != 3 || g.DesiredCapacity != 3 {
		t.Errorf("group %+v", g)
	}
	// The cordoned node was taken first on resume.
	k := w.cluster.Writes()
	if i := slices.Index(k, "Drain node-i-old2 true"); i < 0 || slices.Contains(k[i:], "Cordon node-i-old2") {
		t.Errorf("cluster calls %v", k)
	}
	if err := w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 1, Surge: 1}, false); err != nil || !strings.Contains(w.messages(EventDone), "nothing to do") {
		t.Errorf("after resume: %v", err)
	}
}

func TestRunDrainTimeoutKeepsTheOldInstance(t *testing.T) {
	ud := userData(t, "abcdef.0123456789abcdef", nil)
	a, b := desired(t, "m-a", "build-a", ud), desired(t, "m-b", "build-b", ud)
	w := newWorld(t, 2, a)
	w.builds["m-b"] = "build-b"
	// A PodDisruptionBudget that never allows the eviction.
	w.cluster.DrainFunc = func(ctx context.Context, _ string) error { <-ctx.Done(); return ctx.Err() }
	err := w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 1, Surge: 1}, false)
	if err == nil || !strings.Contains(err.Error(), "--drain-timeout") {
		t.Fatalf("err %v", err)
	}
	for _, c := range w.cloud.Writes() {
		if strings.HasPrefix(c, "Remove") {
			t.Errorf("removed after a failed drain: %s", c)
		}
	}
	cordoned := false
	w.cluster.Update("node-i-old1", func(n *Node) { cordoned = n.Unschedulable })
	if !cordoned {
		t.Errorf("node-i-old1 not left cordoned")
	}
}

func TestRunDryRunWritesNothing(t *testing.T) {
	ud := userData(t, "abcdef.0123456789abcdef", nil)
	a, b := desired(t, "m-a", "build-a", ud), desired(t, "m-b", "build-b", ud)
	w := newWorld(t, 2, a)
	w.env.DryRun = true
	if err := w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 1, Surge: 1}, false); err != nil {
		t.Fatal(err)
	}
	if len(w.cloud.Writes())+len(w.cluster.Writes()) != 0 {
		t.Errorf("dry run wrote %v %v", w.cloud.Writes(), w.cluster.Writes())
	}
	if plan := w.messages(EventPlan); !strings.Contains(plan, "replace 2 instance(s)") {
		t.Errorf("plan:\n%s", plan)
	}
}

// TestRunMakesRoomInAFullTemplate: at ECS's 30 versions, the oldest
// version drover made and nothing uses is deleted before the new one is
// created, and the rollout goes on as usual.
func TestRunMakesRoomInAFullTemplate(t *testing.T) {
	ud := userData(t, "abcdef.0123456789abcdef", nil)
	a, b := desired(t, "m-a", "build-a", ud), desired(t, "m-b", "build-b", ud)
	w := newWorld(t, 1, a)
	w.builds["m-b"] = "build-b"
	for n := int64(2); n <= MaxTemplateVersions; n++ {
		v := version(n, a, true)
		v.Config = ""
		w.cloud.Versions = append(w.cloud.Versions, v)
	}
	if err := w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 1, Surge: 1}, false); err != nil {
		t.Fatal(err)
	}
	w.allOn(b, 1)
	got := w.cloud.Writes()
	if len(got) < 3 || got[0] != "DeleteTemplateVersions [2]" || got[1] != "CreateTemplateVersion from 1 m-b" || got[2] != "SetTemplateVersion 31" {
		t.Errorf("cloud calls %v, want version 2 deleted, then version 31 made and used", got)
	}
	if len(w.cloud.Versions) != MaxTemplateVersions {
		t.Errorf("%d versions after the rollout, want %d", len(w.cloud.Versions), MaxTemplateVersions)
	}
	if m := w.messages(EventTemplate); !strings.Contains(m, "deleted launch template lt-1 version(s) 2 to make room") {
		t.Errorf("template events: %s", m)
	}
}

// TestRunMinReadySoaks: with MinReady an old instance goes only once its
// replacement's Node has been Ready that long; the wait says so.
func TestRunMinReadySoaks(t *testing.T) {
	ud := userData(t, "abcdef.0123456789abcdef", nil)
	a, b := desired(t, "m-a", "build-a", ud), desired(t, "m-b", "build-b", ud)
	w := newWorld(t, 2, a)
	w.builds["m-b"] = "build-b"
	const soak = 80 * time.Millisecond
	w.env.MinReady, w.env.ReadyTimeout = soak, 5*time.Second
	var mu sync.Mutex
	var lastReady time.Time
	w.cloud.Launched = func(in Instance, v TemplateVersion) {
		w.launch(in, v)
		now := time.Now()
		w.cluster.Update("node-"+in.ID, func(n *Node) { n.Conditions = []Condition{{Type: "Ready", Status: "True", Since: now}} })
		mu.Lock()
		lastReady = now
		mu.Unlock()
	}
	removeAfter := w.cloud.BeforeRemove
	w.cloud.BeforeRemove = func(ids []string, decrease bool) error {
		mu.Lock()
		if d := time.Since(lastReady); d < soak {
			t.Errorf("removed %v %s after its replacement's Node became Ready, want at least --min-ready %s", ids, d, soak)
		}
		mu.Unlock()
		return removeAfter(ids, decrease)
	}
	if err := w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 1, Surge: 1}, false); err != nil {
		t.Fatal(err)
	}
	w.allOn(b, 2)
	if !strings.Contains(w.messages(EventWaiting), "soaking for --min-ready 80ms") {
		t.Errorf("waiting events: %s", w.messages(EventWaiting))
	}
}

// TestRunPauseAfterFirst: the run ends after its first batch with MaxSize
// back and a paused event; a plain re-run refuses the rollout in flight,
// --resume (without the pause) finishes it.
func TestRunPauseAfterFirst(t *testing.T) {
	ud := userData(t, "abcdef.0123456789abcdef", nil)
	a, b := desired(t, "m-a", "build-a", ud), desired(t, "m-b", "build-b", ud)
	w := newWorld(t, 3, a)
	w.builds["m-b"] = "build-b"
	if err := w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 1, Surge: 1, PauseAfterFirst: true}, false); err != nil {
		t.Fatal(err)
	}
	want := []string{"CreateTemplateVersion from 1 m-b", "SetTemplateVersion 2", "SetMaxSize 4", "ScaleOut 1", "Remove i-old1 true", "SetMaxSize 3"}
	if got := w.cloud.Writes(); !slices.Equal(got, want) {
		t.Fatalf("cloud calls %v, want %v", got, want)
	}
	if !strings.Contains(w.messages(EventPaused), "1 old instance(s) replaced, 2 left") {
		t.Errorf("paused events: %q", w.messages(EventPaused))
	}
	if err := w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 1, Surge: 1}, false); err == nil || !strings.Contains(err.Error(), "--resume") {
		t.Errorf("a plain re-run of a paused rollout: %v, want a refusal naming --resume", err)
	}
	if err := w.env.Run(context.Background(), "asg-1", b, Options{MaxUnavailable: 1, Surge: 1}, true); err != nil {
		t.Fatal(err)
	}
	w.allOn(b, 3)
	if g := w.cloud.G; g.MaxSize != 3 || g.DesiredCapacity != 3 {
		t.Errorf("group %+v", g)
	}
}
