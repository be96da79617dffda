package rollout

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Kube is Cluster over client-go.
type Kube struct {
	Client kubernetes.Interface
	// Poll is the pause between eviction retries and between checks that
	// evicted pods are gone.
	Poll time.Duration
	// Force evicts pods no controller owns as well (--force): evicted,
	// they are gone for good. Without it a Node holding one is not
	// drained.
	Force bool
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

// Drain implements Cluster: the pods are evicted all at once, each
// eviction retried while a PodDisruptionBudget refuses it (429) until ctx
// ends; then the error names each pod still refused and the API server's
// reason (the budget, from the refusal's causes). A pod no controller owns
// (a bare pod: nothing recreates it) stops the drain before any eviction
// unless Force.
func (k *Kube) Drain(ctx context.Context, node string, wait bool) error {
	pods, err := k.pods(ctx, node)
	if err != nil {
		return err
	}
	if !k.Force {
		var bare []string
		for _, p := range pods {
			if metav1.GetControllerOf(&p) == nil {
				bare = append(bare, p.Namespace+"/"+p.Name)
			}
		}
		if len(bare) > 0 {
			return fmt.Errorf("Node %s runs %d pod(s) that no controller owns (%s): evicted, they are gone for good; move them, or run again with --force", node, len(bare), strings.Join(bare, ", "))
		}
	}
	refused := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			refused[i] = k.evict(ctx, p)
		}()
	}
	wg.Wait()
	var blocked []string
	for i, err := range refused {
		if err != nil {
			blocked = append(blocked, fmt.Sprintf("%s/%s: %v", pods[i].Namespace, pods[i].Name, err))
		}
	}
	if len(blocked) > 0 {
		return fmt.Errorf("evicting %d of %d pod(s): %s", len(blocked), len(pods), strings.Join(blocked, "; "))
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

// evict evicts one pod, again while a PodDisruptionBudget refuses (429),
// until ctx ends: the error then carries the last refusal.
func (k *Kube) evict(ctx context.Context, p corev1.Pod) error {
	for {
		err := k.Client.CoreV1().Pods(p.Namespace).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}})
		if err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		if !apierrors.IsTooManyRequests(err) {
			return err
		}
		select {
		case <-ctx.Done():
			// The refusal's cause names the budget without its
			// namespace; the budgets are read for the report.
			bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			return fmt.Errorf("%s%w; still refused: %s", k.budgets(bctx, p), ctx.Err(), refusal(err))
		case <-time.After(k.Poll):
		}
	}
}

// budgets names the PodDisruptionBudgets that select p (those of its
// namespace whose selector matches its labels), with the counts the
// disruption controller reports, as "held by PodDisruptionBudget ns/name
// (…); ": the report of a drain that a budget keeps refusing. "" when
// none is found or they cannot be read (the refusal's own text remains).
func (k *Kube) budgets(ctx context.Context, p corev1.Pod) string {
	list, err := k.Client.PolicyV1().PodDisruptionBudgets(p.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return ""
	}
	var out []string
	for _, b := range list.Items {
		sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
		if err != nil || b.Spec.Selector == nil || !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		want := ""
		switch {
		case b.Spec.MinAvailable != nil:
			want = "minAvailable " + b.Spec.MinAvailable.String()
		case b.Spec.MaxUnavailable != nil:
			want = "maxUnavailable " + b.Spec.MaxUnavailable.String()
		}
		out = append(out, fmt.Sprintf("PodDisruptionBudget %s/%s (%s: %d of %d pods healthy, %d disruption(s) allowed)",
			b.Namespace, b.Name, want, b.Status.CurrentHealthy, b.Status.ExpectedPods, b.Status.DisruptionsAllowed))
	}
	if len(out) == 0 {
		return ""
	}
	return "held by " + strings.Join(out, " and ") + ": "
}

// refusal is an eviction's refusal as the API server gave it: its message
// and the causes (a DisruptionBudget cause names the budget and how many
// healthy pods it needs).
func refusal(err error) string {
	msg := err.Error()
	var se apierrors.APIStatus
	if errors.As(err, &se) && se.Status().Details != nil {
		for _, c := range se.Status().Details.Causes {
			msg += " (" + string(c.Type) + ": " + c.Message + ")"
		}
	}
	return msg
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
