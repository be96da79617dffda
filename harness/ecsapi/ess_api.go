package ecsapi

import (
	"fmt"
	"sort"
	"strconv"
)

func (c *call) describeScalingGroups() (obj, *apiError) {
	ids := list(c.p, "ScalingGroupId")
	name := c.p.Get("ScalingGroupName")
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	var match []*group
	for _, id := range s.groupIDs {
		g := s.groups[id]
		if g.RegionID != c.region || (len(ids) > 0 && !contains(ids, g.ID)) || (name != "" && name != g.Name) {
			continue
		}
		match = append(match, g)
	}
	lo, hi, number, size, e := c.page(len(match), 50)
	if e != nil {
		return nil, e
	}
	out := []obj{}
	for _, g := range match[lo:hi] {
		count := map[string]int{}
		for _, m := range g.members {
			count[m.state]++
		}
		o := obj{
			"ScalingGroupId": g.ID, "ScalingGroupName": g.Name, "RegionId": g.RegionID,
			"LifecycleState": "Active", "GroupType": "ECS", "HealthCheckType": "ECS",
			"MinSize": g.MinSize, "MaxSize": g.MaxSize, "DesiredCapacity": g.DesiredCapacity,
			"EnableDesiredCapacity": true, "MultiAZPolicy": g.MultiAZPolicy, "ScalingPolicy": "release",
			"LaunchTemplateId": g.LaunchTemplateID, "LaunchTemplateVersion": firstOf(g.LaunchTemplateVersion, "Default"),
			"TotalCapacity": len(g.members), "TotalInstanceCount": len(g.members),
			"ActiveCapacity": count[InService], "PendingCapacity": count[Pending], "RemovingCapacity": count[Removing],
			"StandbyCapacity": count[Standby], "ProtectedCapacity": count[Protected], "StoppedCapacity": 0,
			"DefaultCooldown": 300, "CreationTime": essTime(g.created), "ModificationTime": essTime(g.modified),
			"RemovalPolicies": obj{"RemovalPolicy": []string{"OldestScalingConfiguration", "OldestInstance"}},
			"VSwitchId":       g.vswitchIDs()[0], "VSwitchIds": obj{"VSwitchId": g.vswitchIDs()},
		}
		if g.NoDesiredCapacity {
			// DescribeScalingGroups: DesiredCapacity is returned only
			// when the group has one. Whether EnableDesiredCapacity is
			// then false or absent is not documented: false here.
			delete(o, "DesiredCapacity")
			o["EnableDesiredCapacity"] = false
		}
		out = append(out, o)
	}
	return obj{"TotalCount": len(match), "PageNumber": number, "PageSize": size,
		"ScalingGroups": obj{"ScalingGroup": out}}, nil
}

func (c *call) modifyScalingGroup() (obj, *apiError) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	g, e := c.group()
	if e != nil {
		return nil, e
	}
	next := g.ScalingGroup
	for _, f := range []struct {
		name string
		dst  *int
	}{{"MinSize", &next.MinSize}, {"MaxSize", &next.MaxSize}, {"DesiredCapacity", &next.DesiredCapacity}} {
		if *f.dst, e = c.intParam(f.name, *f.dst); e != nil {
			return nil, e
		}
		if *f.dst < 0 || *f.dst > 2000 {
			return nil, errInvalid(f.name)
		}
	}
	if next.MinSize > next.MaxSize {
		return nil, errf(400, "InvalidParameter", "The specified value of parameter \"MinSize\" must not be greater than \"MaxSize\".")
	}
	// ESS keeps DesiredCapacity within the new bounds when only they change.
	switch {
	case g.NoDesiredCapacity && c.p.Get("DesiredCapacity") != "":
		// The expected number of instances can be set only when a group
		// is created (help/en/auto-scaling/user-guide/
		// expected-number-of-instances); the error of setting it later is
		// not documented: refused as an invalid parameter.
		return nil, errf(400, "InvalidParameter", "The scaling group was created without an expected number of instances: \"DesiredCapacity\" cannot be set.")
	case g.NoDesiredCapacity:
	case c.p.Get("DesiredCapacity") == "":
		next.DesiredCapacity = min(max(next.DesiredCapacity, next.MinSize), next.MaxSize)
	case next.DesiredCapacity < next.MinSize || next.DesiredCapacity > next.MaxSize:
		return nil, errf(400, "InvalidParameter", "The specified value of parameter \"DesiredCapacity\" must be between \"MinSize\" and \"MaxSize\".")
	}
	if v := c.p.Get("LaunchTemplateId"); v != "" {
		lt := s.templates[v]
		if lt == nil || lt.region != c.region {
			return nil, errf(400, "LaunchTemplateSet.NotFound", "The specified launch template set is not found.")
		}
		next.LaunchTemplateID = v
	}
	if v := c.p.Get("LaunchTemplateVersion"); v != "" {
		next.LaunchTemplateVersion = v
	}
	if next.LaunchTemplateID != g.LaunchTemplateID || next.LaunchTemplateVersion != g.LaunchTemplateVersion {
		lt := s.templates[next.LaunchTemplateID]
		if lt == nil || lt.resolveVersion(next.LaunchTemplateVersion) == nil {
			return nil, errf(400, "LaunchTemplateVersionSet.NotFound", "The specific version of launch template is not exist.")
		}
	}
	if v := c.p.Get("MultiAZPolicy"); v != "" {
		next.MultiAZPolicy = v
	}
	if v := c.p.Get("ScalingGroupName"); v != "" {
		next.Name = v
	}
	g.ScalingGroup = next
	g.modified = c.now
	s.poke()
	return obj{}, nil
}

func (c *call) describeScalingInstances() (obj, *apiError) {
	ids := list(c.p, "InstanceId")
	state := c.p.Get("LifecycleState")
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	groups, e := c.groupsToSearch(c.p.Get("ScalingGroupId") != "")
	if e != nil {
		return nil, e
	}
	type row struct {
		g *group
		m *member
	}
	var match []row
	for _, g := range groups {
		for _, m := range g.members {
			if (len(ids) > 0 && !contains(ids, m.inst.id)) || (state != "" && state != m.state) ||
				(c.p.Get("CreationType") != "" && c.p.Get("CreationType") != m.creation) ||
				(c.p.Get("HealthStatus") != "" && c.p.Get("HealthStatus") != "Healthy") {
				continue
			}
			match = append(match, row{g, m})
		}
	}
	sort.SliceStable(match, func(i, j int) bool { return match[i].m.inst.seq < match[j].m.inst.seq })
	lo, hi, number, size, e := c.page(len(match), 100)
	if e != nil {
		return nil, e
	}
	out := []obj{}
	for _, r := range match[lo:hi] {
		in := r.m.inst
		out = append(out, obj{
			"InstanceId": in.id, "ScalingGroupId": r.g.ID, "LifecycleState": r.m.state,
			"HealthStatus": "Healthy", "CreationType": r.m.creation, "Entrusted": r.m.creation == AutoCreated || r.m.entrusted,
			"LaunchTemplateId": r.m.ltID, "LaunchTemplateVersion": r.m.ltVer,
			"CreationTime": essTime(in.created), "CreatedTime": essTime(in.created),
			"ZoneId": in.zone, "InstanceType": in.itype, "ScalingActivityId": r.m.activityID,
			"WeightedCapacity": 1, "WarmupState": "NoNeedWarmup",
		})
	}
	return obj{"TotalCount": len(match), "PageNumber": number, "PageSize": size,
		"ScalingInstances": obj{"ScalingInstance": out}}, nil
}

// scaleWithAdjustment changes the desired capacity by AdjustmentValue within
// MinSize..MaxSize, as documented, and starts the scaling activity.
func (c *call) scaleWithAdjustment() (obj, *apiError) {
	if t := c.p.Get("AdjustmentType"); t != "QuantityChangeInCapacity" {
		if t == "" {
			return nil, errMissing("AdjustmentType")
		}
		return nil, errInvalid("AdjustmentType")
	}
	if c.p.Get("AdjustmentValue") == "" {
		return nil, errMissing("AdjustmentValue")
	}
	n, e := c.intParam("AdjustmentValue", 0)
	if e != nil {
		return nil, e
	}
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	g, e := c.group()
	if e != nil {
		return nil, e
	}
	if g.busy() {
		return nil, errInProgress()
	}
	have := g.capacity()
	want := min(max(have+n, g.MinSize), g.MaxSize)
	if !g.NoDesiredCapacity {
		g.DesiredCapacity = want
	}
	var a *activity
	switch {
	case want > have:
		a = s.launchBatch(g, want-have, "a user requested an adjustment", c.now)
	case want < have:
		a = s.removeMembers(g, g.oldest(have-want), "a user requested an adjustment", c.now)
	default:
		// Nothing to launch or remove: the group is at MaxSize (or
		// MinSize). ESS's answer is not documented; the conservative one
		// is a Rejected activity saying why ("the request to trigger the
		// scaling activity is rejected", DescribeScalingActivities
		// StatusCode), not a silent success.
		a = g.newActivity("Adjust by "+strconv.Itoa(n), "a user requested an adjustment", c.now, 0)
		a.status = "Rejected"
		// The message is the one ESS documents for a Rejected activity
		// whose instances would leave MinSize..MaxSize ("Troubleshoot
		// scaling activity exceptions", help/en/auto-scaling/user-guide/
		// troubleshoot-scaling-activity-exceptions); the bounds go in
		// Cause (not documented).
		a.message = "To execute the specified scaling rule, the total capacity will not change."
		a.cause = fmt.Sprintf("a user requested an adjustment by %d; the group has %d instance(s), MinSize %d, MaxSize %d", n, have, g.MinSize, g.MaxSize)
	}
	return obj{"ScalingActivityId": a.id, "ActivityType": "CapacityChange"}, nil
}

func (c *call) removeInstances() (obj, *apiError) {
	ids := list(c.p, "InstanceId")
	if len(ids) == 0 {
		return nil, errMissing("InstanceId.1")
	}
	decrease, e := c.boolParam("DecreaseDesiredCapacity", true)
	if e != nil {
		return nil, e
	}
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	g, e := c.group()
	if e != nil {
		return nil, e
	}
	var ms []*member
	for _, id := range ids {
		var found *member
		for _, m := range g.members {
			if m.inst.id == id && !m.leaving() {
				found = m
			}
		}
		if found == nil {
			return nil, errf(404, "InvalidInstanceId.NotFound", "Instance %q does not exist.", id)
		}
		ms = append(ms, found)
	}
	if g.busy() {
		return nil, errInProgress()
	}
	if len(g.members)-len(ms) < g.MinSize {
		return nil, errf(400, "IncorrectCapacity.MinSize", "To remove the instances, the total capacity will be lesser than the MinSize.")
	}
	if decrease && !g.NoDesiredCapacity {
		g.DesiredCapacity = max(g.DesiredCapacity-len(ms), g.MinSize)
	}
	a := s.removeMembers(g, ms, "a user removed instances", c.now)
	return obj{"ScalingActivityId": a.id}, nil
}

func (c *call) describeScalingActivities() (obj, *apiError) {
	ids := list(c.p, "ScalingActivityId")
	code := c.p.Get("StatusCode")
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	// ScalingGroupId or ScalingActivityId.N must be given
	// (api-describescalingactivities); with only the latter, every group
	// of the region is searched.
	groups, e := c.groupsToSearch(c.p.Get("ScalingGroupId") != "" || len(ids) == 0)
	if e != nil {
		return nil, e
	}
	type row struct {
		g *group
		a *activity
	}
	var match []row
	for _, g := range groups {
		for i := len(g.activities) - 1; i >= 0; i-- { // newest first
			a := g.activities[i]
			if (len(ids) > 0 && !contains(ids, a.id)) || (code != "" && code != a.status) {
				continue
			}
			match = append(match, row{g, a})
		}
	}
	// PageSize: 1 to 50, default 10 (api-describescalingactivities).
	lo, hi, number, size, e := c.page(len(match), 50)
	if e != nil {
		return nil, e
	}
	out := []obj{}
	for _, r := range match[lo:hi] {
		g, a := r.g, r.a
		progress, end := 100, essTime(a.end)
		if a.status == "InProgress" {
			progress, end = 100*(a.total-a.outstanding)/max(a.total, 1), ""
		}
		out = append(out, obj{
			"ScalingActivityId": a.id, "ScalingGroupId": g.ID, "Description": a.desc, "Cause": a.cause,
			"StartTime": essTime(a.start), "EndTime": end, "Progress": progress,
			"StatusCode": a.status, "StatusMessage": a.message, "ErrorCode": a.errorCode, "ErrorMessage": a.errorMessage,
			"TotalCapacity": strconv.Itoa(a.totalCapacity), "ScalingInstanceNumber": a.total,
			"CreatedCapacity": len(a.created), "DestroyedCapacity": len(a.destroyed),
			"CreatedInstances":   obj{"CreatedInstance": nonNil(a.created)},
			"DestroyedInstances": obj{"DestroyedInstance": nonNil(a.destroyed)},
		})
	}
	return obj{"TotalCount": len(match), "PageNumber": number, "PageSize": size,
		"ScalingActivities": obj{"ScalingActivity": out}}, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// groupsToSearch is the request's group when one is named (one), else
// every group of the request's region; the caller holds s.mu.
func (c *call) groupsToSearch(one bool) ([]*group, *apiError) {
	if one {
		g, e := c.group()
		if e != nil {
			return nil, e
		}
		return []*group{g}, nil
	}
	var groups []*group
	for _, id := range c.s.groupIDs {
		if c.s.groups[id].RegionID == c.region {
			groups = append(groups, c.s.groups[id])
		}
	}
	return groups, nil
}
