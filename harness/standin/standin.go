// Package standin launches light stand-in instances for the emulated ECS
// (harness/ecsapi): a goroutine per instance that does, against a real API
// server, what a drover node's agent and kubelet do that drover rollout
// can see — it registers a Node with the instance's providerID and the
// labels the agent sets (build ID, node-config digest, the node file's
// labels), keeps it Ready by heartbeats and a Lease, and stops when the
// instance is stopped. User-data the agent would refuse gives a console
// with the agent's own verdict and no Node, as a refused node does.
//
// A stand-in costs milliseconds where a QEMU boot costs minutes on a
// machine without KVM, so the rollout scenarios that need many instances
// (resume, repair, refusal) run with stand-ins; one scenario boots real
// images (e2e).
package standin

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"

	"github.com/drover-os/drover/agent/agent"
	"github.com/drover-os/drover/agent/ignition"
	"github.com/drover-os/drover/agent/nodeconfig"
	"github.com/drover-os/drover/harness/ecsapi"
	"github.com/drover-os/drover/nodecontract"
)

// Config is how stand-ins reach the cluster and what they know of images.
type Config struct {
	// Kubeconfig is an admin kubeconfig of the cluster (a stand-in has no
	// TLS bootstrap: it is not a kubelet).
	Kubeconfig string
	// BuildID gives the build ID of the image an image ID names (what the
	// image's os-release says on a real node).
	BuildID func(imageID string) string
	// Heartbeat is the interval of Node status and Lease updates (default
	// 10 s, the kubelet's).
	Heartbeat time.Duration
}

// Launcher starts stand-ins; it implements ecsapi.Launcher.
type Launcher struct {
	cfg  Config
	kube kubernetes.Interface

	mu    sync.Mutex
	all   map[string]*Instance // by instance ID
	holds []*hold
}

type hold struct {
	match func(ecsapi.InstanceSpec) bool
	gate  chan struct{} // closed by the release
}

// Hold keeps the instances launched from now on that match booting: they
// register no Node until the returned release is called, as a node whose
// kubelet has not joined yet. A test uses it to stop drover rollout at a
// known point (waiting for a new Node) rather than racing it; match keeps
// one scenario's hold off the others' instances.
func (l *Launcher) Hold(match func(ecsapi.InstanceSpec) bool) (release func()) {
	h := &hold{match: match, gate: make(chan struct{})}
	l.mu.Lock()
	l.holds = append(l.holds, h)
	l.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			for i, x := range l.holds {
				if x == h {
					l.holds = append(l.holds[:i], l.holds[i+1:]...)
					break
				}
			}
			l.mu.Unlock()
			close(h.gate)
		})
	}
}

// New connects to the cluster.
func New(cfg Config) (*Launcher, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("stand-in kubeconfig %s: %w", cfg.Kubeconfig, err)
	}
	// One client speaks for every stand-in, where each kubelet has its
	// own: client-go's default limit (5 requests a second) would delay
	// the heartbeats of a 50-instance group past the node monitor's grace
	// period. The API server's own flow control still applies.
	rc.QPS = -1
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = 10 * time.Second
	}
	return &Launcher{cfg: cfg, kube: kc, all: map[string]*Instance{}}, nil
}

// Instance is one stand-in.
type Instance struct {
	Spec     ecsapi.InstanceSpec
	NodeName string
	l        *Launcher

	mu      sync.Mutex
	console strings.Builder
	stop    chan struct{}
	frozen  bool
	done    chan struct{}
	gate    chan struct{} // nil, or the Hold it waits for before joining
}

// Instance returns the stand-in of an instance ID (nil: none launched).
func (l *Launcher) Instance(id string) *Instance {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.all[id]
}

// Launch starts a stand-in for spec.
func (l *Launcher) Launch(ctx context.Context, spec ecsapi.InstanceSpec) (ecsapi.Instance, error) {
	name := strings.ToLower(spec.Hostname)
	if name == "" {
		name = strings.ToLower(spec.InstanceID)
	}
	in := &Instance{Spec: spec, NodeName: name, l: l, stop: make(chan struct{}), done: make(chan struct{})}
	l.mu.Lock()
	l.all[spec.InstanceID] = in
	for _, h := range l.holds {
		if h.match(spec) {
			in.gate = h.gate
			break
		}
	}
	l.mu.Unlock()
	in.logf("stand-in %s (image %s) booting", spec.InstanceID, spec.ImageID)
	go in.run()
	return in, nil
}

func (in *Instance) logf(format string, args ...any) {
	in.mu.Lock()
	defer in.mu.Unlock()
	fmt.Fprintf(&in.console, "[%s] "+format+"\n", append([]any{time.Now().UTC().Format(time.TimeOnly)}, args...)...)
}

// Console is what GetInstanceConsoleOutput returns.
func (in *Instance) Console() []byte {
	in.mu.Lock()
	defer in.mu.Unlock()
	return []byte(in.console.String())
}

// Stop ends the heartbeats; the Node stays, NotReady once its lease
// expires, as a powered-off node's does until something deletes it.
func (in *Instance) Stop(ctx context.Context) error {
	in.mu.Lock()
	select {
	case <-in.stop:
	default:
		close(in.stop)
	}
	in.mu.Unlock()
	select {
	case <-in.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	in.logf("stand-in powered off")
	return nil
}

// Freeze stops the heartbeats while the instance stays "running": the
// node hangs, as a node whose kubelet died does.
func (in *Instance) Freeze() {
	in.mu.Lock()
	in.frozen = true
	in.mu.Unlock()
	in.logf("stand-in stopped heartbeating")
}

func (in *Instance) isFrozen() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.frozen
}

// labels are what the agent would have the kubelet register, or the
// refusal the agent would print.
func (in *Instance) labels() (map[string]string, error) {
	ud := in.Spec.UserData
	if ps := ignition.Validate(ud, agent.Options(nil)); len(ps) > 0 {
		msgs := make([]string, len(ps))
		for i, p := range ps {
			msgs[i] = p.String()
		}
		return nil, fmt.Errorf("user-data refused: %s", strings.Join(msgs, "; "))
	}
	cfg, err := ignition.Parse(ud)
	if err != nil {
		return nil, fmt.Errorf("user-data refused: %w", err)
	}
	nf, ok := cfg.File(agent.NodeFile)
	if !ok {
		return nil, fmt.Errorf("user-data refused: no %s", agent.NodeFile)
	}
	c, err := nodeconfig.Parse(nf, agent.NodeFile)
	if err != nil {
		return nil, fmt.Errorf("user-data refused: %w", err)
	}
	d, err := nodecontract.UserDataLabel(ud)
	if err != nil {
		return nil, err
	}
	// The labels the agent renders into the kubelet's --node-labels.
	f := nodeconfig.Facts{InstanceID: in.Spec.InstanceID, RegionID: in.Spec.RegionID, ZoneID: in.Spec.ZoneID,
		InstanceType: in.Spec.InstanceType, ConfigDigest: d}
	if in.l.cfg.BuildID != nil {
		f.BuildID = in.l.cfg.BuildID(in.Spec.ImageID)
	}
	labels, err := nodeconfig.NodeLabels(c, f)
	if err != nil {
		return nil, err
	}
	labels["kubernetes.io/hostname"] = in.NodeName
	labels["drover.dev/stand-in"] = "true"
	return labels, nil
}

func (in *Instance) run() {
	defer close(in.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-in.stop
		cancel()
	}()
	labels, err := in.labels()
	if err != nil {
		// The words a refused drover node leaves on its console.
		in.logf("drover-agent: apply: FAILED: %v", err)
		return
	}
	if in.gate != nil {
		in.logf("stand-in held: no Node until the test releases it")
		select {
		case <-in.gate:
		case <-ctx.Done():
			return
		}
	}
	if err := in.register(ctx, labels); err != nil {
		in.logf("drover-agent: join: FAILED: %v", err)
		return
	}
	in.logf("drover-agent: ready: ok (stand-in Node %s)", in.NodeName)
	t := time.NewTicker(in.l.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if in.isFrozen() {
				continue
			}
			if err := in.heartbeat(ctx); err != nil && ctx.Err() == nil {
				in.logf("heartbeat: %v", err)
			}
		}
	}
}

func (in *Instance) register(ctx context.Context, labels map[string]string) error {
	kc := in.l.kube
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: in.NodeName, Labels: labels},
		Spec:       corev1.NodeSpec{ProviderID: nodeconfig.ProviderID(nodeconfig.Facts{RegionID: in.Spec.RegionID, InstanceID: in.Spec.InstanceID})},
	}
	if _, err := kc.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return in.heartbeat(ctx)
}

// heartbeat posts a Ready status and renews the Lease, as the kubelet does.
func (in *Instance) heartbeat(ctx context.Context) error {
	// The node controllers write the Node too (taints, annotations): a
	// conflict is retried on a fresh copy, as the kubelet's status update is.
	if err := retry.RetryOnConflict(retry.DefaultBackoff, func() error { return in.postReady(ctx) }); err != nil {
		return err
	}
	return in.renewLease(ctx)
}

func (in *Instance) postReady(ctx context.Context) error {
	kc := in.l.kube
	n, err := kc.CoreV1().Nodes().Get(ctx, in.NodeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	now := metav1.Now()
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "stand-in is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now}
	found := false
	for i, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				ready.LastTransitionTime = c.LastTransitionTime
			}
			n.Status.Conditions[i], found = ready, true
		}
	}
	if !found {
		n.Status.Conditions = append(n.Status.Conditions, ready)
	}
	// No capacity: nothing is scheduled on a stand-in, so a drain never
	// waits for a pod only a kubelet could finish terminating.
	n.Status.Capacity = corev1.ResourceList{}
	_, err = kc.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	return err
}

func (in *Instance) renewLease(ctx context.Context) error {
	kc := in.l.kube
	leases := kc.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	secs := int32(40)
	holder := in.NodeName
	mt := metav1.NewMicroTime(time.Now())
	l, err := leases.Get(ctx, in.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: in.NodeName},
			Spec: coordv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, RenewTime: &mt}}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	l.Spec.RenewTime = &mt
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	return err
}
