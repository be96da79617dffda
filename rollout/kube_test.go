package rollout

import (
	"context"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	policyv1client "k8s.io/client-go/kubernetes/typed/policy/v1"
	k8stesting "k8s.io/client-go/testing"
)

func pod(name string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{NodeName: "n1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	for _, m := range mutate {
		m(p)
	}
	return p
}

// owned makes a pod one a ReplicaSet controls.
func owned(p *corev1.Pod) {
	yes := true
	p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web", Controller: &yes}}
}

// A pod no controller owns stops the drain before any eviction, named;
// with Force it is evicted. A budget that refuses until the deadline is
// named from the refusal's causes, for each pod it blocks, and the pods it
// does not block are evicted meanwhile (in parallel).
func TestKubeDrainBarePodsAndBlockingBudget(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	cs := fake.NewClientset(node, pod("bare"), pod("web-1", owned))
	var mu sync.Mutex
	var evictions []string
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		mu.Lock()
		defer mu.Unlock()
		name := a.(k8stesting.CreateAction).GetObject().(metav1.Object).GetName()
		evictions = append(evictions, name)
		if name == "db-1" || name == "db-2" {
			e := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
			e.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: "DisruptionBudget", Message: "The disruption budget db-pdb needs 2 healthy pods and has 2 currently"}}
			return true, nil, e
		}
		return true, nil, cs.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), "default", name)
	})
	ctx := context.Background()
	err := (&Kube{Client: cs, Poll: time.Millisecond}).Drain(ctx, "n1", false)
	if err == nil || !strings.Contains(err.Error(), "default/bare") || !strings.Contains(err.Error(), "--force") || len(evictions) != 0 {
		t.Fatalf("bare pod without --force: %v, evictions %v; want a refusal naming default/bare and --force, no eviction", err, evictions)
	}
	if err := (&Kube{Client: cs, Poll: time.Millisecond, Force: true}).Drain(ctx, "n1", true); err != nil {
		t.Fatalf("with Force: %v", err)
	}
	sort.Strings(evictions)
	if strings.Join(evictions, ",") != "bare,web-1" {
		t.Errorf("with Force evicted %v, want bare and web-1", evictions)
	}

	db := func(p *corev1.Pod) { p.Labels = map[string]string{"app": "db"} }
	for _, p := range []*corev1.Pod{pod("db-1", owned, db), pod("db-2", owned, db), pod("web-2", owned)} {
		if err := cs.Tracker().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	// The budget that selects the db pods, one of the same name in
	// another namespace, and one that selects other pods: the report names
	// only the first, with its namespace (the refusal's cause does not).
	two := intstr.FromInt32(2)
	for _, b := range []*policyv1.PodDisruptionBudget{
		{ObjectMeta: metav1.ObjectMeta{Name: "db-pdb", Namespace: "default"}, Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &two,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}, Status: policyv1.PodDisruptionBudgetStatus{CurrentHealthy: 2, ExpectedPods: 2}},
		{ObjectMeta: metav1.ObjectMeta{Name: "db-pdb", Namespace: "other"}, Spec: policyv1.PodDisruptionBudgetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "cache-pdb", Namespace: "default"}, Spec: policyv1.PodDisruptionBudgetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "cache"}}}},
	} {
		if err := cs.Tracker().Add(b); err != nil {
			t.Fatal(err)
		}
	}
	evictions = nil
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err = (&Kube{Client: ctxClient{cs}, Poll: 5 * time.Millisecond}).Drain(tctx, "n1", false)
	if err == nil {
		t.Fatal("a budget refusing until the deadline: no error")
	}
	for _, want := range []string{"2 of 3 pod(s)", "default/db-1", "default/db-2", "db-pdb needs 2 healthy pods",
		"default/db-1: held by PodDisruptionBudget default/db-pdb (minAvailable 2: 2 of 2 pods healthy, 0 disruption(s) allowed): "} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "other/") || strings.Contains(err.Error(), "cache-pdb") {
		t.Errorf("the error names a budget that does not select the pods: %v", err)
	}
	if strings.Contains(err.Error(), "web-2") || !slices.Contains(evictions, "web-2") {
		t.Errorf("web-2 (no budget) was not evicted beside the blocked ones: evictions %v, %v", evictions, err)
	}
}

func TestEvictable(t *testing.T) {
	yes := true
	cases := map[string]struct {
		p    *corev1.Pod
		want bool
	}{
		"plain":  {pod("a"), true},
		"mirror": {pod("b", func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"} }), false},
		"daemonset": {pod("c", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Controller: &yes}}
		}), false},
		"replicaset": {pod("d", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Controller: &yes}}
		}), true},
		"done": {pod("e", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), false},
	}
	for name, c := range cases {
		if got := Evictable(c.p); got != c.want {
			t.Errorf("%s: %v, want %v", name, got, c.want)
		}
	}
}

// TestKubeDrain: a PodDisruptionBudget refuses the first evictions (429);
// Drain retries until it allows them, evicts no DaemonSet pod, and waits
// for the evicted pods to be gone.
func TestKubeDrain(t *testing.T) {
	yes := true
	ds := pod("ds", func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Controller: &yes}}
	})
	other := pod("elsewhere", func(p *corev1.Pod) { p.Spec.NodeName = "n2" })
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	cs := fake.NewClientset(node, pod("web-1", owned), pod("web-2", owned), ds, other)
	var mu sync.Mutex
	refusals, evicted := 0, []string{}
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		mu.Lock()
		defer mu.Unlock()
		name := a.(k8stesting.CreateAction).GetObject().(metav1.Object).GetName()
		if refusals < 3 {
			refusals++
			return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		}
		evicted = append(evicted, name)
		return true, nil, cs.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), "default", name)
	})
	k := &Kube{Client: cs, Poll: time.Millisecond}
	ctx := context.Background()
	if err := k.Cordon(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if err := k.Drain(ctx, "n1", true); err != nil {
		t.Fatal(err)
	}
	sort.Strings(evicted)
	if refusals != 3 || strings.Join(evicted, ",") != "web-1,web-2" {
		t.Errorf("refusals %d evicted %v", refusals, evicted)
	}
	nodes, err := k.Nodes(ctx)
	if err != nil || len(nodes) != 1 || !nodes[0].Unschedulable {
		t.Errorf("nodes %+v %v", nodes, err)
	}
	// A budget that never allows: Drain gives up when ctx ends.
	cs2 := fake.NewClientset(node, pod("web-1", owned))
	cs2.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return a.GetSubresource() == "eviction", nil, apierrors.NewTooManyRequests("budget", 0)
	})
	tctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := (&Kube{Client: cs2, Poll: time.Millisecond}).Drain(tctx, "n1", true); err == nil || !strings.Contains(err.Error(), "default/web-1") {
		t.Errorf("never allowed: %v", err)
	}
	if err := k.DeleteNode(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if err := k.DeleteNode(ctx, "n1"); err != nil {
		t.Errorf("deleting a gone Node: %v", err)
	}
}

// ctxClient is the fake clientset with PodDisruptionBudgets' List failing
// on an ended context, as a real client's request does (client-go's fake
// ignores the context).
type ctxClient struct{ kubernetes.Interface }

func (c ctxClient) PolicyV1() policyv1client.PolicyV1Interface {
	return ctxPolicy{c.Interface.PolicyV1()}
}

type ctxPolicy struct {
	policyv1client.PolicyV1Interface
}

func (p ctxPolicy) PodDisruptionBudgets(ns string) policyv1client.PodDisruptionBudgetInterface {
	return ctxPDB{p.PolicyV1Interface.PodDisruptionBudgets(ns)}
}

type ctxPDB struct {
	policyv1client.PodDisruptionBudgetInterface
}

func (b ctxPDB) List(ctx context.Context, o metav1.ListOptions) (*policyv1.PodDisruptionBudgetList, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return b.PodDisruptionBudgetInterface.List(ctx, o)
}

// TestKubeDrainWaits: an evicted pod is listed (terminating) until it
// ends; a waiting Drain returns only after that, and a pod list that fails
// meanwhile is an error.
func TestKubeDrainWaits(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	cs := fake.NewClientset(node, pod("web-1", owned))
	var mu sync.Mutex
	evicted, lists, gone := false, 0, false
	listErr := error(nil)
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		mu.Lock()
		defer mu.Unlock()
		evicted = true // accepted; the pod ends later
		return true, nil, nil
	})
	cs.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if !evicted {
			return false, nil, nil
		}
		if listErr != nil {
			return true, nil, listErr
		}
		if lists++; lists == 3 {
			gone = cs.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), "default", "web-1") == nil
		}
		return false, nil, nil
	})
	k := &Kube{Client: cs, Poll: time.Millisecond}
	if err := k.Drain(context.Background(), "n1", true); err != nil || !gone {
		t.Errorf("Drain: %v, pod ended before it returned: %t; want nil, true", err, gone)
	}
	// The list fails while waiting.
	if err := cs.Tracker().Add(pod("web-2", owned)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	evicted, listErr = false, apierrors.NewServiceUnavailable("apiserver restarting")
	mu.Unlock()
	if err := k.Drain(context.Background(), "n1", true); err == nil || !strings.Contains(err.Error(), "listing the pods of Node n1") {
		t.Errorf("a failing pod list while waiting: %v; want its error", err)
	}
}
