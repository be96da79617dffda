package ecsapi

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"time"
)

// Instances a group does not scale in: Standby (EnterStandby/ExitStandby)
// and Protected (SetInstancesProtection), and instances added by hand
// (AttachInstances). The pages each comment cites are under
// https://www.alibabacloud.com/help/en/auto-scaling/developer-reference/.
//
// Where the documentation names no error code for a refusal, the code here
// says so; the refusal itself is kept (the conservative choice: a client
// that relies on the call succeeding is told otherwise).

// errWrongState refuses a lifecycle change an instance's state does not
// allow. Which states each call accepts is documented ("Manually change the
// status of instances": InService→Standby, Standby→InService,
// InService↔Protected); the error code is not documented.
func errWrongState(id, state, want string) *apiError {
	return errf(400, "IncorrectInstanceStatus", "The current status of instance %q (%s) does not support this action: it must be %s.", id, state, want)
}

// members finds the group's instances a request names (InstanceId.N), each
// not being removed. The caller holds s.mu.
func (c *call) members(g *group) ([]*member, *apiError) {
	ids := list(c.p, "InstanceId")
	if len(ids) == 0 {
		return nil, errMissing("InstanceId.1")
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
	return ms, nil
}

// setState moves instances from one lifecycle state to another, all or
// none. It is how EnterStandby, ExitStandby and SetInstancesProtection
// act: none of them launches or removes an instance or changes the
// desired capacity, since Standby and Protected instances count toward it
// ("Expected number of instances": a stable instance is InService,
// Protected or Standby).
func (c *call) setState(from, to string, activity string) (obj, *apiError) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	g, e := c.group()
	if e != nil {
		return nil, e
	}
	ms, e := c.members(g)
	if e != nil {
		return nil, e
	}
	for _, m := range ms {
		// Whether a call on an instance already in the target state
		// succeeds is not documented: refused too.
		if m.state != from {
			return nil, errWrongState(m.inst.id, m.state, from)
		}
	}
	for _, m := range ms {
		m.state = to
	}
	g.modified = c.now
	if activity == "" {
		return obj{}, nil
	}
	a := g.newActivity(fmt.Sprintf("%s %q ECS instance(s)", activity, strconv.Itoa(len(ms))), "a user changed the lifecycle state of instances", c.now, 0)
	return obj{"ScalingActivityId": a.id}, nil
}

// enterStandby: api-ess-2014-08-28-enterstandby. A Standby instance is
// not removed by a scale-in, its health is not checked, it stays in the
// desired capacity (no replacement is launched), and RemoveInstances
// removes it. ESS answers a ScalingActivityId; whether the change is an
// activity that blocks others is not documented: it finishes at once here.
func (c *call) enterStandby() (obj, *apiError) {
	return c.setState(InService, Standby, "Put into Standby")
}

// exitStandby: api-ess-2014-08-28-exitstandby. The instance is InService
// again and may be scaled in.
func (c *call) exitStandby() (obj, *apiError) {
	return c.setState(Standby, InService, "Move out of Standby")
}

// setInstancesProtection: api-ess-2014-08-28-setinstancesprotection. A
// Protected instance stays so until protection is removed, is never
// removed by a scale-in, keeps its health status, and leaves only through
// RemoveInstances.
func (c *call) setInstancesProtection() (obj, *apiError) {
	if c.p.Get("ProtectedFromScaleIn") == "" {
		return nil, errMissing("ProtectedFromScaleIn")
	}
	protect, e := c.boolParam("ProtectedFromScaleIn", false)
	if e != nil {
		return nil, e
	}
	if protect {
		return c.setState(InService, Protected, "")
	}
	return c.setState(Protected, InService, "")
}

// attachInstances: api-ess-2014-08-28-attachinstances. The group must
// have no scaling activity in progress; each instance must be Running, in
// the group's region and in no group; the call fails when the group would
// hold more than MaxSize instances. Attached instances are not associated
// with the group's instance configuration (no launch template in
// DescribeScalingInstances) and are InService at once. Not documented: the
// error codes of each refusal (the names below), and that the desired
// capacity grows by the number attached — it does here, as otherwise the
// group would at once scale in to its former size (AWS documents the same
// for its AttachInstances). Entrusted (default false) makes the group
// release the instance when it is removed; otherwise it keeps running.
func (c *call) attachInstances() (obj, *apiError) {
	ids := list(c.p, "InstanceId")
	if len(ids) == 0 {
		return nil, errMissing("InstanceId.1")
	}
	entrusted, e := c.boolParam("Entrusted", false)
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
	var ins []*instance
	for _, id := range ids {
		in := s.instances[id]
		if in == nil || in.region != c.region {
			return nil, errf(404, "InvalidInstanceId.NotFound", "Instance %q does not exist.", id)
		}
		if in.status != "Running" || s.groupOf(id) != nil {
			return nil, errf(400, "IncorrectInstanceStatus", "The current status of instance %q does not support this action: it must be Running and in no scaling group.", id)
		}
		ins = append(ins, in)
	}
	if g.capacity()+len(ins) > g.MaxSize {
		return nil, errf(400, "IncorrectCapacity.MaxSize", "To attach the instances, the total capacity will be greater than the MaxSize.")
	}
	a := g.newActivity(fmt.Sprintf("Add %q ECS instance(s)", strconv.Itoa(len(ins))), "a user attached instances", c.now, 0)
	for _, in := range ins {
		g.members = append(g.members, &member{inst: in, state: InService, activityID: a.id, creation: Attached, entrusted: entrusted})
	}
	if !g.NoDesiredCapacity {
		g.DesiredCapacity += len(ins)
	}
	a.totalCapacity = g.capacity()
	s.poke()
	return obj{"ScalingActivityId": a.id}, nil
}

// groupOf is the group an instance is a member of. The caller holds s.mu.
func (s *Server) groupOf(id string) *group {
	for _, g := range s.groups {
		for _, m := range g.members {
			if m.inst.id == id {
				return g
			}
		}
	}
	return nil
}

// RunInstance is test setup standing in for ECS RunInstances (not
// emulated): it launches an instance in no scaling group from a launch
// template version (a number, Default or Latest) through the Config's
// Launcher and returns its ID once it is Running, ready for
// AttachInstances.
func (s *Server) RunInstance(ctx context.Context, templateID, version string) (string, error) {
	s.mu.Lock()
	lt := s.templates[templateID]
	if lt == nil {
		s.mu.Unlock()
		return "", fmt.Errorf("launch template %s does not exist", templateID)
	}
	v := lt.resolveVersion(version)
	if v == nil {
		s.mu.Unlock()
		return "", fmt.Errorf("launch template %s has no version %q", templateID, version)
	}
	im := s.images[v.data["ImageId"]]
	if im == nil || im.status(time.Now()) != "Available" {
		s.mu.Unlock()
		return "", fmt.Errorf("image %q of launch template %s version %d is not available", v.data["ImageId"], templateID, v.number)
	}
	ud, err := base64.StdEncoding.DecodeString(v.data["UserData"])
	if err != nil {
		s.mu.Unlock()
		return "", fmt.Errorf("decoding the user-data of %s version %d: %w", templateID, v.number, err)
	}
	in := &instance{id: newID("i-", 20), region: im.region, zone: firstOf(v.data["ZoneId"], im.region+"-a"),
		itype: firstOf(v.data["InstanceType"], "ecs.g7.large"), imageID: im.id, status: "Pending", created: time.Now()}
	in.hostname = firstOf(v.data["HostName"], "iZ"+in.id[2:]+"Z")
	in.seq = len(s.instances)
	s.instances[in.id] = in
	spec := InstanceSpec{InstanceID: in.id, RegionID: in.region, ZoneID: in.zone, InstanceType: in.itype,
		ImageID: im.id, ImageObject: im.disk, DataDisks: im.dataDiskFiles(), UserData: ud, Hostname: in.hostname}
	launcher := s.cfg.Launcher
	s.mu.Unlock()
	if launcher == nil {
		err = fmt.Errorf("the emulator has no Launcher")
	} else {
		var h Instance
		if h, err = launcher.Launch(ctx, spec); err == nil {
			s.mu.Lock()
			in.handle, in.status = h, "Running"
			s.mu.Unlock()
			return in.id, nil
		}
	}
	s.mu.Lock()
	delete(s.instances, in.id)
	s.mu.Unlock()
	return "", fmt.Errorf("launching instance %s: %w", in.id, err)
}
