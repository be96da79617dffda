package rollout

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
)

// FakeCloud is Cloud in memory, converging like ESS: ScaleOut and a
// Remove that keeps the desired capacity launch Pending instances from the
// group's version, which turn InService at the next Instances call.
type FakeCloud struct {
	mu       sync.Mutex
	G        Group
	Versions []TemplateVersion
	Insts    []Instance
	Console  map[string][]byte
	// Launched is called (without the lock) for each instance the group
	// launches, with the version it comes from.
	Launched func(Instance, TemplateVersion)
	// BeforeRemove is called (without the lock) before each Remove; an
	// error fails the call.
	BeforeRemove func(ids []string, decrease bool) error
	// AfterSetMaxSize is called (without the lock) after each SetMaxSize,
	// e.g. to play someone changing MaxSize back.
	AfterSetMaxSize func(n int)
	// RemoveWait keeps a removed instance listed in Removing:Wait for
	// that many Instances calls, as a scale-in lifecycle hook does.
	RemoveWait int
	waiting    map[string]int
	// ScaleOutResult, when set, is the activity ESS makes of a ScaleOut of
	// n (ID and Description filled in when empty): Failed raises the
	// desired capacity and launches nothing (ESS would try again),
	// Rejected changes nothing, anything else launches.
	ScaleOutResult func(n int) Activity
	// Tags are the group's tags; Activities its scaling activities, newest
	// last (LastActivity answers the last; ScaleOut appends one).
	Tags       map[string]string
	Activities []Activity
	// Calls records every write but the tag ones, e.g. "ScaleOut 1",
	// "Remove i-1 true"; TagCalls those, e.g. "Tag drover:surge=max=2
	// surge=3", "Untag drover:surge".
	Calls    []string
	TagCalls []string
	next     int
	latest   int64 // the highest version number ever made: ECS never reuses one
}

func (f *FakeCloud) record(format string, a ...any) {
	f.Calls = append(f.Calls, fmt.Sprintf(format, a...))
}

// Writes returns the recorded write calls.
func (f *FakeCloud) Writes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.Calls)
}

// Group implements Cloud.
func (f *FakeCloud) Group(_ context.Context, id string) (Group, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id != f.G.ID {
		return Group{}, fmt.Errorf("scaling group %s: not found", id)
	}
	return f.G, nil
}

// Instances implements Cloud; Pending instances listed once turn
// InService.
func (f *FakeCloud) Instances(context.Context, string) ([]Instance, error) {
	f.mu.Lock()
	out := slices.Clone(f.Insts)
	for i := range f.Insts {
		if f.Insts[i].State == Pending {
			f.Insts[i].State = InService
		}
	}
	for id := range f.waiting {
		if f.waiting[id]--; f.waiting[id] <= 0 {
			delete(f.waiting, id)
			f.Insts = slices.DeleteFunc(f.Insts, func(i Instance) bool { return i.ID == id })
		}
	}
	f.mu.Unlock()
	return out, nil
}

// active counts the instances not on their way out. The caller holds f.mu.
func (f *FakeCloud) active() int {
	n := 0
	for _, in := range f.Insts {
		if !in.leaving() {
			n++
		}
	}
	return n
}

// TemplateVersions implements Cloud.
func (f *FakeCloud) TemplateVersions(context.Context, string) ([]TemplateVersion, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := slices.Clone(f.Versions)
	for i := range out {
		out[i].Config = ""
	}
	return out, nil
}

// CreateTemplateVersion implements Cloud.
func (f *FakeCloud) CreateTemplateVersion(_ context.Context, templateID string, base int64, imageID string, userData []byte, desc string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.Versions) >= MaxTemplateVersions {
		return 0, fmt.Errorf("launch template %s already has %d versions", templateID, len(f.Versions))
	}
	n := f.latest
	for _, v := range f.Versions {
		n = max(n, v.Number)
	}
	n++
	f.latest = n
	f.Versions = append(f.Versions, TemplateVersion{TemplateID: templateID, Number: n, Description: desc, ImageID: imageID, UserData: slices.Clone(userData)})
	f.record("CreateTemplateVersion from %d %s", base, imageID)
	return n, nil
}

// DeleteTemplateVersions implements Cloud; like ECS it refuses the
// default version and one that does not exist, deleting none.
func (f *FakeCloud) DeleteTemplateVersions(_ context.Context, templateID string, numbers []int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range numbers {
		i := slices.IndexFunc(f.Versions, func(v TemplateVersion) bool { return v.Number == n })
		if i < 0 || f.Versions[i].Default {
			return fmt.Errorf("launch template %s version %d: not found or the default", templateID, n)
		}
	}
	f.Versions = slices.DeleteFunc(f.Versions, func(v TemplateVersion) bool { return slices.Contains(numbers, v.Number) })
	f.record("DeleteTemplateVersions %v", numbers)
	return nil
}

// SetTemplateVersion implements Cloud.
func (f *FakeCloud) SetTemplateVersion(_ context.Context, _, templateID, version string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.G.TemplateID, f.G.TemplateVersion = templateID, version
	f.record("SetTemplateVersion %s", version)
	return nil
}

// SetMaxSize implements Cloud.
func (f *FakeCloud) SetMaxSize(_ context.Context, _ string, n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n < f.G.DesiredCapacity || n < f.G.MinSize {
		return fmt.Errorf("InvalidParameter: MaxSize %d below the desired capacity %d or MinSize %d", n, f.G.DesiredCapacity, f.G.MinSize)
	}
	f.G.MaxSize = n
	f.record("SetMaxSize %d", n)
	if fn := f.AfterSetMaxSize; fn != nil {
		f.mu.Unlock()
		fn(n)
		f.mu.Lock()
	}
	return nil
}

// SetMinSize implements Cloud.
func (f *FakeCloud) SetMinSize(_ context.Context, _ string, n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n < 0 || n > f.G.MaxSize {
		return fmt.Errorf("InvalidParameter: MinSize %d outside 0..MaxSize %d", n, f.G.MaxSize)
	}
	f.G.MinSize = n
	f.record("SetMinSize %d", n)
	return nil
}

// ScaleOut implements Cloud; like ESS (as the emulator models it) it
// clamps the desired capacity to MaxSize and records an activity:
// Successful, or Rejected when the desired capacity cannot grow, unless
// ScaleOutResult says otherwise.
func (f *FakeCloud) ScaleOut(_ context.Context, _ string, n int) (string, error) {
	f.mu.Lock()
	want := min(f.G.DesiredCapacity+n, f.G.MaxSize)
	a := Activity{StatusCode: ActivitySuccessful}
	if want == f.G.DesiredCapacity {
		a = Activity{StatusCode: ActivityRejected, StatusMessage: "the group is at its MaxSize"}
	}
	if fn := f.ScaleOutResult; fn != nil {
		f.mu.Unlock()
		a = fn(n)
		f.mu.Lock()
	}
	if a.ID == "" {
		a.ID = fmt.Sprintf("asa-%d", len(f.Activities)+1)
	}
	if a.Description == "" {
		a.Description = fmt.Sprintf("Add \"%d\" ECS instance(s)", n)
	}
	f.Activities = append(f.Activities, a)
	f.record("ScaleOut %d", n)
	var launched []launch
	switch a.StatusCode {
	case ActivityRejected:
	case ActivityFailed:
		f.G.DesiredCapacity = want // ESS keeps it and tries again
	default:
		f.G.DesiredCapacity = want
		launched = f.converge()
	}
	f.mu.Unlock()
	f.notify(launched)
	return a.ID, nil
}

// SetDesiredCapacity implements Cloud; like ESS it refuses a value outside
// MinSize..MaxSize. It launches what is missing and, unlike ESS, removes
// nothing: a test sees from the calls whether a rollout asked for less.
func (f *FakeCloud) SetDesiredCapacity(_ context.Context, _ string, n int) error {
	f.mu.Lock()
	if n < f.G.MinSize || n > f.G.MaxSize {
		f.mu.Unlock()
		return fmt.Errorf("InvalidParameter: DesiredCapacity %d outside MinSize %d..MaxSize %d", n, f.G.MinSize, f.G.MaxSize)
	}
	f.G.DesiredCapacity = n
	f.record("SetDesiredCapacity %d", n)
	launched := f.converge()
	f.mu.Unlock()
	f.notify(launched)
	return nil
}

// Activity implements Cloud.
func (f *FakeCloud) Activity(_ context.Context, _, id string) (Activity, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.Activities {
		if a.ID == id {
			return a, true, nil
		}
	}
	return Activity{}, false, nil
}

// Remove implements Cloud.
func (f *FakeCloud) Remove(_ context.Context, _ string, ids []string, decrease bool) error {
	if f.BeforeRemove != nil {
		if err := f.BeforeRemove(ids, decrease); err != nil {
			return err
		}
	}
	f.mu.Lock()
	if f.active()-len(ids) < f.G.MinSize {
		f.mu.Unlock()
		// ESS refuses it whatever DecreaseDesiredCapacity says.
		return fmt.Errorf("IncorrectCapacity.MinSize: removing %d of %d instances would leave fewer than MinSize %d", len(ids), f.active(), f.G.MinSize)
	}
	if f.RemoveWait > 0 {
		if f.waiting == nil {
			f.waiting = map[string]int{}
		}
		for i := range f.Insts {
			if slices.Contains(ids, f.Insts[i].ID) {
				f.Insts[i].State = RemovingWait
				f.waiting[f.Insts[i].ID] = f.RemoveWait
			}
		}
	} else {
		f.Insts = slices.DeleteFunc(f.Insts, func(i Instance) bool { return slices.Contains(ids, i.ID) })
	}
	if decrease {
		f.G.DesiredCapacity -= len(ids)
	}
	f.record("Remove %s %t", strings.Join(ids, ","), decrease)
	launched := f.converge()
	f.mu.Unlock()
	f.notify(launched)
	return nil
}

// converge launches instances up to the desired capacity, locked.
func (f *FakeCloud) converge() []launch {
	var out []launch
	for f.active() < f.G.DesiredCapacity {
		f.next++
		v := f.resolve(f.G.TemplateVersion)
		in := Instance{ID: fmt.Sprintf("i-new%d", f.next), State: Pending, TemplateID: f.G.TemplateID, TemplateVersion: formatInt(v.Number)}
		f.Insts = append(f.Insts, in)
		out = append(out, launch{in, v})
	}
	return out
}

type launch struct {
	in Instance
	v  TemplateVersion
}

func (f *FakeCloud) notify(ls []launch) {
	if f.Launched == nil {
		return
	}
	for _, l := range ls {
		f.Launched(l.in, l.v)
	}
}

func (f *FakeCloud) resolve(v string) TemplateVersion {
	st := State{Group: f.G, Versions: f.Versions}
	if tv := st.version(f.G.TemplateID, v); tv != nil {
		return *tv
	}
	return TemplateVersion{}
}

// ConsoleOutput implements Cloud.
func (f *FakeCloud) ConsoleOutput(_ context.Context, id string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.Console[id], nil
}

// GroupTags implements Cloud.
func (f *FakeCloud) GroupTags(context.Context, string) (map[string]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.Tags), nil
}

// SetGroupTags implements Cloud.
func (f *FakeCloud) SetGroupTags(_ context.Context, _ string, tags map[string]string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Tags == nil {
		f.Tags = map[string]string{}
	}
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		f.Tags[k] = tags[k]
		f.TagCalls = append(f.TagCalls, "Tag "+k+"="+tags[k])
	}
	return nil
}

// RemoveGroupTags implements Cloud.
func (f *FakeCloud) RemoveGroupTags(_ context.Context, _ string, keys []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(keys) == 0 {
		// Recorded all the same: an UntagResources call for nothing.
		f.TagCalls = append(f.TagCalls, "Untag")
	}
	for _, k := range keys {
		delete(f.Tags, k)
		f.TagCalls = append(f.TagCalls, "Untag "+k)
	}
	return nil
}

// LastActivity implements Cloud.
func (f *FakeCloud) LastActivity(context.Context, string) (Activity, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.Activities) == 0 {
		return Activity{}, false, nil
	}
	return f.Activities[len(f.Activities)-1], true, nil
}

// TagWrites returns the recorded tag writes.
func (f *FakeCloud) TagWrites() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.TagCalls)
}

// FakeCluster is Cluster in memory.
type FakeCluster struct {
	mu      sync.Mutex
	NodeMap map[string]*Node
	Evs     map[string][]string
	// DrainFunc, when set, is what Drain does after recording the call.
	DrainFunc func(ctx context.Context, node string) error
	// OnCordon is called (without the lock) after a Node is cordoned.
	OnCordon func(node string)
	Calls    []string
}

// NewFakeCluster holds nodes.
func NewFakeCluster(nodes ...Node) *FakeCluster {
	c := &FakeCluster{NodeMap: map[string]*Node{}, Evs: map[string][]string{}}
	for _, n := range nodes {
		c.Put(n)
	}
	return c
}

// Put adds or replaces a Node.
func (c *FakeCluster) Put(n Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.NodeMap[n.Name] = &n
}

// Update changes a Node in place; false when there is none.
func (c *FakeCluster) Update(name string, fn func(*Node)) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.NodeMap[name]
	if ok {
		fn(n)
	}
	return ok
}

// Writes returns the recorded write calls.
func (c *FakeCluster) Writes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.Calls)
}

// Nodes implements Cluster.
func (c *FakeCluster) Nodes(context.Context) ([]Node, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Node
	for _, n := range c.NodeMap {
		out = append(out, *n)
	}
	slices.SortFunc(out, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Cordon implements Cluster.
func (c *FakeCluster) Cordon(_ context.Context, name string) error {
	c.mu.Lock()
	n, ok := c.NodeMap[name]
	if ok {
		n.Unschedulable = true
	}
	c.Calls = append(c.Calls, "Cordon "+name)
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("nodes %q not found", name)
	}
	if c.OnCordon != nil {
		c.OnCordon(name)
	}
	return nil
}

// Drain implements Cluster.
func (c *FakeCluster) Drain(ctx context.Context, name string, wait bool) error {
	c.mu.Lock()
	c.Calls = append(c.Calls, fmt.Sprintf("Drain %s %t", name, wait))
	fn := c.DrainFunc
	c.mu.Unlock()
	if fn != nil {
		return fn(ctx, name)
	}
	return nil
}

// DeleteNode implements Cluster.
func (c *FakeCluster) DeleteNode(_ context.Context, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.NodeMap, name)
	c.Calls = append(c.Calls, "DeleteNode "+name)
	return nil
}

// Events implements Cluster.
func (c *FakeCluster) Events(_ context.Context, name string) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.Evs[name]), nil
}
