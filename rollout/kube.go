package rollout

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Kube is Cluster over client-go.
type Kube struct {
	Client kubernetes.Interface
	// Poll is the pause between eviction retries and between checks that
	// evicted pods are gone.
	Poll time.Duration
}

// Nodes implements Cluster.
func (k *Kube) Nodes(ctx context.Context) ([]Node, error) {
	list, err := k.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]Node, 0, len(list.Items))
	for _, n := range list.Items {
		node := Node{Name: n.Name, ProviderID: n.Spec.ProviderID, Labels: n.Labels, Unschedulable: n.Spec.Unschedulable}
		for _, c := range n.Status.Conditions {
			node.Conditions = append(node.Conditions, Condition{Type: string(c.Type), Status: string(c.Status), Reason: c.Reason, Message: c.Message, Since: c.LastTransitionTime.Time})
		}
		out = append(out, node)
	}
	return out, nil
}

// Cordon implements Cluster.
func (k *Kube) Cordon(ctx context.Context, node string) error {
	_, err := k.Client.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{})
	return err
}

// DeleteNode implements Cluster.
func (k *Kube) DeleteNode(ctx context.Context, node string) error {
	err := k.Client.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// Events implements Cluster.
func (k *Kube) Events(ctx context.Context, node string) ([]string, error) {
	sel := fields.Set{"involvedObject.kind": "Node", "involvedObject.name": node}.AsSelector().String()
	list, err := k.Client.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, err
	}
	evs := list.Items
	sort.SliceStable(evs, func(i, j int) bool { return eventTime(evs[i]).Before(eventTime(evs[j])) })
	out := make([]string, 0, len(evs))
	for _, e := range evs {
		out = append(out, fmt.Sprintf("%s %s %s %s: %s", eventTime(e).UTC().Format(time.RFC3339), e.Type, first(e.Source.Component, e.ReportingController), e.Reason, e.Message))
	}
	return out, nil
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// Evictable reports whether a drain evicts the pod: not a mirror pod (the
// kubelet's static pods; the API cannot move them), not one a DaemonSet
// runs on every node, and not one that has ended.
func Evictable(p *corev1.Pod) bool {
	if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" && o.Controller != nil && *o.Controller {
			return false
		}
	}
	return p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// Drain implements Cluster: one Eviction per pod, retried while a
// PodDisruptionBudget refuses it (429) until ctx ends.
func (k *Kube) Drain(ctx context.Context, node string, wait bool) error {
	pods, err := k.pods(ctx, node)
	if err != nil {
		return err
	}
	for _, p := range pods {
		for {
			err := k.Client.CoreV1().Pods(p.Namespace).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}})
			if err == nil || apierrors.IsNotFound(err) {
				break
			}
			if !apierrors.IsTooManyRequests(err) {
				return fmt.Errorf("evicting pod %s/%s: %w", p.Namespace, p.Name, err)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("evicting pod %s/%s: %w (last refusal: %v)", p.Namespace, p.Name, ctx.Err(), err)
			case <-time.After(k.Poll):
			}
		}
	}
	for wait {
		left, err := k.pods(ctx, node)
		if err != nil {
			return err
		}
		if len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d evicted pod(s) to end (first %s/%s): %w", len(left), left[0].Namespace, left[0].Name, ctx.Err())
		case <-time.After(k.Poll):
		}
	}
	return nil
}

func (k *Kube) pods(ctx context.Context, node string) ([]corev1.Pod, error) {
	list, err := k.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if err != nil {
		return nil, fmt.Errorf("listing the pods of Node %s: %w", node, err)
	}
	var out []corev1.Pod
	for i := range list.Items {
		// The field selector is checked again: not every server (nor
		// client-go's fake) applies it.
		if list.Items[i].Spec.NodeName == node && Evictable(&list.Items[i]) {
			out = append(out, list.Items[i])
		}
	}
	return out, nil
}
