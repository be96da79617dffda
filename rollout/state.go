// Package rollout replaces the instances of an Alibaba Cloud ESS scaling
// group with ones launched from a new image or node configuration, gated on
// the new Nodes being Ready in the cluster, and repairs a group whose Nodes
// went unhealthy. Planning is pure (Plan, PlanRepair over an observed
// State); Run and Repair carry a plan out through two small interfaces,
// Cloud (ECS/ESS) and Cluster (the API server), so tests drive them with
// the in-memory fakes in fake_test.go.
package rollout

import (
	"strings"
	"time"
)

// Group is the part of a scaling group a rollout reads.
type Group struct {
	ID         string
	TemplateID string
	// TemplateVersion is the version as the group names it: a number,
	// "Default" or "Latest".
	TemplateVersion string
	MinSize         int
	MaxSize         int
	DesiredCapacity int
	// NoDesiredCapacity: the group was created without an expected number
	// of instances (DescribeScalingGroups answers no DesiredCapacity).
	// ESS then neither replaces a removed instance nor retries a failed
	// launch, and a rollout cannot count on it: Run and Repair refuse it.
	NoDesiredCapacity bool
}

// Lifecycle states of a scaling group's instance (ESS LifecycleState).
// Standby and Protected instances count toward the group's desired
// capacity and no scale-in removes them (ESS EnterStandby,
// SetInstancesProtection); a rollout leaves them alone.
const (
	InService = "InService"
	Pending   = "Pending"
	Standby   = "Standby"
	Protected = "Protected"
	// PendingWait and RemovingWait: a lifecycle hook of the group
	// (CreateLifecycleHook, SCALE_OUT or SCALE_IN) holds the instance, and
	// the scaling activity with it, until its lifecycle action is
	// completed (CompleteLifecycleAction) or the hook's HeartbeatTimeout
	// ends it with its DefaultResult. A rollout waits: the hook is
	// whoever made it's to complete.
	PendingWait  = "Pending:Wait"
	RemovingWait = "Removing:Wait"
)

// hookWait says what holds an instance in a lifecycle hook's wait state
// ("" for any other state).
func hookWait(state string) string {
	switch state {
	case PendingWait:
		return "a scale-out lifecycle hook holds it (ESS puts it in service once the hook's action is completed with CONTINUE or the hook times out)"
	case RemovingWait:
		return "a scale-in lifecycle hook holds it (ESS removes it once the hook's action is completed or times out, and starts no other scaling activity of the group meanwhile)"
	}
	return ""
}

// Attached is the CreationType of an instance added to the group by hand
// (AttachInstances) rather than launched by it (AutoCreated).
const Attached = "Attached"

// Instance is one instance of the group.
type Instance struct {
	ID              string
	State           string
	TemplateID      string
	TemplateVersion string
	// CreationType is AutoCreated, Attached or "" (not known: taken as
	// AutoCreated).
	CreationType string
	// Zone is the instance's zone (DescribeScalingInstances ZoneId), the
	// zone of the group's vSwitch ESS launched it into.
	Zone string
}

// attached reports whether the instance was added to the group by hand.
func (i Instance) attached() bool { return i.CreationType == Attached }

// skip says why a rollout leaves the instance alone ("" when it does not):
// it counts toward the group's desired capacity, but drover did not launch
// it or ESS keeps it from being scaled in. Repair does not judge these
// either.
func (i Instance) skip() string {
	switch {
	case i.attached():
		return "attached to the group by hand (CreationType Attached), not launched from its template: not replaced; roll it by hand (RemoveInstances, then let the group launch one)"
	case i.State == Standby:
		return "in Standby (EnterStandby): not replaced; ExitStandby it and run again to have it rolled"
	case i.State == Protected:
		return "Protected from scale-in (SetInstancesProtection): not replaced; remove the protection and run again to have it rolled"
	case !i.active():
		return "lifecycle state " + i.State + ": not replaced; once it is InService again, run again to have it rolled"
	}
	return ""
}

// active reports whether the instance counts toward the group's capacity:
// in service or on its way there. Removing instances are on their way out.
func (i Instance) active() bool {
	return i.State == InService || i.State == Pending || i.State == PendingWait
}

// leaving reports whether the instance is on its way out of the group.
func (i Instance) leaving() bool {
	return strings.HasPrefix(i.State, "Removing") || i.State == "Detaching"
}

// TemplateVersion is one version of a launch template.
type TemplateVersion struct {
	TemplateID  string
	Number      int64
	Default     bool
	Description string
	ImageID     string
	// UserData is decoded (the API carries it base64).
	UserData []byte
	// Config is the node-config label value (nodecontract.ConfigLabel of
	// UserData's digest) or "" when UserData is not a config
	// the agent accepts. The observer computes it.
	Config string
}

// Node is the part of a Kubernetes Node a rollout reads.
type Node struct {
	Name          string
	ProviderID    string
	Labels        map[string]string
	Unschedulable bool
	Conditions    []Condition
}

// Condition is a Node condition; Since is its lastTransitionTime.
type Condition struct {
	Type, Status, Reason, Message string
	Since                         time.Time
}

// Condition returns the node's condition of type t.
func (n *Node) Condition(t string) (Condition, bool) {
	for _, c := range n.Conditions {
		if c.Type == t {
			return c, true
		}
	}
	return Condition{}, false
}

// Ready reports whether the node's Ready condition is True.
func (n *Node) Ready() bool {
	c, ok := n.Condition("Ready")
	return ok && c.Status == "True"
}

// State is what a rollout observes of a group and its cluster.
type State struct {
	Region    string
	Group     Group
	Versions  []TemplateVersion // all versions of the group's template
	Instances []Instance
	Nodes     []Node
}

// version returns the version the group or an instance names, resolving
// Default and Latest; nil when it is not known.
func (s *State) version(templateID, v string) *TemplateVersion {
	if templateID != s.Group.TemplateID {
		return nil
	}
	var best *TemplateVersion
	for i := range s.Versions {
		tv := &s.Versions[i]
		switch {
		case strings.EqualFold(v, "Default") && tv.Default,
			!strings.EqualFold(v, "Latest") && formatInt(tv.Number) == v:
			return tv
		case strings.EqualFold(v, "Latest") && (best == nil || tv.Number > best.Number):
			best = tv
		}
	}
	return best
}

// node finds the Node of an instance: by providerID (<region>.<instance-id>,
// what the agent sets), else by name (a hostname that is the instance ID).
func (s *State) node(instanceID string) *Node {
	for i := range s.Nodes {
		n := &s.Nodes[i]
		if n.ProviderID == s.Region+"."+instanceID || (n.ProviderID != "" && strings.HasSuffix(n.ProviderID, "."+instanceID)) {
			return n
		}
	}
	for i := range s.Nodes {
		if s.Nodes[i].Name == instanceID {
			return &s.Nodes[i]
		}
	}
	return nil
}
