package rollout

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/drover-os/drover/nodecontract"
)

// UnhealthyConditions are the Node conditions the agent sets True when the
// node needs replacing (nodecontract.UnhealthyConditions). Each counts once
// True for longer than --after, so a NIC's blip or a single restart does
// not.
var UnhealthyConditions = nodecontract.UnhealthyConditions()

// RepairPlan is what a repair does: the instances to replace, in order.
type RepairPlan struct {
	Group   Group
	Replace []Member
	// Healthy counts the in-service instances left alone.
	Healthy int
	// Notes are instances a repair does not judge (no Node, not in
	// service).
	Notes []string
}

// PlanRepair finds the in-service instances whose Node has been NotReady
// (Ready False or Unknown), or carried an unhealthy condition, for longer
// than after.
func PlanRepair(st State, now time.Time, after time.Duration) *RepairPlan {
	rp := &RepairPlan{Group: st.Group}
	for _, in := range st.Instances {
		if in.leaving() {
			continue
		}
		n := st.node(in.ID)
		switch {
		case in.attached():
			// Removed without lowering the desired capacity, it would
			// leave the group still running (unless entrusted) and be
			// replaced by one from the template: not drover's to do.
			rp.Notes = append(rp.Notes, in.ID+": attached to the group by hand (CreationType Attached), not judged")
			continue
		case in.State != InService:
			rp.Notes = append(rp.Notes, in.ID+": "+in.State+", not judged")
			continue
		case n == nil:
			rp.Notes = append(rp.Notes, in.ID+": no Node with providerID "+st.Region+"."+in.ID+", not judged")
			continue
		}
		if why := unhealthy(n, now, after); why != "" {
			rp.Replace = append(rp.Replace, Member{Instance: in, Node: n, Reason: why})
		} else {
			rp.Healthy++
		}
	}
	// NotReady first: replacing one does not lower the capacity.
	sort.SliceStable(rp.Replace, func(i, j int) bool {
		a, b := rp.Replace[i].Node.Ready(), rp.Replace[j].Node.Ready()
		if a != b {
			return !a
		}
		return rp.Replace[i].Instance.ID < rp.Replace[j].Instance.ID
	})
	return rp
}

// unhealthy says why a node is to be replaced, "" when it is not.
func unhealthy(n *Node, now time.Time, after time.Duration) string {
	var why []string
	if c, ok := n.Condition("Ready"); ok && c.Status != "True" && now.Sub(c.Since) > after {
		why = append(why, fmt.Sprintf("NotReady (Ready=%s %s) for %s", c.Status, c.Reason, now.Sub(c.Since).Round(time.Second)))
	}
	for _, t := range UnhealthyConditions {
		if c, ok := n.Condition(t); ok && c.Status == "True" && now.Sub(c.Since) > after {
			why = append(why, fmt.Sprintf("%s=True (%s: %s) for %s", t, c.Reason, c.Message, now.Sub(c.Since).Round(time.Second)))
		}
	}
	return strings.Join(why, "; ")
}

// repairBudget is "" when replacing m keeps the group's unavailable
// instances (not in service, or with a Node that is missing or not Ready)
// within maxUnavailable, else why not. Replacing a node that is NotReady
// already takes nothing more away.
func repairBudget(st State, m Member, maxUnavailable int) string {
	if !m.Node.Ready() {
		return ""
	}
	down := 0
	for _, in := range st.Instances {
		if !in.active() {
			continue
		}
		if n := st.node(in.ID); in.State != InService || n == nil || !n.Ready() {
			down++
		}
	}
	if down+1 > maxUnavailable {
		return fmt.Sprintf("%d instance(s) of the group are unavailable already; replacing %s, whose Node is still Ready, would exceed --max-unavailable %d", down, m.Instance.ID, maxUnavailable)
	}
	return ""
}

// Text is the repair plan as printed.
func (rp *RepairPlan) Text(after time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "scaling group %s: %d healthy instance(s)\n", rp.Group.ID, rp.Healthy)
	for _, n := range rp.Notes {
		fmt.Fprintf(&b, "note %s\n", n)
	}
	for _, m := range rp.Replace {
		fmt.Fprintf(&b, "replace %s\n", m)
	}
	if len(rp.Replace) == 0 {
		fmt.Fprintf(&b, "nothing to repair: no Node has been NotReady or unhealthy (%s) for longer than %s\n", strings.Join(UnhealthyConditions, ", "), after)
	}
	return b.String()
}

// Repair replaces, one at a time, the instances PlanRepair finds: drain
// (when the Node still answers), remove without lowering the desired
// capacity so that ESS launches a replacement from the group's launch
// template version, and wait for a new instance's Node to be Ready before
// the next.
func (e *Env) Repair(ctx context.Context, groupID string, after time.Duration, o Options) error {
	if o.Resolve(1).MaxUnavailable < 1 {
		return fmt.Errorf("--max-unavailable must be at least 1 to repair")
	}
	st, err := e.Observe(ctx, groupID)
	if err != nil {
		return err
	}
	o = o.Resolve(st.Group.DesiredCapacity)
	if st.Group.NoDesiredCapacity {
		// The replacement of a removed instance is ESS's, for the
		// desired capacity.
		return errNoDesired(groupID)
	}
	tags, err := e.Cloud.GroupTags(ctx, groupID)
	if err != nil {
		return err
	}
	rp := PlanRepair(st, e.now(), after)
	for _, line := range strings.Split(strings.TrimSuffix(rp.Text(after), "\n"), "\n") {
		e.emit(Event{Kind: EventPlan, Group: groupID, Message: line})
	}
	if lerr := e.checkLock(groupID, tags); lerr != nil {
		if !e.DryRun {
			return lerr
		}
		e.emit(Event{Kind: EventPlan, Group: groupID, Message: lerr.Error()})
	}
	_, lowered := tags[MinTag]
	if lowered {
		e.emit(Event{Kind: EventPlan, Group: groupID, Message: fmt.Sprintf("restore MinSize: a repair lowered it to %d and did not put it back (tag %s=%q)", st.Group.MinSize, MinTag, tags[MinTag])})
	}
	if judged := len(rp.Replace) + rp.Healthy; len(rp.Replace) > 0 && (o.MaxUnhealthy > 0 || o.MaxUnhealthyPercent > 0) {
		limit, flag := o.MaxUnhealthy, fmt.Sprint(o.MaxUnhealthy)
		if o.MaxUnhealthyPercent > 0 {
			limit, flag = judged*o.MaxUnhealthyPercent/100, fmt.Sprintf("%d%% (%d of %d)", o.MaxUnhealthyPercent, judged*o.MaxUnhealthyPercent/100, judged)
		}
		if len(rp.Replace) > limit {
			return fmt.Errorf("scaling group %s: %d of %d judged Nodes are unhealthy, more than --max-unhealthy %s: that looks like a cluster-wide problem (network, control plane, node config), which replacing nodes does not fix; nothing replaced", groupID, len(rp.Replace), judged, flag)
		}
	}
	if len(rp.Replace) == 0 && !lowered {
		e.emit(Event{Kind: EventDone, Group: groupID, Message: "nothing to repair"})
		return nil
	}
	if e.DryRun {
		return nil
	}
	return e.underLock(ctx, groupID, func(ctx context.Context) error { return e.repair(ctx, groupID, after, o, rp) })
}

// repair is Repair under the group's lock.
func (e *Env) repair(ctx context.Context, groupID string, after time.Duration, o Options, rp *RepairPlan) error {
	if err := e.restoreMin(ctx, groupID); err != nil {
		return err
	}
	for _, c := range rp.Replace {
		st, err := e.Observe(ctx, groupID)
		if err != nil {
			return err
		}
		var m *Member
		for _, x := range PlanRepair(st, e.now(), after).Replace {
			if x.Instance.ID == c.Instance.ID {
				m = &x
			}
		}
		if m == nil {
			e.emit(Event{Kind: EventWarning, Group: groupID, Instance: c.Instance.ID, Message: "healthy again or gone: left alone"})
			continue
		}
		if why := repairBudget(st, *m, o.MaxUnavailable); why != "" {
			e.emit(Event{Kind: EventWarning, Group: groupID, Instance: m.Instance.ID, Message: why + ": left for a later run"})
			continue
		}
		if err := e.repairOne(ctx, groupID, st, *m); err != nil {
			return err
		}
	}
	e.emit(Event{Kind: EventDone, Group: groupID, Message: "repaired"})
	return nil
}

func (e *Env) repairOne(ctx context.Context, groupID string, st State, m Member) error {
	before := map[string]bool{}
	for _, in := range st.Instances {
		before[in.ID] = true
	}
	if m.Node.Ready() {
		// It still answers: let its pods move first. An unhealthy node
		// may not drain; it is replaced anyway.
		if err := e.drain(ctx, groupID, m, true); err != nil {
			e.emit(Event{Kind: EventWarning, Group: groupID, Instance: m.Instance.ID, Node: m.Node.Name, Message: err.Error() + "; replacing it anyway"})
		}
	}
	// ESS refuses to remove an instance that would leave fewer than
	// MinSize, whatever DecreaseDesiredCapacity says (a group of MinSize
	// = desired is the common case): lower MinSize while the replacement
	// launches; the desired capacity still has ESS launch it.
	// A repair killed meanwhile leaves MinTag: the next run restores it.
	if minSize := st.Group.MinSize; minSize > 0 && len(st.Instances)-1 < minSize {
		if err := e.lowerMin(ctx, groupID, minSize-1, minSize); err != nil {
			return err
		}
		defer func() {
			// A cancelled run still gets a minute to put MinSize back.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if err := e.restoreMin(rctx, groupID); err != nil {
				e.emit(Event{Kind: EventWarning, Group: groupID, Message: err.Error()})
			}
		}()
	}
	if err := e.Cloud.Remove(ctx, groupID, []string{m.Instance.ID}, false); err != nil {
		return err
	}
	e.emit(Event{Kind: EventRemove, Group: groupID, Instance: m.Instance.ID, Node: m.Node.Name, Message: "removed (" + m.Reason + "); the group launches a replacement"})
	if err := e.Cluster.DeleteNode(ctx, m.Node.Name); err != nil {
		e.emit(Event{Kind: EventWarning, Group: groupID, Instance: m.Instance.ID, Node: m.Node.Name, Message: "deleting the Node: " + err.Error()})
	}
	start := e.now()
	for {
		if err := e.sleep(ctx); err != nil {
			return err
		}
		st, err := e.Observe(ctx, groupID)
		if err != nil {
			return err
		}
		var waiting *Member
		for _, in := range st.Instances {
			if before[in.ID] || !in.active() {
				continue
			}
			n := st.node(in.ID)
			if in.State == InService && n != nil && n.Ready() {
				e.emit(Event{Kind: EventReady, Group: groupID, Instance: in.ID, Node: n.Name, Message: "replacement of " + m.Instance.ID + " Ready"})
				return nil
			}
			reason := "instance " + in.State
			switch {
			case in.State != InService:
				// Not in service yet (a launch or a lifecycle hook
				// holds it), whatever its Node says.
				if n != nil && n.Ready() {
					reason += " (its Node " + n.Name + " is Ready)"
				}
			case n != nil:
				reason = "Node " + n.Name + " not Ready"
			default:
				reason = "no Node with providerID " + st.Region + "." + in.ID + " yet"
			}
			waiting = &Member{Instance: in, Node: n, Reason: reason}
		}
		if e.now().Sub(start) > e.ReadyTimeout {
			if waiting == nil {
				return fmt.Errorf("scaling group %s launched no replacement for %s within %s: see its scaling activities (DescribeScalingActivities); does the group keep a desired capacity?", groupID, m.Instance.ID, e.ReadyTimeout)
			}
			return e.notReady(ctx, groupID, *waiting, 0, true)
		}
	}
}
