package ecsapi

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ScalingGroup is the test setup of a scaling group (CreateScalingGroup is
// not emulated: Terraform owns groups in drover's design).
type ScalingGroup struct {
	ID   string // empty: generated
	Name string
	// RegionID defaults to Config.Region, ZoneID to RegionID+"-a".
	RegionID, ZoneID string
	// VSwitches are the group's vSwitches in priority order (VSwitchIds);
	// empty: one in ZoneID. MultiAZPolicy places launches among their
	// zones (ess_zones.go).
	VSwitches []VSwitch
	// InstanceType is used when the launch template version sets none.
	InstanceType          string
	LaunchTemplateID      string
	LaunchTemplateVersion string // a number, Default or Latest; empty means Default
	MinSize, MaxSize      int
	DesiredCapacity       int
	// NoDesiredCapacity makes a group created without an expected number
	// of instances (ESS "Expected number of instances": it can be set only
	// when a group is created, help/en/auto-scaling/user-guide/
	// expected-number-of-instances). DesiredCapacity is then ignored:
	// DescribeScalingGroups answers none, the group only keeps its size
	// within MinSize..MaxSize and refuses a scaling activity while another
	// is in progress.
	NoDesiredCapacity bool
	MultiAZPolicy     string // PRIORITY (default) or BALANCE
}

// Lifecycle states of scaling instances, as DescribeScalingInstances names
// them (help/en/auto-scaling/user-guide/instance-lifecycles). Standby and
// Protected instances are "stable instances" like InService ones: they count
// toward the expected number of instances (help/en/auto-scaling/user-guide/
// expected-number-of-instances, "stable instance"), and no scale-in removes
// them (EnterStandby, SetInstancesProtection); RemoveInstances does.
const (
	Pending   = "Pending"
	InService = "InService"
	Removing  = "Removing"
	Standby   = "Standby"
	Protected = "Protected"
)

// How an instance came into its group (DescribeScalingInstances
// CreationType): launched by the group, or added by AttachInstances.
const (
	AutoCreated = "AutoCreated"
	Attached    = "Attached"
)

// DefaultLaunchRetry is how long a group whose launch failed waits before
// ESS tries again to reach its desired capacity (Config.LaunchRetry).
// ESS documents that it tries again — a group with an expected number of
// instances keeps it "automatically", where one without makes you "manually
// retry failed scaling activities" (help/en/auto-scaling/user-guide/
// expected-number-of-instances) — and that it gives up only after 30 days
// of consecutive failures (help/en/auto-scaling/product-overview/limits),
// but not how soon it tries again: not documented. Half a minute is the
// conservative choice: a client that waits for the group sees a failed
// activity and its reason long before a retry, never a retry storm (a
// tenth of a second here once logged thousands of failed launches a
// minute while a launch could not succeed).
const DefaultLaunchRetry = 30 * time.Second

type group struct {
	ScalingGroup
	created, modified time.Time
	members           []*member
	activities        []*activity
	hooks             []*hook            // CreateLifecycleHook
	actions           []*lifecycleAction // their actions, oldest first
	retryAt           time.Time
	tags              []groupTag
}

type member struct {
	inst        *instance
	state       string
	ltID, ltVer string
	activityID  string
	// creation is AutoCreated or Attached; entrusted says whether the
	// group manages an attached instance's lifecycle (AttachInstances
	// Entrusted): removing one that is not entrusted leaves it running.
	creation  string
	entrusted bool
	// failWith, when set, is the ECS error the launch fails with (decided
	// when the launch is asked for: an exhausted quota).
	failWith *launchError
}

type instance struct {
	id, region, zone, itype   string
	vswitch                   string
	imageID, hostname, status string
	seq                       int
	created                   time.Time
	handle                    Instance
}

type activity struct {
	id, desc, cause string
	status, message string
	// errorCode and errorMessage are the ECS error of a failed launch, as
	// ess.ScalingActivity's ErrorCode and ErrorMessage carry it.
	errorCode, errorMessage string
	start, end              time.Time
	outstanding             int
	failures, total         int
	created, destroyed      []string
	totalCapacity           int
}

// AddScalingGroup adds a group and returns its ID; the group starts
// converging on its DesiredCapacity at once.
func (s *Server) AddScalingGroup(sg ScalingGroup) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sg.ID == "" {
		sg.ID = newID("asg-", 20)
	}
	if sg.RegionID == "" {
		sg.RegionID = s.cfg.Region
	}
	if sg.ZoneID == "" {
		sg.ZoneID = sg.RegionID + "-a"
	}
	if sg.Name == "" {
		sg.Name = sg.ID
	}
	if sg.MultiAZPolicy == "" {
		sg.MultiAZPolicy = "PRIORITY"
	}
	now := time.Now()
	s.groups[sg.ID] = &group{ScalingGroup: sg, created: now, modified: now}
	s.groupIDs = append(s.groupIDs, sg.ID)
	s.poke()
	return sg.ID
}

func (s *Server) poke() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *Server) convergeLoop() {
	defer s.wg.Done()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		case <-s.kick:
		}
		s.converge()
	}
}

// converge starts one activity per idle group whose capacity differs from
// its DesiredCapacity; ESS runs one scaling activity at a time.
func (s *Server) converge() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for _, id := range s.groupIDs {
		g := s.groups[id]
		s.expireActions(g, now)
		if g.busy() || now.Before(g.retryAt) {
			continue
		}
		switch have, want := g.capacity(), g.target(); {
		case have < want:
			s.launchBatch(g, want-have, "the desired capacity was not met", now)
		case have > want:
			// Only InService instances go: Standby and Protected ones are
			// never scaled in. When nothing can go, ESS's answer is not
			// documented: no activity here (AWS documents the same for
			// protected instances: "Could not scale to desired capacity").
			if ms := g.oldest(have - want); len(ms) > 0 {
				s.removeMembers(g, ms, "the desired capacity was exceeded", now)
			}
		}
	}
}

func (g *group) busy() bool {
	for _, a := range g.activities {
		if a.status == "InProgress" {
			return true
		}
	}
	return false
}

// target is the number of instances the group keeps: its desired capacity,
// or, for a group without one, its size within MinSize..MaxSize (the
// minimum and maximum instance checks).
func (g *group) target() int {
	if g.NoDesiredCapacity {
		return min(max(g.capacity(), g.MinSize), g.MaxSize)
	}
	return g.DesiredCapacity
}

// capacity counts the instances that serve or will: every one not being
// removed (Pending, InService, Standby, Protected).
func (g *group) capacity() int {
	n := 0
	for _, m := range g.members {
		if !m.leaving() {
			n++
		}
	}
	return n
}

func (g *group) oldest(n int) []*member {
	var out []*member
	for _, m := range g.members {
		if m.state == InService && len(out) < n {
			out = append(out, m)
		}
	}
	return out
}

func (g *group) newActivity(desc, cause string, now time.Time, n int) *activity {
	a := &activity{id: newID("asa-", 20), desc: desc, cause: cause, status: "InProgress", start: now,
		outstanding: n, total: n, totalCapacity: g.capacity()}
	g.activities = append(g.activities, a)
	if n == 0 {
		a.finish(now)
	}
	return a
}

// finish settles the activity once its last launch or stop is done.
func (a *activity) finish(now time.Time) {
	a.end = now
	switch {
	case a.failures == 0:
		a.status = "Successful"
	case a.failures == a.total:
		a.status = "Failed"
	default:
		a.status = "Warning"
	}
}

func (a *activity) done(now time.Time) {
	a.outstanding--
	if a.outstanding == 0 {
		a.finish(now)
	}
}

// launchBatch creates n Pending instances and launches them. The caller holds s.mu.
func (s *Server) launchBatch(g *group, n int, cause string, now time.Time) *activity {
	a := g.newActivity(fmt.Sprintf("Add %q ECS instance(s)", strconv.Itoa(n)), cause, now, n)
	for range n {
		// Each launch is placed by the group's MultiAZPolicy among the
		// zones in stock, counting the ones this batch placed already.
		vs, ok, out := s.place(g)
		in := &instance{id: newID("i-", 20), region: g.RegionID, zone: vs.ZoneID, vswitch: vs.ID, status: "Pending",
			seq: len(s.instances), created: now}
		s.instances[in.id] = in
		m := &member{inst: in, state: Pending, activityID: a.id, creation: AutoCreated}
		// The launch template version is the group's now: an instance
		// being created already names it in DescribeScalingInstances
		// (LaunchTemplateId/Version, "used to create the instance"), and
		// it launches from that version even if the group moves on.
		if lt := s.templates[g.LaunchTemplateID]; lt != nil {
			if v := lt.resolveVersion(g.LaunchTemplateVersion); v != nil {
				m.ltID, m.ltVer = lt.id, strconv.FormatInt(v.number, 10)
			}
		}
		switch {
		case !ok:
			in.zone = out[0]
			m.failWith = errNoStockIn(out)
		case s.quota > 0 && s.regionInstances(g.RegionID) > s.quota:
			m.failWith = errElasticQuota()
		}
		g.members = append(g.members, m)
		a.created = append(a.created, in.id)
		s.wg.Add(1)
		go s.launch(g, m, a)
	}
	a.totalCapacity = g.capacity()
	return a
}

func (s *Server) launch(g *group, m *member, a *activity) {
	defer s.wg.Done()
	s.mu.Lock()
	spec, err := s.specFor(g, m)
	switch {
	case err != nil:
	case m.failWith != nil:
		err = m.failWith
	case s.noStock[m.inst.zone]:
		// Out of stock since it was placed.
		err = errNoStockIn([]string{m.inst.zone})
	case s.failLaunch > 0:
		s.failLaunch--
		err = errors.New("the launch failed (injected by FailLaunch)")
	}
	launcher := s.cfg.Launcher
	s.mu.Unlock()
	if err == nil && launcher == nil {
		err = errors.New("the emulator has no Launcher")
	}
	var h, orphan Instance
	if err == nil {
		h, err = launcher.Launch(s.ctx, spec)
	}
	// An instance that came up after Close is stopped here, outside the lock.
	defer func() {
		if orphan != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = orphan.Stop(ctx)
		}
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if err == nil && s.ctx.Err() != nil {
		err, orphan = errClosed, h
	}
	if err != nil {
		g.drop(m)
		delete(s.instances, m.inst.id)
		a.failures++
		// An instance ECS did not create is not among the activity's
		// CreatedInstances.
		a.created = slices.DeleteFunc(a.created, func(id string) bool { return id == m.inst.id })
		a.message = fmt.Sprintf("Launching instance %s failed: %v", m.inst.id, err)
		var le *launchError
		if errors.As(err, &le) {
			a.message = le.statusMessage(m.inst.zone)
			a.errorCode, a.errorMessage = le.code, le.msg
		}
		g.retryAt = now.Add(s.launchRetry())
		s.logf("ess %s: %s", g.ID, a.message)
	} else {
		m.inst.status = "Running"
		m.inst.handle = h
		if hk := g.hook(ScaleOut); hk != nil {
			// A scale-out hook holds the instance, and its activity,
			// until the lifecycle action ends (ess_hooks.go).
			m.state = PendingWait
			g.hold(hk, a, m, now, s.hookSecond())
			s.poke()
			return
		}
		m.state = InService
	}
	a.done(now)
	s.poke()
}

func (s *Server) launchRetry() time.Duration {
	if s.cfg.LaunchRetry > 0 {
		return s.cfg.LaunchRetry
	}
	return DefaultLaunchRetry
}

// specFor reads the launch template version the launch was asked with
// (launchBatch; the group's as it is now when it had none) and fills in the
// instance. The caller holds s.mu.
func (s *Server) specFor(g *group, m *member) (InstanceSpec, error) {
	ltID, ver := g.LaunchTemplateID, g.LaunchTemplateVersion
	if m.ltID != "" {
		ltID, ver = m.ltID, m.ltVer
	}
	lt := s.templates[ltID]
	if lt == nil {
		return InstanceSpec{}, fmt.Errorf("launch template %s does not exist", ltID)
	}
	v := lt.resolveVersion(ver)
	if v == nil {
		return InstanceSpec{}, fmt.Errorf("launch template %s has no version %q", lt.id, ver)
	}
	m.ltID, m.ltVer = lt.id, strconv.FormatInt(v.number, 10)
	im := s.images[v.data["ImageId"]]
	if im == nil || im.region != g.RegionID || im.status(time.Now()) != "Available" {
		return InstanceSpec{}, fmt.Errorf("image %q of launch template %s version %d is not available", v.data["ImageId"], lt.id, v.number)
	}
	ud, err := base64.StdEncoding.DecodeString(v.data["UserData"])
	if err != nil {
		return InstanceSpec{}, fmt.Errorf("decoding the user-data of %s version %d: %w", lt.id, v.number, err)
	}
	in := m.inst
	in.imageID = im.id
	in.itype = firstOf(v.data["InstanceType"], g.InstanceType, "ecs.g7.large")
	// The template's ZoneId and VSwitchId do not count: ESS launches into
	// the group's vSwitches (place).
	in.hostname = firstOf(v.data["HostName"], "iZ"+strings.TrimPrefix(in.id, "i-")+"Z")
	return InstanceSpec{
		InstanceID: in.id, RegionID: in.region, ZoneID: in.zone, InstanceType: in.itype,
		ImageID: im.id, ImageObject: im.disk, DataDisks: im.dataDiskFiles(), UserData: ud, Hostname: in.hostname,
	}, nil
}

// removeMembers stops and releases members. The caller holds s.mu.
func (s *Server) removeMembers(g *group, ms []*member, cause string, now time.Time) *activity {
	a := g.newActivity(fmt.Sprintf("Remove %q ECS instance(s)", strconv.Itoa(len(ms))), cause, now, len(ms))
	hk := g.hook(ScaleIn)
	for _, m := range ms {
		a.destroyed = append(a.destroyed, m.inst.id)
		if hk != nil {
			// A scale-in hook holds the instance until the lifecycle
			// action ends; then it goes (ess_hooks.go).
			m.state = RemovingWait
			g.hold(hk, a, m, now, s.hookSecond())
			continue
		}
		s.release(g, m, a, now)
	}
	a.totalCapacity = g.capacity()
	return a
}

// release takes a removed member out of the group: an attached instance
// not entrusted to the group keeps running, any other is stopped and
// released. The caller holds s.mu.
func (s *Server) release(g *group, m *member, a *activity, now time.Time) {
	m.state = Removing
	if m.creation == Attached && !m.entrusted {
		// Removed from the group, not released
		// (help/en/auto-scaling/user-guide/instance-lifecycles).
		g.drop(m)
		a.done(now)
		return
	}
	m.inst.status = "Stopping"
	h := m.inst.handle
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		var err error
		if h != nil {
			err = h.Stop(s.ctx)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if err != nil {
			a.message = fmt.Sprintf("Stopping instance %s: %v", m.inst.id, err)
		}
		m.inst.handle = nil
		g.drop(m)
		delete(s.instances, m.inst.id)
		a.done(time.Now())
		s.poke()
	}()
}

func (g *group) drop(m *member) {
	for i, x := range g.members {
		if x == m {
			g.members = append(g.members[:i], g.members[i+1:]...)
			return
		}
	}
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// group finds the group a request names. The caller holds s.mu.
func (c *call) group() (*group, *apiError) {
	id := c.p.Get("ScalingGroupId")
	if id == "" {
		return nil, errMissing("ScalingGroupId")
	}
	g := c.s.groups[id]
	if g == nil || g.RegionID != c.region {
		return nil, errf(404, "InvalidScalingGroupId.NotFound", "The specified scaling group does not exist.")
	}
	return g, nil
}

func errInProgress() *apiError {
	return errf(400, "ScalingActivityInProgress", "You cannot delete a scaling group or launch a new scaling activity while there is a scaling activity in progress for the specified scaling group.")
}
