package rollout

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Run rolls the group to d: it prints (as events) and then carries out
// Plan, re-observing the group between steps so that an interrupted run
// continues from what the group shows. resume allows continuing a rollout
// already in flight. It holds the group's lock (lock.go) while it writes,
// and refuses a group another run holds.
func (e *Env) Run(ctx context.Context, groupID string, d Desired, o Options, resume bool) error {
	if err := o.Check(); err != nil {
		return err
	}
	st, err := e.Observe(ctx, groupID)
	if err != nil {
		return err
	}
	tags, err := e.Cloud.GroupTags(ctx, groupID)
	if err != nil {
		return err
	}
	p, err := PlanRollout(st, d)
	if err != nil {
		return err
	}
	o = o.Resolve(p.Stamp.Size)
	_, surged := tags[SurgeTag]
	e.emitPlan(p, o)
	if surged {
		sg, _ := parseSurge(tags[SurgeTag])
		e.emit(Event{Kind: EventPlan, Group: groupID, Message: fmt.Sprintf("restore MaxSize %d (now %d): a rollout raised it to %d for its surge and did not put it back (tag %s)",
			cmp.Or(p.Stamp.MaxSize, sg.Max), st.Group.MaxSize, sg.Surge, SurgeTag)})
	}
	if lerr := e.checkLock(groupID, tags); lerr != nil {
		if e.DryRun {
			e.emit(Event{Kind: EventPlan, Group: groupID, Message: lerr.Error()})
		} else {
			return lerr
		}
	}
	_, lowered := tags[MinTag]
	if lowered {
		e.emit(Event{Kind: EventPlan, Group: groupID, Message: fmt.Sprintf("restore MinSize: a repair lowered it to %d and did not put it back (tag %s=%q)", st.Group.MinSize, MinTag, tags[MinTag])})
	}
	if p.NothingToDo() && !surged && !lowered {
		e.emit(Event{Kind: EventDone, Group: groupID, Message: "nothing to do: every instance runs image " + d.ImageID + " with node config " + d.ConfigLabel()})
		return nil
	}
	if e.DryRun {
		return nil
	}
	if p.InFlight != "" && !resume {
		return fmt.Errorf("scaling group %s is in the middle of a rollout to this image and node config (%s): run again with --resume to continue it", groupID, p.InFlight)
	}
	return e.underLock(ctx, groupID, func(ctx context.Context) error { return e.run(ctx, groupID, d, o, resume) })
}

// run is Run under the group's lock: it plans again (the group may have
// changed before the lock was taken) and carries the plan out.
func (e *Env) run(ctx context.Context, groupID string, d Desired, o Options, resume bool) error {
	if err := e.restoreMin(ctx, groupID); err != nil {
		return err
	}
	st, err := e.Observe(ctx, groupID)
	if err != nil {
		return err
	}
	p, err := PlanRollout(st, d)
	if err != nil {
		return err
	}
	if p.InFlight != "" && !resume {
		return fmt.Errorf("scaling group %s is in the middle of a rollout to this image and node config (%s): run again with --resume to continue it", groupID, p.InFlight)
	}
	if p.NothingToDo() {
		if err := e.restoreMax(ctx, groupID, p.Stamp.MaxSize); err != nil {
			return err
		}
		e.emit(Event{Kind: EventDone, Group: groupID, Message: "nothing to replace: every instance runs image " + d.ImageID + " with node config " + d.ConfigLabel()})
		return nil
	}
	g := p.Group
	switched := ""
	target := ""
	if p.Target != nil {
		target = formatInt(p.Target.Number)
	}
	if len(p.Prune) > 0 {
		if err := e.Cloud.DeleteTemplateVersions(ctx, g.TemplateID, p.Prune); err != nil {
			return err
		}
		e.emit(Event{Kind: EventTemplate, Group: groupID, Message: fmt.Sprintf("deleted launch template %s version(s) %s to make room: ECS keeps at most %d", g.TemplateID, joinInts(p.Prune), MaxTemplateVersions)})
	}
	if p.Create {
		n, err := e.Cloud.CreateTemplateVersion(ctx, g.TemplateID, p.Active.Number, d.ImageID, d.UserData, p.Stamp.String())
		if err != nil {
			return err
		}
		target = formatInt(n)
		e.emit(Event{Kind: EventTemplate, Group: groupID, Message: fmt.Sprintf("created launch template %s version %d: %s", g.TemplateID, n, p.Stamp)})
	}
	if p.Switch {
		if err := e.Cloud.SetTemplateVersion(ctx, groupID, g.TemplateID, target); err != nil {
			return err
		}
		switched = g.TemplateVersion
		e.emit(Event{Kind: EventGroup, Group: groupID, Message: fmt.Sprintf("the group launches from version %s (was %s)", target, g.TemplateVersion)})
	}
	if len(p.Replace) == 0 && len(p.Pending) == 0 {
		if err := e.restoreMax(ctx, groupID, p.Stamp.MaxSize); err != nil {
			return err
		}
		e.emit(Event{Kind: EventDone, Group: groupID, Message: "no instance to replace: new instances get the new user-data"})
		return nil
	}
	err = e.replace(ctx, groupID, d, o, p.Stamp)
	if err == nil {
		return nil
	}
	// A cancelled run still gets a minute to put the group back.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	var nr *NotReadyError
	var ae *ActivityError
	switch {
	case errors.As(err, &ae):
		// ESS did not launch from the new version: back to the old one,
		// the desired capacity back to what the group holds (ESS would
		// go on trying), then MaxSize.
		e.switchBack(rctx, groupID, g.TemplateID, switched)
		e.undoScaleOut(rctx, groupID)
		e.restoreMaxOrWarn(rctx, groupID, p.Stamp.MaxSize)
	case errors.As(err, &nr):
		// notReady restored MaxSize.
		e.switchBack(rctx, groupID, g.TemplateID, switched)
	default:
		// Stopped (a drain timeout, an API error, a signal): MaxSize goes
		// back unless the surge still holds instances above it; restoreMax
		// says which.
		e.restoreMaxOrWarn(rctx, groupID, p.Stamp.MaxSize)
	}
	return err
}

// switchBack points the group at version again (when this run switched it
// away from it: "" does nothing), so that instances ESS launches on its own
// (a health-check replacement, a retry) do not come from the version that
// failed.
func (e *Env) switchBack(ctx context.Context, groupID, templateID, version string) {
	if version == "" {
		return
	}
	if err := e.Cloud.SetTemplateVersion(ctx, groupID, templateID, version); err != nil {
		e.emit(Event{Kind: EventWarning, Group: groupID, Message: "switching the group back to version " + version + ": " + err.Error()})
		return
	}
	e.emit(Event{Kind: EventGroup, Group: groupID, Message: "the group launches from version " + version + " again"})
}

func (e *Env) restoreMaxOrWarn(ctx context.Context, groupID string, maxSize int) {
	if err := e.restoreMax(ctx, groupID, maxSize); err != nil {
		e.emit(Event{Kind: EventWarning, Group: groupID, Message: "restoring MaxSize: " + err.Error()})
	}
}

func (e *Env) emitPlan(p *Plan, o Options) {
	for _, line := range strings.Split(strings.TrimSuffix(p.Text(o), "\n"), "\n") {
		e.emit(Event{Kind: EventPlan, Group: p.Group.ID, Message: line})
	}
}

// replace swaps old instances for new ones until none is left. Each round
// re-observes the group and takes one step:
//
//   - retire (drain and remove) up to MaxUnavailable old instances, as many
//     as Ready new ones cover: Ready new + old − size;
//   - else wait for new instances still coming up (a timeout stops the
//     rollout);
//   - else scale out by up to Surge.
//
// So an old instance leaves only when a Ready replacement is counted for
// it, whether this process launched it or an interrupted one did.
func (e *Env) replace(ctx context.Context, groupID string, d Desired, o Options, stamp Stamp) error {
	size := stamp.Size
	seen := map[string]time.Time{}
	announced := map[string]bool{}
	first := true
	var short, scaled time.Time
	scaledFrom := 0
	act := "" // the last ScaleOut's scaling activity, until it succeeded
	var p *Plan
	for {
		st, err := e.Observe(ctx, groupID)
		if err != nil {
			return err
		}
		if p, err = PlanRollout(st, d); err != nil {
			return err
		}
		g := st.Group
		now := e.now()
		p.soak(now, e.MinReady)
		for _, m := range p.Current {
			if first {
				announced[m.Instance.ID] = true
			}
			if !announced[m.Instance.ID] {
				announced[m.Instance.ID] = true
				e.emit(Event{Kind: EventReady, Group: groupID, Instance: m.Instance.ID, Node: m.Node.Name, Message: "Node " + m.Node.Name + " Ready with the desired build and node config"})
			}
		}
		first = false
		for _, in := range st.Instances {
			// A scale-in hook holds a removed instance, and the group's
			// next scaling activity waits for it: say so once.
			if w := hookWait(in.State); in.State == RemovingWait && !announced[in.ID+" "+in.State] {
				announced[in.ID+" "+in.State] = true
				e.emit(Event{Kind: EventWaiting, Group: groupID, Instance: in.ID, Message: "instance " + in.State + ": " + w})
			}
		}
		if act != "" {
			a, ok, err := e.Cloud.Activity(ctx, groupID, act)
			switch {
			case err != nil:
				return err
			case ok && a.failed():
				return e.activityFailed(groupID, a)
			case ok && a.StatusCode == ActivitySuccessful:
				act = ""
			}
		}
		// Skipped instances (Standby, Protected, attached) count in the
		// group's desired capacity and in the size it returns to (the
		// stamp counts them), so they count here: an old instance leaves
		// only when Ready new ones cover it.
		old, ready, pending, skipped := len(p.Replace), len(p.Current), len(p.Pending), len(p.Skipped)
		if old == 0 && pending == 0 {
			// A removed instance a scale-in hook holds is still the
			// group's: wait for it to leave, up to --ready-timeout (the
			// hook's own timeout may be hours), then say so.
			held := ""
			for _, in := range st.Instances {
				if in.State == RemovingWait {
					held = in.ID
				}
			}
			if held == "" {
				break
			}
			if seen[held].IsZero() {
				seen[held] = now
			}
			if now.Sub(seen[held]) > e.ReadyTimeout {
				e.emit(Event{Kind: EventWarning, Group: groupID, Instance: held, Message: fmt.Sprintf("still %s after --ready-timeout %s: a scale-in lifecycle hook holds it; ESS removes it once the hook's action is completed or times out", RemovingWait, e.ReadyTimeout)})
				break
			}
			if err := e.sleep(ctx); err != nil {
				return err
			}
			continue
		}
		if pending > 0 || g.DesiredCapacity > scaledFrom {
			scaled = time.Time{} // the last ScaleOut took effect
		}
		if cover := ready + old + skipped - size; cover > 0 && old > 0 {
			// Which old instances go decides the zone ESS's next launch
			// takes (zones.go).
			batch := retireOrder(p, size, min(cover, o.MaxUnavailable, old), o.Surge)
			if err := e.retire(ctx, groupID, batch); err != nil {
				return err
			}
			if o.PauseAfterFirst {
				if err := e.restoreMax(ctx, groupID, stamp.MaxSize); err != nil {
					return err
				}
				e.emit(Event{Kind: EventPaused, Group: groupID, Message: fmt.Sprintf("paused after the first batch (--pause-after-first): %d old instance(s) replaced, %d left; go on with drover rollout --resume", len(batch), old-len(batch))})
				return nil
			}
			continue
		}
		if pending > 0 {
			for _, m := range p.Pending {
				id := m.Instance.ID
				switch {
				case seen[id].IsZero():
					seen[id] = now
					e.emit(Event{Kind: EventWaiting, Group: groupID, Instance: id, Message: "waiting up to " + e.ReadyTimeout.String() + ": " + m.Reason})
				case now.Sub(seen[id]) > e.ReadyTimeout:
					return e.notReady(ctx, groupID, m, stamp.MaxSize, e.KeepFailed)
				}
			}
			if err := e.sleep(ctx); err != nil {
				return err
			}
			continue
		}
		total := old + ready + skipped
		if g.DesiredCapacity > total {
			// ESS is launching what it has not listed yet.
			if short.IsZero() {
				short = now
			} else if now.Sub(short) > e.ReadyTimeout {
				return fmt.Errorf("scaling group %s wants %d instances but lists %d after %s%s", groupID, g.DesiredCapacity, total, e.ReadyTimeout, e.lastActivity(ctx, groupID))
			}
			if err := e.sleep(ctx); err != nil {
				return err
			}
			continue
		}
		short = time.Time{}
		if !scaled.IsZero() {
			// The last ScaleOut left the desired capacity where it was:
			// the group is at its MaxSize (someone lowered it again) or
			// ESS refused the activity. Asking again would loop.
			if now.Sub(scaled) > e.ReadyTimeout {
				return fmt.Errorf("scaling group %s did not grow: ScaleWithAdjustment left its desired capacity at %d (MaxSize %d) for %s; is MaxSize held down by someone else (Terraform, a scaling rule)?%s",
					groupID, g.DesiredCapacity, g.MaxSize, e.ReadyTimeout, e.lastActivity(ctx, groupID))
			}
			if err := e.sleep(ctx); err != nil {
				return err
			}
			continue
		}
		n := min(o.Surge, old) - (total - size)
		if want := g.DesiredCapacity + n; want > g.MaxSize {
			if err := e.raiseMax(ctx, groupID, g, want, stamp.MaxSize); err != nil {
				return err
			}
		}
		if act, err = e.Cloud.ScaleOut(ctx, groupID, n); err != nil {
			return err
		}
		e.emit(Event{Kind: EventScale, Group: groupID, Message: fmt.Sprintf("launching %d new instance(s) (scaling activity %s)", n, act)})
		// ESS raises the desired capacity at once; the next round waits
		// for the instances, or finds that it did not.
		scaled, scaledFrom = now, g.DesiredCapacity
	}
	if err := e.restoreMax(ctx, groupID, stamp.MaxSize); err != nil {
		return err
	}
	spread, uneven := zoneSpread(p)
	if uneven {
		e.emit(Event{Kind: EventWarning, Group: groupID, Message: "the group's instances are spread unevenly over its zones (" + spread + "): ESS placed the new ones so (a zone out of stock, or a PRIORITY scaling policy); RebalanceInstances evens out a BALANCE group"})
	}
	if spread != "" {
		spread = " (zones: " + spread + ")"
	}
	e.emit(Event{Kind: EventDone, Group: groupID, Message: "every instance runs image " + d.ImageID + " with node config " + d.ConfigLabel() + spread})
	return nil
}

// lastActivity is ": the last scaling activity: …" for an error, or ""
// when there is none to tell.
func (e *Env) lastActivity(ctx context.Context, groupID string) string {
	a, ok, err := e.Cloud.LastActivity(ctx, groupID)
	switch {
	case err != nil:
		return " (DescribeScalingActivities: " + err.Error() + ")"
	case !ok:
		return ": the group has no scaling activity"
	}
	return ": the last scaling activity (DescribeScalingActivities) is " + a.String()
}

// retire cordons and drains the batch's Nodes, at once, then removes the
// instances whose drain finished (lowering the desired capacity) and their
// Nodes. A drain that fails leaves its Node cordoned and its instance in the
// group; a later run (--resume) takes it first.
func (e *Env) retire(ctx context.Context, groupID string, batch []Member) error {
	errs := make([]error, len(batch))
	var wg sync.WaitGroup
	for i, m := range batch {
		if m.Node == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = e.drain(ctx, groupID, m, m.Node.Ready())
		}()
	}
	wg.Wait()
	var ids []string
	for i, m := range batch {
		if errs[i] == nil {
			ids = append(ids, m.Instance.ID)
		}
	}
	if len(ids) > 0 {
		if err := e.Cloud.Remove(ctx, groupID, ids, true); err != nil {
			return err
		}
		for _, m := range batch {
			if !contains(ids, m.Instance.ID) {
				continue
			}
			where := ""
			if m.Instance.Zone != "" {
				where = "zone " + m.Instance.Zone + "; "
			}
			e.emit(Event{Kind: EventRemove, Group: groupID, Instance: m.Instance.ID, Message: "removed from the group (" + where + m.Reason + ")"})
			if m.Node != nil {
				if err := e.Cluster.DeleteNode(ctx, m.Node.Name); err != nil {
					e.emit(Event{Kind: EventWarning, Group: groupID, Instance: m.Instance.ID, Node: m.Node.Name, Message: "deleting the Node: " + err.Error()})
				}
			}
		}
	}
	return errors.Join(errs...)
}

func (e *Env) drain(ctx context.Context, groupID string, m Member, wait bool) error {
	n := m.Node.Name
	if !m.Node.Unschedulable {
		if err := e.Cluster.Cordon(ctx, n); err != nil {
			return fmt.Errorf("cordoning Node %s: %w", n, err)
		}
	}
	e.emit(Event{Kind: EventCordon, Group: groupID, Instance: m.Instance.ID, Node: n, Message: "cordoned; draining"})
	dctx, cancel := context.WithTimeout(ctx, e.DrainTimeout)
	defer cancel()
	if err := e.Cluster.Drain(dctx, n, wait); err != nil {
		if ctx.Err() == nil && dctx.Err() != nil {
			return fmt.Errorf("draining Node %s (instance %s): not done after --drain-timeout %s (a PodDisruptionBudget refusing evictions?): %w; the Node stays cordoned and its instance in the group: run again with --resume", n, m.Instance.ID, e.DrainTimeout, err)
		}
		return fmt.Errorf("draining Node %s (instance %s): %w", n, m.Instance.ID, err)
	}
	e.emit(Event{Kind: EventDrain, Group: groupID, Instance: m.Instance.ID, Node: n, Message: "drained"})
	return nil
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}
