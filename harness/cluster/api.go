package cluster

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Node is what the smoke tests look at on a Node object.
type Node struct {
	Name       string
	ProviderID string
	Labels     map[string]string
	// Ready is the Ready condition's status == "True"; ReadyReason and
	// ReadyMessage explain a node that is not (empty before the kubelet
	// has posted any status).
	Ready        bool
	ReadyReason  string
	ReadyMessage string
	// KubeletVersion and ContainerRuntimeVersion are what the kubelet
	// posted in status.nodeInfo (v1.37.2, containerd://2.4.2).
	KubeletVersion          string
	ContainerRuntimeVersion string
	// BootID is the boot ID the kubelet posted in status.nodeInfo
	// (/proc/sys/kernel/random/boot_id): which boot of the machine the
	// status, Ready included, was last posted from.
	BootID string
	// Conditions are all of the Node's conditions by type (the kubelet's
	// and drover-agent's DroverConfigDrift).
	Conditions map[string]Condition
	// Capacity and Allocatable are status.capacity and
	// status.allocatable as quantities ("2", "3022124Ki").
	Capacity, Allocatable map[string]string
	// Unschedulable is spec.unschedulable (cordoned); Taints are
	// spec.taints as key:effect.
	Unschedulable bool
	Taints        []string
	// Images are status.images: the names (tags and repo digests) of each
	// image the node's runtime holds, as the kubelet posted them.
	Images [][]string
}

// Condition is one Node or Pod condition.
type Condition struct {
	Status, Reason, Message string
	// LastTransitionTime is when Status last changed (zero if unset).
	LastTransitionTime time.Time
}

// Event is what the smoke tests look at on an Event.
type Event struct {
	Name, Type, Reason, Message string
	// InvolvedKind and InvolvedName name the object the event is about.
	InvolvedKind, InvolvedName string
	Source                     string // source.component
}

// Pod is what the smoke tests look at on a Pod object.
type Pod struct {
	Namespace, Name string
	NodeName        string
	Phase           string // Pending, Running, Succeeded, Failed, Unknown
	Reason, Message string
	// TerminationMessage is what the pod's terminated containers left in
	// their termination message (one line per container that has one), the
	// way a smoke-test pod reports its findings.
	TerminationMessage string
	// TerminatedReasons are the reasons of its terminated containers
	// (Completed, Error, OOMKilled), in container order.
	TerminatedReasons []string
	// ExitCodes are those containers' exit codes, in the same order.
	ExitCodes []int32
	// Conditions are the pod's conditions by type (DisruptionTarget:
	// why the pod was stopped, when it was).
	Conditions map[string]Condition
	// Waiting are the reasons and messages of its waiting containers
	// (ErrImagePull, ImagePullBackOff), in container order.
	Waiting []Waiting
	// PullSecrets are the names in spec.imagePullSecrets.
	PullSecrets []string
	// ImageIDs are the containers' status.imageID (the digest pulled).
	ImageIDs []string
}

// Waiting is a waiting container's state.
type Waiting struct{ Reason, Message string }

type apiCondition struct {
	Type, Status, Reason, Message string
	LastTransitionTime            time.Time `json:"lastTransitionTime"`
}

type apiNode struct {
	Metadata struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		ProviderID    string `json:"providerID"`
		Unschedulable bool   `json:"unschedulable"`
		Taints        []struct {
			Key, Effect string
		} `json:"taints"`
	} `json:"spec"`
	Status struct {
		Conditions  []apiCondition    `json:"conditions"`
		Capacity    map[string]string `json:"capacity"`
		Allocatable map[string]string `json:"allocatable"`
		Images      []struct {
			Names []string `json:"names"`
		} `json:"images"`
		NodeInfo struct {
			KubeletVersion          string `json:"kubeletVersion"`
			ContainerRuntimeVersion string `json:"containerRuntimeVersion"`
			BootID                  string `json:"bootID"`
		} `json:"nodeInfo"`
	} `json:"status"`
}

func (n *apiNode) node() Node {
	out := Node{Name: n.Metadata.Name, ProviderID: n.Spec.ProviderID, Labels: n.Metadata.Labels, Conditions: map[string]Condition{},
		KubeletVersion: n.Status.NodeInfo.KubeletVersion, ContainerRuntimeVersion: n.Status.NodeInfo.ContainerRuntimeVersion,
		BootID: n.Status.NodeInfo.BootID, Capacity: n.Status.Capacity, Allocatable: n.Status.Allocatable}
	out.Unschedulable = n.Spec.Unschedulable
	for _, t := range n.Spec.Taints {
		out.Taints = append(out.Taints, t.Key+":"+t.Effect)
	}
	for _, im := range n.Status.Images {
		out.Images = append(out.Images, im.Names)
	}
	for _, c := range n.Status.Conditions {
		out.Conditions[c.Type] = Condition{Status: c.Status, Reason: c.Reason, Message: c.Message, LastTransitionTime: c.LastTransitionTime}
		if c.Type == "Ready" {
			out.Ready, out.ReadyReason, out.ReadyMessage = c.Status == "True", c.Reason, c.Message
		}
	}
	return out
}

type apiPod struct {
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec struct {
		NodeName         string `json:"nodeName"`
		ImagePullSecrets []struct {
			Name string `json:"name"`
		} `json:"imagePullSecrets"`
	} `json:"spec"`
	Status struct {
		Phase             string         `json:"phase"`
		Reason            string         `json:"reason"`
		Message           string         `json:"message"`
		Conditions        []apiCondition `json:"conditions"`
		ContainerStatuses []struct {
			ImageID string `json:"imageID"`
			State   struct {
				Waiting *struct {
					Reason  string `json:"reason"`
					Message string `json:"message"`
				} `json:"waiting"`
				Terminated *struct {
					Message  string `json:"message"`
					Reason   string `json:"reason"`
					ExitCode int32  `json:"exitCode"`
				} `json:"terminated"`
			} `json:"state"`
		} `json:"containerStatuses"`
	} `json:"status"`
}

func (p *apiPod) pod() Pod {
	var msgs, reasons []string
	var codes []int32
	var waiting []Waiting
	var secrets, ids []string
	for _, s := range p.Spec.ImagePullSecrets {
		secrets = append(secrets, s.Name)
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.ImageID != "" {
			ids = append(ids, cs.ImageID)
		}
		if w := cs.State.Waiting; w != nil {
			waiting = append(waiting, Waiting{Reason: w.Reason, Message: w.Message})
		}
		if t := cs.State.Terminated; t != nil {
			reasons = append(reasons, t.Reason)
			codes = append(codes, t.ExitCode)
			if t.Message != "" {
				msgs = append(msgs, strings.TrimRight(t.Message, "\n"))
			}
		}
	}
	return Pod{Namespace: p.Metadata.Namespace, Name: p.Metadata.Name, NodeName: p.Spec.NodeName,
		Phase: p.Status.Phase, Reason: p.Status.Reason, Message: p.Status.Message,
		TerminationMessage: strings.Join(msgs, "\n"), Conditions: conditions(p.Status.Conditions), TerminatedReasons: reasons, ExitCodes: codes,
		Waiting: waiting, PullSecrets: secrets, ImageIDs: ids}
}

func conditions(cs []apiCondition) map[string]Condition {
	out := make(map[string]Condition, len(cs))
	for _, c := range cs {
		out[c.Type] = Condition{Status: c.Status, Reason: c.Reason, Message: c.Message, LastTransitionTime: c.LastTransitionTime}
	}
	return out
}

// Nodes lists the cluster's nodes.
func (c *Cluster) Nodes(ctx context.Context) ([]Node, error) {
	var list struct{ Items []apiNode }
	if err := c.client.do(ctx, http.MethodGet, "/api/v1/nodes", nil, &list); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	out := make([]Node, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, list.Items[i].node())
	}
	return out, nil
}

// Node returns the node called name; a missing node is an error that
// matches ErrNotFound.
func (c *Cluster) Node(ctx context.Context, name string) (*Node, error) {
	var n apiNode
	if err := c.client.do(ctx, http.MethodGet, "/api/v1/nodes/"+url.PathEscape(name), nil, &n); err != nil {
		return nil, fmt.Errorf("getting node %s: %w", name, err)
	}
	node := n.node()
	return &node, nil
}

// ServerVersion is the API server's gitVersion as its /version answers,
// the control plane's side of a version skew.
func (c *Cluster) ServerVersion(ctx context.Context) (string, error) {
	var v struct {
		GitVersion string `json:"gitVersion"`
	}
	if err := c.client.do(ctx, http.MethodGet, "/version", nil, &v); err != nil {
		return "", fmt.Errorf("getting the API server's version: %w", err)
	}
	return v.GitVersion, nil
}

// Pods lists the pods of namespace ns.
func (c *Cluster) Pods(ctx context.Context, ns string) ([]Pod, error) {
	var list struct{ Items []apiPod }
	if err := c.client.do(ctx, http.MethodGet, podsPath(ns), nil, &list); err != nil {
		return nil, fmt.Errorf("listing pods in %s: %w", ns, err)
	}
	out := make([]Pod, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, list.Items[i].pod())
	}
	return out, nil
}

// CreatePod creates the pod described by podJSON (a v1 Pod object) in ns.
func (c *Cluster) CreatePod(ctx context.Context, ns string, podJSON []byte) error {
	if err := c.client.do(ctx, http.MethodPost, podsPath(ns), podJSON, nil); err != nil {
		return fmt.Errorf("creating pod in %s: %w", ns, err)
	}
	return nil
}

// DeletePod deletes pod ns/name at once (grace period 0): a pod the check
// is done with must not go on pulling.
func (c *Cluster) DeletePod(ctx context.Context, ns, name string) error {
	if err := c.client.do(ctx, http.MethodDelete, podsPath(ns)+"/"+url.PathEscape(name)+"?gracePeriodSeconds=0", nil, nil); err != nil {
		return fmt.Errorf("deleting pod %s/%s: %w", ns, name, err)
	}
	return nil
}

// Pod returns pod ns/name; a missing pod is an error that matches
// ErrNotFound.
func (c *Cluster) Pod(ctx context.Context, ns, name string) (*Pod, error) {
	var p apiPod
	if err := c.client.do(ctx, http.MethodGet, podsPath(ns)+"/"+url.PathEscape(name), nil, &p); err != nil {
		return nil, fmt.Errorf("getting pod %s/%s: %w", ns, name, err)
	}
	pod := p.pod()
	return &pod, nil
}

// Events lists the events of namespace ns about the object kind/name.
func (c *Cluster) Events(ctx context.Context, ns, kind, name string) ([]Event, error) {
	var list struct {
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Type           string `json:"type"`
			Reason         string `json:"reason"`
			Message        string `json:"message"`
			InvolvedObject struct {
				Kind string `json:"kind"`
				Name string `json:"name"`
			} `json:"involvedObject"`
			Source struct {
				Component string `json:"component"`
			} `json:"source"`
		}
	}
	sel := url.QueryEscape("involvedObject.kind=" + kind + ",involvedObject.name=" + name)
	if err := c.client.do(ctx, http.MethodGet, "/api/v1/namespaces/"+url.PathEscape(ns)+"/events?fieldSelector="+sel, nil, &list); err != nil {
		return nil, fmt.Errorf("listing events in %s about %s %s: %w", ns, kind, name, err)
	}
	out := make([]Event, 0, len(list.Items))
	for _, e := range list.Items {
		out = append(out, Event{Name: e.Metadata.Name, Type: e.Type, Reason: e.Reason, Message: e.Message,
			InvolvedKind: e.InvolvedObject.Kind, InvolvedName: e.InvolvedObject.Name, Source: e.Source.Component})
	}
	return out, nil
}

func podsPath(ns string) string {
	return "/api/v1/namespaces/" + url.PathEscape(ns) + "/pods"
}

// CreateOrReplace creates obj (a JSON-encodable API object) in collection
// (an API path such as /api/v1/namespaces/default/serviceaccounts), or
// replaces the object of that name if it exists.
func (c *Cluster) CreateOrReplace(ctx context.Context, collection, name string, obj any) error {
	if err := c.client.createOrReplace(ctx, collection, name, obj); err != nil {
		return fmt.Errorf("creating %s/%s: %w", collection, name, err)
	}
	return nil
}
