package rollout

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/drover-os/drover/nodecontract"
)

// Member is an instance of the group with its Node (nil when it has
// none) and why the plan puts it where it is.
type Member struct {
	Instance Instance
	Node     *Node
	Reason   string
}

func (m Member) String() string {
	s := m.Instance.ID
	var in []string
	if m.Instance.Zone != "" {
		in = append(in, "zone "+m.Instance.Zone)
	}
	if m.Node != nil && m.Node.Name != m.Instance.ID {
		in = append(in, "node "+m.Node.Name)
	}
	if len(in) > 0 {
		s += " (" + strings.Join(in, ", ") + ")"
	}
	if m.Reason != "" {
		s += ": " + m.Reason
	}
	return s
}

// Plan is what a rollout does to reach Desired, worked out from one
// observed State.
type Plan struct {
	Group   Group
	Desired Desired
	// Active is the version the group launches from now.
	Active *TemplateVersion
	// Target is the existing version new instances come from; nil when
	// Create makes it.
	Target *TemplateVersion
	// Create: CreateLaunchTemplateVersion from Active's data with the
	// desired image and user-data. Switch: ModifyScalingGroup to Target.
	Create, Switch bool
	// Prune are the versions deleted before Create to make room for it
	// (oldest first; see pruneFor).
	Prune []int64
	// Stamp is the target version's description: the one to write, or
	// the one it carries.
	Stamp Stamp
	// Current instances run the desired image and config and their Node
	// is Ready with the labels to match; Pending ones were launched for it
	// but are not there yet; Replace are the old ones, in the order they
	// are replaced; Skipped are left alone (Standby, Protected, …).
	Current, Pending, Replace, Skipped []Member
	// InFlight says why the group is in the middle of a rollout to
	// Desired ("" when it is not): only --resume continues it.
	InFlight string
}

// NothingToDo reports whether the group already is where Desired wants it.
func (p *Plan) NothingToDo() bool {
	return !p.Create && !p.Switch && len(p.Replace) == 0 && len(p.Pending) == 0
}

// PlanRollout works out the rollout of st's group to d. It fails only when the
// group cannot be rolled at all (no launch template, a version that does
// not exist).
func PlanRollout(st State, d Desired) (*Plan, error) {
	g := st.Group
	if g.NoDesiredCapacity {
		return nil, errNoDesired(g.ID)
	}
	if g.TemplateID == "" {
		return nil, fmt.Errorf("scaling group %s has no launch template (it uses a scaling configuration): drover rollout needs a group created from a launch template", g.ID)
	}
	active := st.version(g.TemplateID, g.TemplateVersion)
	if active == nil {
		return nil, fmt.Errorf("scaling group %s uses launch template %s version %s, which DescribeLaunchTemplateVersions does not list", g.ID, g.TemplateID, g.TemplateVersion)
	}
	if d.ConfigLabel() == "" || d.ImageID == "" {
		return nil, errors.New("desired state without an image or a config digest")
	}
	p := &Plan{Group: g, Desired: d, Active: active}
	same := func(v *TemplateVersion) bool { return wants(v, d) && bytes.Equal(v.UserData, d.UserData) }
	switch {
	case same(active):
		p.Target = active
	default:
		// A version of ours with exactly this user-data: an earlier run
		// made it and was stopped before, or rolled back after, using it.
		for i := range st.Versions {
			v := &st.Versions[i]
			if _, ok := ParseStamp(v.Description); ok && same(v) && (p.Target == nil || v.Number > p.Target.Number) {
				p.Target = v
			}
		}
		p.Create = p.Target == nil
		p.Switch = true
	}

	for _, in := range st.Instances {
		if in.leaving() {
			continue
		}
		m := Member{Instance: in, Node: st.node(in.ID)}
		if m.Reason = in.skip(); m.Reason != "" {
			p.Skipped = append(p.Skipped, m)
			continue
		}
		v := st.version(in.TemplateID, in.TemplateVersion)
		var fromTarget bool
		switch {
		case in.TemplateID != g.TemplateID:
			m.Reason = "launched from launch template " + orNone(in.TemplateID) + ", not " + g.TemplateID
		case v == nil:
			// The version is gone (or named Default/Latest): the Node's
			// labels say what the instance runs.
			fromTarget = m.Node != nil && labelsOK(m.Node, d) == ""
			if !fromTarget {
				m.Reason = "launched from launch template version " + orNone(in.TemplateVersion) + ", which is not listed, and its Node does not carry the desired labels"
			}
		default:
			fromTarget = wants(v, d)
			if !fromTarget {
				m.Reason = versionDiff(v, d)
			}
		}
		if !fromTarget {
			p.Replace = append(p.Replace, m)
			continue
		}
		switch {
		case m.Node == nil:
			m.Reason = "no Node with providerID " + st.Region + "." + in.ID + " yet"
			if in.State != InService {
				m.Reason = "instance " + in.State
			}
			if w := hookWait(in.State); w != "" {
				m.Reason += ": " + w
			}
		case !m.Node.Ready():
			m.Reason = "Node " + m.Node.Name + " not Ready"
		default:
			m.Reason = labelsOK(m.Node, d)
		}
		if m.Reason != "" {
			p.Pending = append(p.Pending, m)
		} else {
			p.Current = append(p.Current, m)
		}
	}
	if p.Create {
		prune, err := pruneFor(st, active)
		if err != nil {
			return nil, err
		}
		p.Prune = prune
	}
	sort.SliceStable(p.Replace, func(i, j int) bool {
		a, b := replaceRank(p.Replace[i]), replaceRank(p.Replace[j])
		if a != b {
			return a < b
		}
		return p.Replace[i].Instance.ID < p.Replace[j].Instance.ID
	})

	// Skipped instances count toward the desired capacity as much as the
	// others (ESS's "stable instances" are InService, Standby and
	// Protected): the size a rollout returns to counts them too.
	capacity := max(g.DesiredCapacity, len(p.Current)+len(p.Pending)+len(p.Replace)+len(p.Skipped))
	p.Stamp = Stamp{BuildID: d.BuildID, Config: d.ConfigLabel(), ImageID: d.ImageID, Size: capacity, MaxSize: g.MaxSize}
	if s, ok := ParseStamp(active.Description); ok && p.Create && (len(p.Replace) > 0 || len(p.Pending) > 0) && rolling(st, active) {
		// A new rollout over an unfinished one: return the group to the
		// size that one started from, not to its surge.
		p.Stamp.Size, p.Stamp.MaxSize = s.Size, s.MaxSize
	}
	if p.Target != nil {
		if s, ok := ParseStamp(p.Target.Description); ok {
			p.Stamp = s
		}
	}
	if !p.Create && !p.Switch && p.Stamp.Size > 0 {
		var why []string
		if n := len(p.Replace); n > 0 {
			why = append(why, fmt.Sprintf("%d old instance(s) left", n))
		}
		if n := len(p.Pending); n > 0 {
			why = append(why, fmt.Sprintf("%d new instance(s) not Ready yet", n))
		}
		if capacity > p.Stamp.Size {
			why = append(why, fmt.Sprintf("%d instance(s) above the size %d it started from", capacity-p.Stamp.Size, p.Stamp.Size))
		}
		if len(why) > 0 {
			p.InFlight = "the group already launches from version " + formatInt(active.Number) + " (" + active.Description + "): " + strings.Join(why, ", ")
		}
	}
	return p, nil
}

func errNoDesired(group string) error {
	return fmt.Errorf("scaling group %s has no desired capacity (ESS's \"expected number of instances\", which can be set only when a group is created): "+
		"drover counts on ESS keeping the group at it — without one a removed instance is not replaced and a failed launch is not retried; "+
		"create the group with a desired capacity (Terraform desired_capacity) and roll that one", group)
}

// MaxTemplateVersions is how many versions ECS keeps per launch template
// (CreateLaunchTemplateVersion: "a maximum of 30 versions"). A pipeline
// that rolls a few times a week reaches it within months.
const MaxTemplateVersions = 30

// pruneFor picks the versions to delete so that one more fits: drover's
// own (stamped) versions, oldest first, never the default version, the one
// the group launches from, or one an instance of the group was launched
// from. Versions drover did not make (Terraform's, a person's) are never
// deleted; when only those are left the rollout stops before any change.
func pruneFor(st State, active *TemplateVersion) ([]int64, error) {
	need := len(st.Versions) - MaxTemplateVersions + 1
	if need <= 0 {
		return nil, nil
	}
	used := map[int64]bool{active.Number: true}
	for _, in := range st.Instances {
		if v := st.version(in.TemplateID, in.TemplateVersion); v != nil {
			used[v.Number] = true
		}
	}
	var free []int64
	for _, v := range st.Versions {
		if _, ok := ParseStamp(v.Description); ok && !v.Default && !used[v.Number] {
			free = append(free, v.Number)
		}
	}
	slices.Sort(free)
	if len(free) < need {
		return nil, fmt.Errorf("launch template %s has %d versions, the most ECS keeps, and %d of them are drover's and in use by nothing (not the default, not the group's, no instance launched from it); %d must go for a new one: delete old versions (DeleteLaunchTemplateVersion) and run again",
			st.Group.TemplateID, len(st.Versions), len(free), need)
	}
	return free[:need], nil
}

// rolling reports whether some active instance of st was launched for
// another state than v's: a rollout to v has not finished.
func rolling(st State, v *TemplateVersion) bool {
	for _, in := range st.Instances {
		if in.skip() != "" {
			continue
		}
		iv := st.version(in.TemplateID, in.TemplateVersion)
		if iv == nil || iv.ImageID != v.ImageID || iv.Config != v.Config {
			return true
		}
	}
	return false
}

// wants reports whether instances launched from v run d's image and config.
func wants(v *TemplateVersion, d Desired) bool {
	return v.ImageID == d.ImageID && v.Config != "" && v.Config == d.ConfigLabel()
}

func versionDiff(v *TemplateVersion, d Desired) string {
	var diffs []string
	if v.ImageID != d.ImageID {
		diffs = append(diffs, "image "+orNone(v.ImageID)+", want "+d.ImageID)
	}
	if v.Config != d.ConfigLabel() {
		diffs = append(diffs, "node config "+short(v.Config)+", want "+short(d.ConfigLabel()))
	}
	return "version " + formatInt(v.Number) + ": " + strings.Join(diffs, "; ")
}

// labelsOK is "" when the node carries d's labels, else what differs.
func labelsOK(n *Node, d Desired) string {
	var diffs []string
	if got := n.Labels[nodecontract.LabelNodeConfig]; got != d.ConfigLabel() {
		diffs = append(diffs, nodecontract.LabelNodeConfig+"="+orNone(got)+", want "+d.ConfigLabel())
	}
	if got := n.Labels[nodecontract.LabelBuildID]; d.BuildID != "" && got != d.BuildID {
		diffs = append(diffs, nodecontract.LabelBuildID+"="+orNone(got)+", want "+d.BuildID)
	}
	if len(diffs) == 0 {
		return ""
	}
	return "Node " + n.Name + " is Ready with label " + strings.Join(diffs, " and ")
}

// replaceRank orders old instances: one already cordoned first (an
// interrupted run was draining it), then those not serving anyway, then
// the rest.
func replaceRank(m Member) int {
	switch {
	case m.Node != nil && m.Node.Unschedulable:
		return 0
	case m.Node == nil || !m.Node.Ready():
		return 1
	}
	return 2
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12] + "…"
	}
	return orNone(s)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// Text is the plan as drover rollout --dry-run prints it.
func (p *Plan) Text(o Options) string {
	var b strings.Builder
	d := p.Desired
	build := d.BuildID
	if build == "" {
		build = "unknown (the image has no " + nodecontract.ImageTagBuildID + " tag: new Nodes are checked by their node-config label only)"
	}
	fmt.Fprintf(&b, "scaling group %s: launch template %s, version %s (%s)\n", p.Group.ID, p.Group.TemplateID, p.Group.TemplateVersion, formatInt(p.Active.Number))
	fmt.Fprintf(&b, "desired: image %s, build %s, node config %s\n", d.ImageID, build, d.ConfigLabel())
	switch {
	case p.Create:
		if len(p.Prune) > 0 {
			fmt.Fprintf(&b, "delete version(s) %s of %s, drover's oldest unused ones: ECS keeps at most %d versions per launch template\n", joinInts(p.Prune), p.Group.TemplateID, MaxTemplateVersions)
		}
		fmt.Fprintf(&b, "create a version of %s from version %d with image %s and the new user-data (%d bytes), description %q\n", p.Group.TemplateID, p.Active.Number, d.ImageID, len(d.UserData), p.Stamp.String())
		b.WriteString("switch the group to the new version\n")
	case p.Switch:
		fmt.Fprintf(&b, "switch the group to version %d (%s)\n", p.Target.Number, p.Target.Description)
	}
	if p.InFlight != "" {
		fmt.Fprintf(&b, "in flight: %s\n", p.InFlight)
	}
	for _, m := range p.Current {
		fmt.Fprintf(&b, "keep %s\n", m)
	}
	for _, m := range p.Pending {
		fmt.Fprintf(&b, "wait for %s\n", m)
	}
	if n := len(p.Replace); n > 0 {
		fmt.Fprintf(&b, "replace %d instance(s), launching up to %d at a time (--surge) and draining up to %d at a time (--max-unavailable); the group returns to %d instance(s), MaxSize %d:\n", n, o.Surge, o.MaxUnavailable, p.Stamp.Size, p.Stamp.MaxSize)
		for _, m := range p.Replace {
			fmt.Fprintf(&b, "  %s\n", m)
		}
	}
	for _, m := range p.Skipped {
		fmt.Fprintf(&b, "skip %s\n", m)
	}
	if p.NothingToDo() {
		b.WriteString("nothing to do\n")
	} else if len(p.Replace) == 0 && len(p.Pending) == 0 {
		b.WriteString("no instance is replaced (the node config is unchanged: a rotated bootstrap token reaches new instances only)\n")
	}
	return b.String()
}

func joinInts(ns []int64) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = formatInt(n)
	}
	return strings.Join(s, ", ")
}

// soak moves the new instances whose Node has been Ready for less than
// minReady from Current to Pending: they do not count as Ready yet. A
// Ready condition without a transition time (the API server always sets
// one; not documented otherwise) counts as soaked.
func (p *Plan) soak(now time.Time, minReady time.Duration) {
	if minReady <= 0 {
		return
	}
	cur := p.Current[:0]
	for _, m := range p.Current {
		c, _ := m.Node.Condition("Ready")
		if left := minReady - now.Sub(c.Since); !c.Since.IsZero() && left > 0 {
			m.Reason = fmt.Sprintf("Node %s Ready since %s: soaking for --min-ready %s", m.Node.Name, c.Since.UTC().Format(time.TimeOnly), minReady)
			p.Pending = append(p.Pending, m)
			continue
		}
		cur = append(cur, m)
	}
	p.Current = cur
}

// Options are a rollout's limits.
type Options struct {
	// MaxUnavailable is how many old Nodes are cordoned and drained at
	// once; Surge how many instances are launched above the group's size.
	MaxUnavailable, Surge int
	// MaxUnavailablePercent and SurgePercent, when not 0, give the limits
	// as a percentage of the group's size instead; Resolve turns them
	// into counts as a Deployment's rolling update does: the surge
	// rounded up, max-unavailable rounded down, and at least 1 each (a
	// rollout needs both).
	MaxUnavailablePercent, SurgePercent int
	// MaxUnhealthy (a count) or MaxUnhealthyPercent (of the instances a
	// repair judges) is the brake of a repair: more unhealthy Nodes than
	// that is a cluster-wide problem (the network, the control plane, a
	// bad config) that replacing nodes does not fix, so the repair
	// replaces none. 0 and 0: no brake.
	MaxUnhealthy, MaxUnhealthyPercent int
	// PauseAfterFirst ends the run (successfully) once its first batch of
	// old instances is removed, MaxSize restored: a pipeline checks the
	// new Nodes under load and goes on with --resume.
	PauseAfterFirst bool
}

// Resolve is o with its percentages turned into counts of size.
func (o Options) Resolve(size int) Options {
	if o.SurgePercent != 0 {
		o.Surge, o.SurgePercent = max(1, (size*o.SurgePercent+99)/100), 0
	}
	if o.MaxUnavailablePercent != 0 {
		o.MaxUnavailable, o.MaxUnavailablePercent = max(1, size*o.MaxUnavailablePercent/100), 0
	}
	return o
}

// Check rejects limits a rollout cannot keep.
func (o Options) Check() error {
	if o.SurgePercent < 0 || o.SurgePercent > 100 || o.MaxUnavailablePercent < 0 || o.MaxUnavailablePercent > 100 {
		return errors.New("--surge and --max-unavailable as a percentage must be within 1%..100%")
	}
	o = o.Resolve(1)
	if o.Surge < 1 {
		return errors.New("--surge must be at least 1: an old instance is removed only once its replacement is Ready")
	}
	if o.MaxUnavailable < 1 {
		return errors.New("--max-unavailable must be at least 1: an old Node must be drained to be replaced")
	}
	return nil
}
