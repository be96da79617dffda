package ecsapi

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Lifecycle hooks (CreateLifecycleHook, CompleteLifecycleAction,
// DescribeLifecycleActions under help/en/auto-scaling/developer-reference/).
// A hook of a group holds each instance its transition moves — a launched
// instance in Pending:Wait (SCALE_OUT), a removed one in Removing:Wait
// (SCALE_IN) — and the scaling activity with it, until the lifecycle action
// ends: CompleteLifecycleAction with its token (status Completed), or the
// hook's HeartbeatTimeout (status Timeout) with the hook's DefaultResult.
// CONTINUE puts a launched instance InService; ABANDON releases it (the
// activity counts it as failed). A removed instance goes either way.
//
// Not documented, and chosen here: one lifecycle action per activity and
// hook, holding all its instances (DescribeLifecycleActions answers
// InstanceIds per action); several hooks of one transition are not
// modelled (a second is refused, so a test relying on them fails loudly);
// the error codes of a wrong token, a finished action and a second hook.

// Lifecycle states while a hook holds an instance (DescribeScalingInstances
// LifecycleState).
const (
	PendingWait  = "Pending:Wait"
	RemovingWait = "Removing:Wait"
)

// Lifecycle transitions and results (CreateLifecycleHook).
const (
	ScaleOut = "SCALE_OUT"
	ScaleIn  = "SCALE_IN"
	Continue = "CONTINUE"
	Abandon  = "ABANDON"
)

type hook struct {
	id, name, transition, defaultResult string
	timeout                             int // HeartbeatTimeout, seconds
}

type lifecycleAction struct {
	token, status, result string
	hook                  *hook
	activity              *activity
	members               []*member
	deadline              time.Time
}

func (m *member) leaving() bool { return strings.HasPrefix(m.state, Removing) }

func (g *group) hook(transition string) *hook {
	for _, h := range g.hooks {
		if h.transition == transition {
			return h
		}
	}
	return nil
}

func (s *Server) hookSecond() time.Duration {
	if s.cfg.HookSecond > 0 {
		return s.cfg.HookSecond
	}
	return time.Second
}

// hold adds m to the pending action of activity a and hook h. The caller
// holds s.mu.
func (g *group) hold(h *hook, a *activity, m *member, now time.Time, second time.Duration) {
	for _, la := range g.actions {
		if la.activity == a && la.hook == h && la.status == "Pending" {
			la.members = append(la.members, m)
			return
		}
	}
	g.actions = append(g.actions, &lifecycleAction{token: newID("", 8) + "-" + newID("", 4) + "-" + newID("", 12),
		status: "Pending", hook: h, activity: a, members: []*member{m}, deadline: now.Add(time.Duration(h.timeout) * second)})
}

// expireActions ends the actions whose hook timed out with its
// DefaultResult. The caller holds s.mu.
func (s *Server) expireActions(g *group, now time.Time) {
	for _, la := range g.actions {
		if la.status == "Pending" && !now.Before(la.deadline) {
			s.endAction(g, la, la.hook.defaultResult, "Timeout", now)
		}
	}
}

// endAction lets the action's instances go on. The caller holds s.mu.
func (s *Server) endAction(g *group, la *lifecycleAction, result, status string, now time.Time) {
	la.status, la.result = status, result
	a := la.activity
	for _, m := range la.members {
		switch {
		case la.hook.transition == ScaleIn:
			s.release(g, m, a, now)
		case result == Continue:
			m.state = InService
			a.done(now)
		default:
			a.failures++
			a.message = fmt.Sprintf("The lifecycle hook %s ended with ABANDON (%s): instance %s was released.", la.hook.name, status, m.inst.id)
			a.created = slices.DeleteFunc(a.created, func(id string) bool { return id == m.inst.id })
			s.release(g, m, a, now)
		}
	}
	s.poke()
}

func (c *call) createLifecycleHook() (obj, *apiError) {
	name := c.p.Get("LifecycleHookName")
	transition := c.p.Get("LifecycleTransition")
	result := firstOf(c.p.Get("DefaultResult"), Continue)
	timeout, e := c.intParam("HeartbeatTimeout", 600)
	switch {
	case e != nil:
		return nil, e
	case name == "":
		return nil, errMissing("LifecycleHookName")
	case transition == "":
		return nil, errMissing("LifecycleTransition")
	case transition != ScaleOut && transition != ScaleIn:
		return nil, errInvalid("LifecycleTransition")
	case result != Continue && result != Abandon:
		return nil, errInvalid("DefaultResult")
	case timeout < 30 || timeout > 21600: // documented: 30 to 21600 seconds
		return nil, errInvalid("HeartbeatTimeout")
	}
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	g, e := c.group()
	if e != nil {
		return nil, e
	}
	if g.hook(transition) != nil {
		return nil, errf(400, "Unsupported.MultipleLifecycleHooks", "The emulator models one lifecycle hook per transition; the group already has a %s hook.", transition)
	}
	h := &hook{id: newID("ash-", 20), name: name, transition: transition, defaultResult: result, timeout: timeout}
	g.hooks = append(g.hooks, h)
	return obj{"LifecycleHookId": h.id}, nil
}

func (c *call) completeLifecycleAction() (obj, *apiError) {
	token, hookID := c.p.Get("LifecycleActionToken"), c.p.Get("LifecycleHookId")
	result := firstOf(c.p.Get("LifecycleActionResult"), Continue)
	switch {
	case token == "":
		return nil, errMissing("LifecycleActionToken")
	case hookID == "":
		return nil, errMissing("LifecycleHookId")
	case result != Continue && result != Abandon:
		return nil, errInvalid("LifecycleActionResult")
	}
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range s.groupIDs {
		g := s.groups[id]
		for _, la := range g.actions {
			if la.token != token || la.hook.id != hookID || g.RegionID != c.region {
				continue
			}
			if la.status != "Pending" {
				return nil, errf(400, "IncorrectLifecycleActionStatus", "The lifecycle action is %s already.", la.status)
			}
			s.endAction(g, la, result, "Completed", c.now)
			return obj{}, nil
		}
	}
	return nil, errf(404, "InvalidLifecycleActionToken.NotFound", "The specified lifecycle action token of hook %s does not exist.", hookID)
}

func (c *call) describeLifecycleActions() (obj, *apiError) {
	id := c.p.Get("ScalingActivityId")
	if id == "" {
		return nil, errMissing("ScalingActivityId")
	}
	status := c.p.Get("LifecycleActionStatus")
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []obj{}
	for _, gid := range s.groupIDs {
		g := s.groups[gid]
		for _, la := range g.actions {
			if la.activity.id != id || (status != "" && status != la.status) || g.RegionID != c.region {
				continue
			}
			ids := []string{}
			for _, m := range la.members {
				ids = append(ids, m.inst.id)
			}
			out = append(out, obj{"LifecycleHookId": la.hook.id, "LifecycleActionToken": la.token,
				"LifecycleActionStatus": la.status, "LifecycleActionResult": la.result, "InstanceIds": obj{"InstanceId": ids}})
		}
	}
	return obj{"TotalCount": len(out), "MaxResults": len(out), "NextToken": "", "LifecycleActions": obj{"LifecycleAction": out}}, nil
}
