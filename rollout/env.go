package rollout

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/drover-os/drover/cloud/event"
	"github.com/drover-os/drover/nodecontract"
)

// Cloud is the ECS and ESS calls a rollout makes (aliyun.go implements it
// with the SDKs, fake_test.go in memory).
type Cloud interface {
	// Group is DescribeScalingGroups of one group.
	Group(ctx context.Context, id string) (Group, error)
	// Instances is DescribeScalingInstances, every page.
	Instances(ctx context.Context, groupID string) ([]Instance, error)
	// TemplateVersions is DescribeLaunchTemplateVersions with details,
	// every version (Config left empty).
	TemplateVersions(ctx context.Context, templateID string) ([]TemplateVersion, error)
	// CreateTemplateVersion makes a version from base's launch data with
	// another image and user-data; it returns the new version's number.
	CreateTemplateVersion(ctx context.Context, templateID string, base int64, imageID string, userData []byte, description string) (int64, error)
	// DeleteTemplateVersions is DeleteLaunchTemplateVersion of the given
	// numbers, all or none.
	DeleteTemplateVersions(ctx context.Context, templateID string, numbers []int64) error
	// SetTemplateVersion is ModifyScalingGroup's LaunchTemplateVersion.
	SetTemplateVersion(ctx context.Context, groupID, templateID, version string) error
	// SetMaxSize is ModifyScalingGroup's MaxSize.
	SetMaxSize(ctx context.Context, groupID string, n int) error
	// SetMinSize is ModifyScalingGroup's MinSize.
	SetMinSize(ctx context.Context, groupID string, n int) error
	// ScaleOut is ScaleWithAdjustment QuantityChangeInCapacity +n; it
	// returns the ID of the scaling activity ESS started for it.
	ScaleOut(ctx context.Context, groupID string, n int) (activityID string, err error)
	// SetDesiredCapacity is ModifyScalingGroup's DesiredCapacity.
	SetDesiredCapacity(ctx context.Context, groupID string, n int) error
	// Remove is RemoveInstances; decrease also lowers the desired
	// capacity, so the group does not launch replacements.
	Remove(ctx context.Context, groupID string, ids []string, decrease bool) error
	// ConsoleOutput is GetInstanceConsoleOutput, decoded.
	ConsoleOutput(ctx context.Context, instanceID string) ([]byte, error)
	// GroupTags is ListTagResources of the group (key → value).
	GroupTags(ctx context.Context, groupID string) (map[string]string, error)
	// SetGroupTags is TagResources on the group: each key set to its value.
	SetGroupTags(ctx context.Context, groupID string, tags map[string]string) error
	// RemoveGroupTags is UntagResources of the keys on the group.
	RemoveGroupTags(ctx context.Context, groupID string, keys []string) error
	// LastActivity is the group's newest scaling activity
	// (DescribeScalingActivities); ok is false when it has none.
	LastActivity(ctx context.Context, groupID string) (a Activity, ok bool, err error)
	// Activity is DescribeScalingActivities of one activity of the group;
	// ok is false when ESS does not list it (yet).
	Activity(ctx context.Context, groupID, id string) (a Activity, ok bool, err error)
}

// Activity is a scaling activity as DescribeScalingActivities describes it
// (the SDK's ess.ScalingActivity).
type Activity struct {
	ID, Description, Cause string
	// StatusCode is one of the Activity* values; StatusMessage says why
	// when it did not succeed, and ErrorCode/ErrorMessage, when ESS
	// answers them, are the error behind it (for a launch: ECS's, e.g.
	// OperationDenied.NoStock).
	StatusCode, StatusMessage string
	ErrorCode, ErrorMessage   string
}

// The StatusCode values of a scaling activity, as
// DescribeScalingActivities documents them
// (help/en/auto-scaling/developer-reference/api-describescalingactivities).
const (
	ActivitySuccessful = "Successful"
	ActivityWarning    = "Warning" // "partially successful"
	ActivityFailed     = "Failed"
	ActivityInProgress = "InProgress"
	ActivityRejected   = "Rejected" // "the request to trigger the scaling activity is rejected"
)

// failed reports whether the activity ended without doing all it was
// asked: Failed, Rejected, or Warning (some instances launched, some not).
// A code the documentation does not list is not taken as a failure: the
// activity is then watched like one in progress, within the rollout's
// timeouts.
func (a Activity) failed() bool {
	switch a.StatusCode {
	case ActivityFailed, ActivityRejected, ActivityWarning:
		return true
	}
	return false
}

func (a Activity) String() string {
	s := a.ID + " " + a.StatusCode + ": " + a.Description
	if a.StatusMessage != "" {
		s += ": " + a.StatusMessage
	}
	if a.ErrorCode != "" && !strings.Contains(a.StatusMessage, a.ErrorCode) {
		s += " (" + a.ErrorCode
		if a.ErrorMessage != "" {
			s += ": " + a.ErrorMessage
		}
		s += ")"
	}
	return s
}

// Cluster is what a rollout asks of the API server (kube.go implements
// it with client-go, fake_test.go in memory).
type Cluster interface {
	Nodes(ctx context.Context) ([]Node, error)
	Cordon(ctx context.Context, node string) error
	// Drain evicts the node's pods through the Eviction API, except
	// DaemonSet and mirror pods, retrying evictions a
	// PodDisruptionBudget refuses until ctx ends; with wait it also waits
	// until the evicted pods are gone.
	Drain(ctx context.Context, node string, wait bool) error
	// DeleteNode removes the Node of an instance that left the group
	// (no cloud controller does it in a self-built cluster).
	DeleteNode(ctx context.Context, node string) error
	// Events are the node's Events, one line each, oldest first.
	Events(ctx context.Context, node string) ([]string, error)
}

// Event is one step of a rollout or repair, for progress lines and
// --json: the record drover publish emits too.
type Event = event.Event

// Kinds of events.
const (
	EventPlan     = event.Plan
	EventTemplate = "template"
	EventGroup    = "group"
	EventScale    = "scale"
	EventWaiting  = "waiting"
	EventReady    = "ready"
	EventCordon   = "cordon"
	EventDrain    = "drain"
	EventRemove   = "remove"
	EventWarning  = "warning"
	EventFailed   = "failed"
	EventDone     = event.Done
	// EventPaused ends a run that stopped after its first batch
	// (--pause-after-first): the rollout is in flight, --resume goes on.
	EventPaused = "paused"
)

// Env is what Run and Repair act through.
type Env struct {
	Cloud   Cloud
	Cluster Cluster
	// Region prefixes instance IDs in Nodes' providerIDs.
	Region string
	// Digest is nodecontract.ConfigDigest unless a test sets another.
	Digest func([]byte) (string, error)
	// Event receives progress; nil drops it.
	Event func(Event)
	// Poll is the pause between two observations of the group.
	Poll time.Duration
	// ReadyTimeout bounds the wait for a new instance's Node to be Ready;
	// DrainTimeout one node's drain. MinReady is the soak (--min-ready,
	// a Deployment's minReadySeconds): a new Node counts as Ready only
	// once it has been Ready that long, so one that fails soon after
	// joining stops the rollout before an old Node goes for it.
	ReadyTimeout, DrainTimeout, MinReady time.Duration
	// KeepFailed leaves a new instance that did not become Ready in the
	// group for inspection instead of removing it.
	KeepFailed bool
	// DryRun stops Run and Repair once they have printed the plan: no
	// write call.
	DryRun bool
	// Now is time.Now unless a test sets another.
	Now func() time.Time
	// Owner names this run in the group's lock (user@host); RunID tells
	// it from others (NewRunID when empty). LockTTL is how long the lock
	// lasts unrenewed (DefaultLockTTL when 0). BreakLock removes another
	// run's live lock: for a holder known to be dead.
	Owner, RunID string
	LockTTL      time.Duration
	BreakLock    bool
}

func (e *Env) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

func (e *Env) emit(ev Event) {
	if e.Event == nil {
		return
	}
	if ev.Time.IsZero() {
		ev.Time = e.now()
	}
	e.Event(ev)
}

func (e *Env) sleep(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(e.Poll):
		return nil
	}
}

// Observe reads the group, its template's versions, its instances and the
// cluster's Nodes.
func (e *Env) Observe(ctx context.Context, groupID string) (State, error) {
	st := State{Region: e.Region}
	g, err := e.Cloud.Group(ctx, groupID)
	if err != nil {
		return st, err
	}
	st.Group = g
	if g.TemplateID != "" {
		if st.Versions, err = e.Cloud.TemplateVersions(ctx, g.TemplateID); err != nil {
			return st, err
		}
	}
	digest := e.Digest
	if digest == nil {
		digest = nodecontract.ConfigDigest
	}
	for i := range st.Versions {
		if d, err := digest(st.Versions[i].UserData); err == nil {
			st.Versions[i].Config = nodecontract.ConfigLabel(d)
		}
	}
	if st.Instances, err = e.Cloud.Instances(ctx, groupID); err != nil {
		return st, err
	}
	if st.Nodes, err = e.Cluster.Nodes(ctx); err != nil {
		return st, fmt.Errorf("listing Nodes: %w", err)
	}
	return st, nil
}
