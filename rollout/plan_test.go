package rollout

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/agent/userdata"
	"github.com/drover-os/drover/nodecontract"
)

const region = "cn-test-1"

// userData renders a pool's user-data the way drover rollout does.
func userData(t *testing.T, token string, labels map[string]string) []byte {
	t.Helper()
	out, err := userdata.Render(&userdata.Spec{Server: "https://10.0.0.10:6443", CAHash: "sha256:" + strings.Repeat("ab", 32),
		BootstrapToken: token, Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func desired(t *testing.T, image, build string, ud []byte) Desired {
	t.Helper()
	d, err := nodecontract.ConfigDigest(ud)
	if err != nil {
		t.Fatal(err)
	}
	return Desired{ImageID: image, BuildID: build, Config: d, UserData: ud}
}

// version is a template version as Observe returns it (Config filled).
func version(n int64, d Desired, stamped bool) TemplateVersion {
	v := TemplateVersion{TemplateID: "lt-1", Number: n, ImageID: d.ImageID, UserData: d.UserData, Config: d.ConfigLabel(), Description: "made by terraform"}
	if stamped {
		v.Description = Stamp{BuildID: d.BuildID, Config: d.ConfigLabel(), ImageID: d.ImageID, Size: 2, MaxSize: 2}.String()
	}
	return v
}

func readyNode(id string, d Desired) Node {
	return Node{Name: "node-" + id, ProviderID: region + "." + id,
		Labels:     map[string]string{nodecontract.LabelBuildID: d.BuildID, nodecontract.LabelNodeConfig: d.ConfigLabel()},
		Conditions: []Condition{{Type: "Ready", Status: "True", Since: time.Unix(0, 0)}}}
}

func inst(id, v string) Instance {
	return Instance{ID: id, State: InService, TemplateID: "lt-1", TemplateVersion: v}
}

func group(v string, n int) Group {
	return Group{ID: "asg-1", TemplateID: "lt-1", TemplateVersion: v, MinSize: 0, MaxSize: n, DesiredCapacity: n}
}

func ids(ms []Member) string {
	var s []string
	for _, m := range ms {
		s = append(s, m.Instance.ID)
	}
	return strings.Join(s, ",")
}

func TestStampRoundTrip(t *testing.T) {
	s := Stamp{BuildID: "0123456789abcdef", Config: strings.Repeat("c", 40), ImageID: "m-abc", Size: 3, MaxSize: 5}
	got, ok := ParseStamp(s.String())
	if !ok || got != s {
		t.Fatalf("ParseStamp(%q) = %+v, %v", s, got, ok)
	}
	if s.String() != "drover build=0123456789abcdef config="+strings.Repeat("c", 40)+" image=m-abc size=3 max=5" {
		t.Errorf("format changed: %q (docs/rollout.md documents it)", s)
	}
	unknown := Stamp{Config: "c", ImageID: "m-x", Size: 1, MaxSize: 1}
	if got, ok := ParseStamp(unknown.String() + " later=1"); !ok || got != unknown {
		t.Errorf("build - and an unknown key: %+v %v", got, ok)
	}
	for _, bad := range []string{"", "made by terraform", "drover", "drover build=x config=c image=m size=two max=1", "drover config=c image=m", "drover build=x config= image=m size=1 max=1"} {
		if _, ok := ParseStamp(bad); ok {
			t.Errorf("ParseStamp(%q) accepted", bad)
		}
	}
}

func TestPlanNothingToDo(t *testing.T) {
	a := desired(t, "m-a", "build-a", userData(t, "abcdef.0123456789abcdef", nil))
	st := State{Region: region, Group: group("1", 2), Versions: []TemplateVersion{version(1, a, false)},
		Instances: []Instance{inst("i-1", "1"), inst("i-2", "1")}, Nodes: []Node{readyNode("i-1", a), readyNode("i-2", a)}}
	p, err := PlanRollout(st, a)
	if err != nil {
		t.Fatal(err)
	}
	if !p.NothingToDo() || ids(p.Current) != "i-1,i-2" {
		t.Fatalf("plan %+v", p)
	}
	if !strings.Contains(p.Text(Options{MaxUnavailable: 1, Surge: 1}), "nothing to do") {
		t.Errorf("text:\n%s", p.Text(Options{MaxUnavailable: 1, Surge: 1}))
	}
	// A Node whose label says another build is not done, even from the
	// right version.
	st.Nodes[1].Labels[nodecontract.LabelBuildID] = "build-old"
	p, _ = PlanRollout(st, a)
	if p.NothingToDo() || ids(p.Pending) != "i-2" || !strings.Contains(p.Pending[0].Reason, "drover.dev/build-id=build-old, want build-a") {
		t.Errorf("label mismatch: pending %v", p.Pending)
	}
	// Resolving "Default" and "Latest".
	st.Nodes[1].Labels[nodecontract.LabelBuildID] = "build-a"
	for _, gv := range []string{"Default", "Latest"} {
		st.Group.TemplateVersion = gv
		st.Versions[0].Default = true
		if p, err := PlanRollout(st, a); err != nil || !p.NothingToDo() {
			t.Errorf("group on %s: %v %+v", gv, err, p)
		}
	}
}

func TestPlanNewImage(t *testing.T) {
	ud := userData(t, "abcdef.0123456789abcdef", nil)
	a, b := desired(t, "m-a", "build-a", ud), desired(t, "m-b", "build-b", ud)
	old2 := readyNode("i-2", a)
	old2.Unschedulable = true // an interrupted run was draining it
	// The Standby instance counts in the desired capacity, as in ESS.
	st := State{Region: region, Group: group("1", 3), Versions: []TemplateVersion{version(1, a, false)},
		Instances: []Instance{inst("i-1", "1"), inst("i-2", "1"), {ID: "i-3", State: "Standby", TemplateID: "lt-1", TemplateVersion: "1"}, {ID: "i-4", State: "Removing", TemplateID: "lt-1", TemplateVersion: "1"}},
		Nodes:     []Node{readyNode("i-1", a), old2}}
	p, err := PlanRollout(st, b)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Create || !p.Switch || p.Target != nil {
		t.Errorf("create %v switch %v target %v", p.Create, p.Switch, p.Target)
	}
	if ids(p.Replace) != "i-2,i-1" {
		t.Errorf("replace %s, want the cordoned i-2 first", ids(p.Replace))
	}
	if ids(p.Skipped) != "i-3" || len(p.Current)+len(p.Pending) != 0 {
		t.Errorf("skipped %s current %s pending %s", ids(p.Skipped), ids(p.Current), ids(p.Pending))
	}
	if !strings.Contains(p.Replace[0].Reason, "image m-a, want m-b") {
		t.Errorf("reason %q", p.Replace[0].Reason)
	}
	want := Stamp{BuildID: "build-b", Config: b.ConfigLabel(), ImageID: "m-b", Size: 3, MaxSize: 3}
	if p.Stamp != want {
		t.Errorf("stamp %+v, want %+v", p.Stamp, want)
	}
	if p.InFlight != "" {
		t.Errorf("in flight: %s", p.InFlight)
	}
	txt := p.Text(Options{MaxUnavailable: 1, Surge: 1})
	for _, s := range []string{"create a version of lt-1 from version 1 with image m-b", want.String(), "replace 2 instance(s)", "  i-2 (node node-i-2): version 1: image m-a, want m-b", "skip i-3"} {
		if !strings.Contains(txt, s) {
			t.Errorf("plan text lacks %q:\n%s", s, txt)
		}
	}
}

func TestPlanNodeConfigChange(t *testing.T) {
	a := desired(t, "m-a", "build-a", userData(t, "abcdef.0123456789abcdef", nil))
	b := desired(t, "m-a", "build-a", userData(t, "abcdef.0123456789abcdef", map[string]string{"example.com/pool": "blue"}))
	st := State{Region: region, Group: group("1", 1), Versions: []TemplateVersion{version(1, a, false)},
		Instances: []Instance{inst("i-1", "1")}, Nodes: []Node{readyNode("i-1", a)}}
	p, _ := PlanRollout(st, b)
	if !p.Create || ids(p.Replace) != "i-1" || !strings.Contains(p.Replace[0].Reason, "node config") {
		t.Errorf("label change: create %v replace %v", p.Create, p.Replace)
	}
}

func TestPlanRotatedToken(t *testing.T) {
	a := desired(t, "m-a", "build-a", userData(t, "abcdef.0123456789abcdef", nil))
	rot := desired(t, "m-a", "build-a", userData(t, "ghijkl.0123456789abcdef", nil))
	if a.Config != rot.Config {
		t.Fatal("a rotated token changed the config digest")
	}
	st := State{Region: region, Group: group("1", 2), Versions: []TemplateVersion{version(1, a, false)},
		Instances: []Instance{inst("i-1", "1"), inst("i-2", "1")}, Nodes: []Node{readyNode("i-1", a), readyNode("i-2", a)}}
	p, _ := PlanRollout(st, rot)
	if !p.Create || !p.Switch || len(p.Replace)+len(p.Pending) != 0 || p.NothingToDo() {
		t.Fatalf("rotated token: create %v switch %v replace %v pending %v", p.Create, p.Switch, p.Replace, p.Pending)
	}
	if !strings.Contains(p.Text(Options{MaxUnavailable: 1, Surge: 1}), "no instance is replaced") {
		t.Errorf("text:\n%s", p.Text(Options{MaxUnavailable: 1, Surge: 1}))
	}
	// The same token twice: the version exists, nothing to do.
	st.Versions = append(st.Versions, version(2, rot, true))
	st.Group.TemplateVersion = "2"
	if p, _ := PlanRollout(st, rot); !p.NothingToDo() {
		t.Errorf("after the rotation: %+v", p)
	}
}

func TestPlanReusesStampedVersion(t *testing.T) {
	a := desired(t, "m-a", "build-a", userData(t, "abcdef.0123456789abcdef", nil))
	b := desired(t, "m-b", "build-b", a.UserData)
	// A run made version 2 and stopped before switching the group.
	st := State{Region: region, Group: group("1", 2), Versions: []TemplateVersion{version(1, a, false), version(2, b, true)},
		Instances: []Instance{inst("i-1", "1"), inst("i-2", "1")}, Nodes: []Node{readyNode("i-1", a), readyNode("i-2", a)}}
	p, _ := PlanRollout(st, b)
	if p.Create || !p.Switch || p.Target == nil || p.Target.Number != 2 || p.InFlight != "" {
		t.Errorf("create %v switch %v target %v inflight %q", p.Create, p.Switch, p.Target, p.InFlight)
	}
	// An unstamped version with the same contents is not taken over.
	st.Versions[1].Description = "someone's"
	if p, _ := PlanRollout(st, b); !p.Create {
		t.Errorf("took over an unstamped version")
	}
}

// Of two stamped versions with the same contents (two runs stopped before
// switching the group), the newer is taken, wherever DescribeLaunchTemplateVersions
// lists it: pruneFor deletes drover's oldest unused versions first, so the
// older is the one to go.
func TestPlanReusesTheNewestStampedVersion(t *testing.T) {
	a := desired(t, "m-a", "build-a", userData(t, "abcdef.0123456789abcdef", nil))
	b := desired(t, "m-b", "build-b", a.UserData)
	for _, order := range [][]int64{{2, 3}, {3, 2}} {
		st := State{Region: region, Group: group("1", 2), Versions: []TemplateVersion{version(1, a, false), version(order[0], b, true), version(order[1], b, true)},
			Instances: []Instance{inst("i-1", "1"), inst("i-2", "1")}, Nodes: []Node{readyNode("i-1", a), readyNode("i-2", a)}}
		p, err := PlanRollout(st, b)
		if err != nil {
			t.Fatal(err)
		}
		target := int64(0)
		if p.Target != nil {
			target = p.Target.Number
		}
		if p.Create || !p.Switch || target != 3 {
			t.Errorf("versions listed %v: create %v switch %v target version %d, want a switch to version 3", order, p.Create, p.Switch, target)
		}
	}
}

func TestPlanInFlight(t *testing.T) {
	a := desired(t, "m-a", "build-a", userData(t, "abcdef.0123456789abcdef", nil))
	b := desired(t, "m-b", "build-b", a.UserData)
	// Killed after the surge: 2 old, 1 new Ready, desired 3, MaxSize raised.
	g := group("2", 3)
	st := State{Region: region, Group: g, Versions: []TemplateVersion{version(1, a, false), version(2, b, true)},
		Instances: []Instance{inst("i-1", "1"), inst("i-2", "1"), inst("i-3", "2")},
		Nodes:     []Node{readyNode("i-1", a), readyNode("i-2", a), readyNode("i-3", b)}}
	p, _ := PlanRollout(st, b)
	if p.Create || p.Switch || ids(p.Replace) != "i-1,i-2" || ids(p.Current) != "i-3" {
		t.Fatalf("create %v switch %v replace %s current %s", p.Create, p.Switch, ids(p.Replace), ids(p.Current))
	}
	if p.Stamp.Size != 2 || p.Stamp.MaxSize != 2 {
		t.Errorf("stamp %+v: the size and MaxSize the rollout started from", p.Stamp)
	}
	if !strings.Contains(p.InFlight, "2 old instance(s) left") || !strings.Contains(p.InFlight, "1 instance(s) above the size 2") {
		t.Errorf("in flight %q", p.InFlight)
	}
	// A new image over the unfinished rollout returns the group to the
	// size that one started from.
	c := desired(t, "m-c", "build-c", a.UserData)
	p, _ = PlanRollout(st, c)
	if !p.Create || p.Stamp.Size != 2 || p.Stamp.MaxSize != 2 || ids(p.Replace) != "i-1,i-2,i-3" {
		t.Errorf("over an unfinished rollout: stamp %+v replace %s", p.Stamp, ids(p.Replace))
	}
	// A finished rollout whose group was scaled up since: the new size.
	st.Instances[0].TemplateVersion, st.Instances[1].TemplateVersion = "2", "2"
	st.Nodes[0].Labels, st.Nodes[1].Labels = st.Nodes[2].Labels, st.Nodes[2].Labels
	p, _ = PlanRollout(st, c)
	if p.Stamp.Size != 3 || p.Stamp.MaxSize != 3 {
		t.Errorf("after a finished rollout: stamp %+v", p.Stamp)
	}
}

func TestPlanVersionUnknown(t *testing.T) {
	a := desired(t, "m-a", "build-a", userData(t, "abcdef.0123456789abcdef", nil))
	// Instances that name "Default" (or a deleted version): the labels decide.
	st := State{Region: region, Group: group("1", 2), Versions: []TemplateVersion{version(1, a, false)},
		Instances: []Instance{inst("i-1", "Default"), inst("i-2", "7")}, Nodes: []Node{readyNode("i-1", a)}}
	st.Versions[0].Default = false
	p, _ := PlanRollout(st, a)
	if ids(p.Current) != "i-1" || ids(p.Replace) != "i-2" {
		t.Errorf("current %s replace %s", ids(p.Current), ids(p.Replace))
	}
	// Another template's instance is old; a group without a template or
	// with a missing version is refused.
	st.Instances[0].TemplateID = "lt-other"
	if p, _ := PlanRollout(st, a); ids(p.Replace) != "i-2,i-1" { // no Node first
		t.Errorf("other template: replace %s", ids(p.Replace))
	}
	st.Group.TemplateVersion = "9"
	if _, err := PlanRollout(st, a); err == nil || !strings.Contains(err.Error(), "version 9") {
		t.Errorf("missing version: %v", err)
	}
	st.Group.TemplateID = ""
	if _, err := PlanRollout(st, a); err == nil || !strings.Contains(err.Error(), "no launch template") {
		t.Errorf("no template: %v", err)
	}
}

func TestPlanPendingReasons(t *testing.T) {
	b := desired(t, "m-b", "", userData(t, "abcdef.0123456789abcdef", nil))
	notReady := readyNode("i-2", b)
	notReady.Conditions[0].Status = "False"
	st := State{Region: region, Group: group("1", 3), Versions: []TemplateVersion{version(1, b, true)},
		Instances: []Instance{{ID: "i-1", State: Pending, TemplateID: "lt-1", TemplateVersion: "1"}, inst("i-2", "1"), inst("i-3", "1"),
			{ID: "i-4", State: PendingWait, TemplateID: "lt-1", TemplateVersion: "1"}},
		Nodes: []Node{notReady, readyNode("i-3", desired(t, "m-b", "any-build", b.UserData))}}
	p, _ := PlanRollout(st, b)
	if ids(p.Pending) != "i-1,i-2,i-4" || p.Pending[0].Reason != "instance Pending" || p.Pending[1].Reason != "Node node-i-2 not Ready" ||
		!strings.HasPrefix(p.Pending[2].Reason, "instance Pending:Wait: a scale-out lifecycle hook holds it") {
		t.Errorf("pending %v", p.Pending)
	}
	// Build ID unknown (untagged image): the build label is not checked.
	if ids(p.Current) != "i-3" {
		t.Errorf("current %s", ids(p.Current))
	}
	if !strings.Contains(p.Text(Options{MaxUnavailable: 1, Surge: 1}), "checked by their node-config label only") {
		t.Errorf("text does not say the build is unknown")
	}
}

func TestOptionsCheck(t *testing.T) {
	for _, o := range []Options{{MaxUnavailable: 0, Surge: 1}, {MaxUnavailable: 1, Surge: 0}} {
		if o.Check() == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	if err := (Options{MaxUnavailable: 1, Surge: 1}).Check(); err != nil {
		t.Error(err)
	}
}

// fullTemplate is a template at ECS's limit: version 1 Terraform's, 2 to
// 30 drover's with 4 the default, the group on 30 and its instances on 30
// and on straggler versions 2 and 3.
func fullTemplate(a Desired) State {
	st := State{Region: region, Group: group("30", 3)}
	for n := int64(1); n <= MaxTemplateVersions; n++ {
		v := version(n, a, n > 1)
		v.Default = n == 4
		st.Versions = append(st.Versions, v)
	}
	st.Instances = []Instance{inst("i-1", "30"), inst("i-2", "3"),
		{ID: "i-3", State: "Removing", TemplateID: "lt-1", TemplateVersion: "2"}}
	st.Nodes = []Node{readyNode("i-1", a), readyNode("i-2", a)}
	return st
}

func TestPlanPrunesOldVersions(t *testing.T) {
	ud := userData(t, "abcdef.0123456789abcdef", nil)
	a, b := desired(t, "m-a", "build-a", ud), desired(t, "m-b", "build-b", ud)

	st := fullTemplate(a)
	p, err := PlanRollout(st, b)
	if err != nil {
		t.Fatal(err)
	}
	// 1 is not drover's, 2 and 3 launched instances still in the group,
	// 4 is the default, 30 the group's: 5 is the oldest free one.
	if !p.Create || fmt.Sprint(p.Prune) != "[5]" {
		t.Errorf("create %v prune %v, want version 5 deleted", p.Create, p.Prune)
	}
	if txt := p.Text(Options{MaxUnavailable: 1, Surge: 1}); !strings.Contains(txt, "delete version(s) 5 of lt-1, drover's oldest unused ones") {
		t.Errorf("plan text lacks the deletion:\n%s", txt)
	}

	// One version fewer: room enough, nothing deleted.
	st.Versions = st.Versions[:len(st.Versions)-1]
	st.Group.TemplateVersion, st.Instances[0].TemplateVersion = "29", "29"
	if p, err := PlanRollout(st, b); err != nil || len(p.Prune) != 0 {
		t.Errorf("29 versions: prune %v, %v; want none", p.Prune, err)
	}

	// The group already on the desired version: nothing created, nothing deleted.
	st = fullTemplate(a)
	if p, err := PlanRollout(st, a); err != nil || len(p.Prune) != 0 || p.Create {
		t.Errorf("unchanged: create %v prune %v, %v", p.Create, p.Prune, err)
	}

	// Only versions drover did not make, or ones in use, are left (30
	// only because the group launches from it).
	st.Instances[0].TemplateVersion = "3"
	for i := range st.Versions {
		if n := st.Versions[i].Number; n > 4 && n < 30 {
			st.Versions[i].Description = "made by terraform"
		}
	}
	_, err = PlanRollout(st, b)
	if err == nil || !strings.Contains(err.Error(), "launch template lt-1 has 30 versions") ||
		!strings.Contains(err.Error(), "0 of them are drover's and in use by nothing") || !strings.Contains(err.Error(), "DeleteLaunchTemplateVersion") {
		t.Errorf("nothing drover may delete: %v", err)
	}
}

// Percent limits resolve against the group's size as a Deployment's
// rolling update does: the surge rounded up, max-unavailable down, and at
// least 1 each.
func TestOptionsResolvePercent(t *testing.T) {
	for _, c := range []struct {
		o         Options
		size      int
		surge, mu int
	}{
		{Options{SurgePercent: 20, MaxUnavailablePercent: 20}, 50, 10, 10},
		{Options{SurgePercent: 25, MaxUnavailablePercent: 25}, 10, 3, 2},
		{Options{SurgePercent: 1, MaxUnavailablePercent: 1}, 3, 1, 1},
		{Options{SurgePercent: 100, MaxUnavailable: 2}, 7, 7, 2},
		{Options{Surge: 3, MaxUnavailablePercent: 50}, 5, 3, 2},
	} {
		got := c.o.Resolve(c.size)
		if got.Surge != c.surge || got.MaxUnavailable != c.mu || got.SurgePercent != 0 || got.MaxUnavailablePercent != 0 {
			t.Errorf("%+v of %d: surge %d, max-unavailable %d; want %d and %d", c.o, c.size, got.Surge, got.MaxUnavailable, c.surge, c.mu)
		}
	}
	for _, o := range []Options{{SurgePercent: 101, MaxUnavailable: 1}, {Surge: 1, MaxUnavailablePercent: -5}, {Surge: 0, MaxUnavailable: 1}} {
		if err := o.Check(); err == nil {
			t.Errorf("Check(%+v) = nil, want an error", o)
		}
	}
}
