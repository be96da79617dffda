package smoke

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/drover-os/drover/agent/nodeconfig"
	"github.com/drover-os/drover/harness/cluster"
	"github.com/drover-os/drover/harness/ecsmeta"
	"github.com/drover-os/drover/harness/registry"
	"k8s.io/apimachinery/pkg/api/resource"
)

// gracefulPod is the pod the graceful-shutdown check stops by powering
// the node off.
const gracefulPod = "graceful-stop"

// The kubelet's graceful node shutdown marks each pod it stopped with a
// DisruptionTarget condition, reason TerminationByKubelet and this message
// (pkg/kubelet/nodeshutdown). The phase is then what the containers'
// exits make it: Succeeded for a restartPolicy Never pod whose container
// stopped cleanly on SIGTERM (seen with kubelet v1.37.2), Failed with
// reason Terminated otherwise.
const (
	shutdownReason          = "Terminated"
	shutdownMessage         = "Pod was terminated in response to imminent node shutdown."
	disruptionByKubelet     = "TerminationByKubelet"
	disruptionTargetCondKey = "DisruptionTarget"
)

// checkGracefulStop starts a pod with a preStop hook and a 30 s grace
// period, then presses the node's ACPI power button (QMP system_powerdown,
// what ECS StopInstance delivers) and waits for the VM to power off. The
// hook's side effect is a request to the metadata emulator with a mark of
// its own; the pod's fate is what the API server holds once the VM is
// gone, when nothing on the node can post any more.
func (e *Env) checkGracefulStop(ctx context.Context, r *Report, in *Instance) {
	e.gracefulStop(ctx, r, in, false)
}

// checkSpotStop is checkGracefulStop with a spot reclaim notice in the
// metadata emulator instead of the power button: the node must cordon
// itself (and the node lifecycle controller taint it), record a
// SpotInterruption Event, and power itself off, its pods stopped
// gracefully, before the notice's time. The notice is withdrawn once the
// VM is off, so the next boot is not reclaimed again.
func (e *Env) checkSpotStop(ctx context.Context, r *Report, in *Instance) {
	e.gracefulStop(ctx, r, in, true)
}

// spotNotice is how far ahead the emulator announces the reclaim: the
// few minutes ECS gives.
const spotNotice = 4 * time.Minute

func (e *Env) gracefulStop(ctx context.Context, r *Report, in *Instance, spot bool) {
	s := time.Now()
	mark := fmt.Sprintf("prestop-%d", s.UnixNano())
	hook := "http://" + strings.TrimSuffix(MetadataAddr, ":80") + "/latest/meta-data/drover-smoke/" + mark
	pod := map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": gracefulPod, "namespace": "default"},
		"spec": map[string]any{
			"nodeName": in.NodeName, "restartPolicy": "Never", "hostNetwork": true,
			"terminationGracePeriodSeconds": 30,
			"tolerations":                   []any{map[string]any{"operator": "Exists"}},
			"containers": []any{map[string]any{
				"name": "main", "image": e.GuestRegistry() + "/" + registry.ProbeImage, "args": []string{"serve"},
				"terminationMessagePolicy": "File",
				"lifecycle": map[string]any{"preStop": map[string]any{"exec": map[string]any{
					"command": []string{"/probe", "prestop", hook}}}},
			}},
		},
	}
	body, _ := json.Marshal(pod)
	name := "graceful node shutdown: preStop hook ran, pod stopped by the kubelet before power-off (system_powerdown)"
	if spot {
		name = "spot reclaim notice: Node cordoned and tainted, SpotInterruption Event, preStop hook ran and pod stopped by the kubelet before power-off, all before the notice's time"
	}
	if err := e.Cluster.CreatePod(ctx, "default", body); err != nil {
		r.add(name, s, err, "")
		return
	}
	if err := e.waitPodRunning(ctx, gracefulPod); err != nil {
		r.add(name, s, err, "")
		return
	}
	// What logind holds before the button: without the kubelet's delay
	// lock on shutdown, logind powers off at once and nothing stops the
	// pod; the lock and the kubelet's own lines name the cause.
	inhib, err := e.inhibitors(ctx, in)
	if err == nil {
		err = JudgeShutdownInhibitor(inhib.Inhibitors)
	}
	if err != nil {
		detail := ""
		if inhib != nil {
			detail = "systemd-inhibit --list: " + strings.TrimSpace(inhib.Inhibitors) + "; kubelet: " + strings.TrimSpace(inhib.Kubelet)
		}
		r.add(name, s, err, detail)
		return
	}
	pressed := time.Now()
	var notice time.Time
	if spot {
		inst := e.Metadata.Instance()
		notice = pressed.Add(spotNotice).UTC().Truncate(time.Second)
		inst.SpotTerminationTime = notice.Format(time.RFC3339)
		e.Metadata.SetInstance(inst)
		err = in.VM.WaitExit(spotNotice)
		inst.SpotTerminationTime = ""
		e.Metadata.SetInstance(inst)
	} else {
		err = in.VM.Shutdown(3 * time.Minute)
	}
	if err != nil {
		r.add(name, s, err, "")
		return
	}
	off := time.Now()
	p, err := e.Cluster.Pod(ctx, "default", gracefulPod)
	if err != nil {
		r.add(name, s, err, "")
		return
	}
	trigger := "the power button"
	if spot {
		trigger = "the notice"
	}
	detail, err := JudgeGracefulStop(p, e.Metadata.Requests(), mark, trigger, pressed, off)
	if spot {
		var n *cluster.Node
		var evs []cluster.Event
		n, nerr := e.Cluster.Node(ctx, in.NodeName)
		if nerr == nil {
			evs, nerr = e.Cluster.Events(ctx, "default", "Node", in.NodeName)
		}
		var sd string
		if nerr == nil {
			sd, nerr = JudgeSpotStop(n, evs, notice, off)
		}
		detail += "; " + sd
		if nerr != nil {
			err = errors.Join(err, nerr)
		}
	}
	r.add(name, s, err, detail)
}

// spotTaint is what the node lifecycle controller taints a cordoned Node
// with (TaintNodesByCondition).
const spotTaint = "node.kubernetes.io/unschedulable:NoSchedule"

// JudgeSpotStop: the Node is cordoned (spec.unschedulable) and carries
// the controller's unschedulable taint, the agent's SpotInterruption
// Event names the notice's time, and the VM was off before that time.
func JudgeSpotStop(n *cluster.Node, evs []cluster.Event, notice, off time.Time) (string, error) {
	var probs []string
	if !n.Unschedulable {
		probs = append(probs, "the Node is not cordoned (spec.unschedulable false)")
	}
	if !slices.Contains(n.Taints, spotTaint) {
		probs = append(probs, fmt.Sprintf("the Node's taints %v lack %s", n.Taints, spotTaint))
	}
	var ev *cluster.Event
	for i := range evs {
		if evs[i].Reason == "SpotInterruption" && evs[i].Source == "drover-agent" {
			ev = &evs[i]
		}
	}
	switch {
	case ev == nil:
		probs = append(probs, "no SpotInterruption Event from drover-agent on the Node")
	case !strings.Contains(ev.Message, notice.Format(time.RFC3339)):
		probs = append(probs, fmt.Sprintf("the SpotInterruption Event %q does not name the notice's time %s", ev.Message, notice.Format(time.RFC3339)))
	}
	if !off.Before(notice) {
		probs = append(probs, fmt.Sprintf("the VM powered off at %s, not before the notice's time %s", off.UTC().Format(time.RFC3339), notice.Format(time.RFC3339)))
	}
	detail := fmt.Sprintf("off %s before the notice's time; unschedulable %v, taints %v", notice.Sub(off).Round(time.Second), n.Unschedulable, n.Taints)
	if ev != nil {
		detail += "; Event SpotInterruption: " + ev.Message
	}
	if len(probs) > 0 {
		return detail, errors.New(strings.Join(probs, "; "))
	}
	return detail, nil
}

// waitPodRunning waits until the pod's container runs.
func (e *Env) waitPodRunning(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for {
		p, err := e.Cluster.Pod(ctx, "default", name)
		if err == nil && p.Phase == "Running" {
			return nil
		}
		if err == nil && (p.Phase == "Failed" || p.Phase == "Succeeded") {
			return fmt.Errorf("pod %s ended (%s %s %s) before the node was powered off", name, p.Phase, p.Reason, p.Message)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pod %s not Running: %w", name, ctx.Err())
		case <-time.After(2 * time.Second):
		}
	}
}

// JudgeGracefulStop is the graceful-shutdown verdict: the preStop hook's
// request (its path ends in mark) reached the metadata emulator between
// the power button and power-off, and the API server holds the pod as the
// kubelet's shutdown manager leaves it, its container stopped by SIGTERM
// (its termination message), not killed.
func JudgeGracefulStop(p *cluster.Pod, reqs []ecsmeta.Request, mark, trigger string, pressed, off time.Time) (string, error) {
	var probs []string
	var hookAt time.Time
	for _, q := range reqs {
		if strings.HasSuffix(q.Path, "/"+mark) {
			hookAt = q.Time
			break
		}
	}
	switch {
	case hookAt.IsZero():
		probs = append(probs, "the preStop hook's request never reached the metadata emulator")
	case hookAt.Before(pressed) || hookAt.After(off):
		probs = append(probs, fmt.Sprintf("the preStop hook's request came at %s, not between %s (%s) and power-off (%s)",
			hookAt.Format(time.StampMilli), trigger, pressed.Format(time.StampMilli), off.Format(time.StampMilli)))
	}
	switch {
	case p.Phase == "Succeeded":
	case p.Phase == "Failed" && p.Reason == shutdownReason && p.Message == shutdownMessage:
	default:
		probs = append(probs, fmt.Sprintf("pod status %s/%s %q, want it ended: Succeeded, or Failed/%s %q (the kubelet's node shutdown)", p.Phase, p.Reason, p.Message, shutdownReason, shutdownMessage))
	}
	if c := p.Conditions[disruptionTargetCondKey]; c.Status != "True" || c.Reason != disruptionByKubelet || c.Message != shutdownMessage {
		probs = append(probs, fmt.Sprintf("condition DisruptionTarget %s/%s %q, want True/%s %q", c.Status, c.Reason, c.Message, disruptionByKubelet, shutdownMessage))
	}
	if p.TerminationMessage != "stopped by SIGTERM" {
		probs = append(probs, fmt.Sprintf("container's termination message %q, want \"stopped by SIGTERM\" (killed before it could stop?)", p.TerminationMessage))
	}
	detail := fmt.Sprintf("hook request %s after %s; power-off %s after it; pod %s/%s, DisruptionTarget %s",
		hookAt.Sub(pressed).Round(100*time.Millisecond), trigger, off.Sub(pressed).Round(time.Second), p.Phase, p.Reason, p.Conditions[disruptionTargetCondKey].Reason)
	if len(probs) > 0 {
		return detail, fmt.Errorf("%s", strings.Join(probs, "; "))
	}
	return detail, nil
}

// checkAllocatable checks the Node's allocatable against its capacity and
// the reservations drover computes for that size (nodeconfig.Reserve, whose
// tests pin it to GKE's published table).
func (e *Env) checkAllocatable(ctx context.Context, r *Report, in *Instance, when string) {
	s := time.Now()
	n, err := e.Cluster.Node(ctx, in.NodeName)
	var detail string
	if err == nil {
		detail, err = JudgeAllocatable(n)
	}
	r.add(fmt.Sprintf("allocatable is capacity less the reservations for the VM's size (%s, %d MiB)", when, in.Config.MemoryMiB), s, err, detail)
}

// JudgeAllocatable compares a Node's status.allocatable with its capacity
// less the reservations for that capacity: CPU and memory exactly, and
// both strictly below capacity.
func JudgeAllocatable(n *cluster.Node) (string, error) {
	q := func(m map[string]string, k string) (resource.Quantity, error) {
		v, ok := m[k]
		if !ok {
			return resource.Quantity{}, fmt.Errorf("node %s reports no %s", n.Name, k)
		}
		return resource.ParseQuantity(v)
	}
	capCPU, err1 := q(n.Capacity, "cpu")
	capMem, err2 := q(n.Capacity, "memory")
	allocCPU, err3 := q(n.Allocatable, "cpu")
	allocMem, err4 := q(n.Allocatable, "memory")
	for _, err := range []error{err1, err2, err3, err4} {
		if err != nil {
			return "", err
		}
	}
	cpus, mem := int(capCPU.Value()), uint64(capMem.Value())
	detail := fmt.Sprintf("capacity cpu %s memory %s; allocatable cpu %s memory %s", capCPU.String(), capMem.String(), allocCPU.String(), allocMem.String())
	res, ok := nodeconfig.Reserve(cpus, mem)
	if !ok {
		return detail, fmt.Errorf("node %s: capacity cpu %s memory %s is no size to reserve for", n.Name, capCPU.String(), capMem.String())
	}
	wantCPU, wantMem, err := res.Allocatable(cpus, mem)
	if err != nil {
		return detail, err
	}
	detail += fmt.Sprintf("; want cpu %dm memory %dKi (kube %s/%s, system %s/%s, eviction %s)", wantCPU, wantMem>>10,
		res.KubeReserved["cpu"], res.KubeReserved["memory"], res.SystemReserved["cpu"], res.SystemReserved["memory"], res.EvictionHard["memory.available"])
	var probs []string
	if allocCPU.MilliValue() != wantCPU {
		probs = append(probs, fmt.Sprintf("allocatable cpu %s, want %dm", allocCPU.String(), wantCPU))
	}
	if allocMem.Value() != wantMem {
		probs = append(probs, fmt.Sprintf("allocatable memory %s (%d bytes), want %d bytes", allocMem.String(), allocMem.Value(), wantMem))
	}
	if allocCPU.Cmp(capCPU) >= 0 || allocMem.Cmp(capMem) >= 0 {
		probs = append(probs, "allocatable is not below capacity: nothing is reserved")
	}
	if len(probs) > 0 {
		return detail, fmt.Errorf("node %s: %s", n.Name, strings.Join(probs, "; "))
	}
	return detail, nil
}

// Inhibitors is the probe's "inhibitors" report: systemd-inhibit --list as
// the node's logind answers it, and the kubelet's journal lines about
// shutdown and inhibitors this boot.
type Inhibitors struct {
	Inhibitors string `json:"inhibitors"`
	Kubelet    string `json:"kubelet"`
	Error      string `json:"error"`
}

func (e *Env) inhibitors(ctx context.Context, in *Instance) (*Inhibitors, error) {
	msg, err := e.probe(ctx, in, "inhibitors", []string{"inhibitors"})
	if err != nil {
		return nil, err
	}
	var i Inhibitors
	if err := json.Unmarshal([]byte(msg), &i); err != nil {
		return nil, fmt.Errorf("probe inhibitors report %q: %w", msg, err)
	}
	if i.Error != "" {
		return &i, fmt.Errorf("probe could not list logind's inhibitors: %s", i.Error)
	}
	return &i, nil
}

// JudgeShutdownInhibitor wants, in systemd-inhibit --list, the kubelet's
// lock on shutdown in delay mode: what makes logind wait for the
// kubelet's graceful node shutdown instead of powering off at once.
func JudgeShutdownInhibitor(list string) error {
	for _, line := range strings.Split(list, "\n") {
		f := strings.Fields(line)
		if slices.Contains(f, "kubelet") && slices.Contains(f, "delay") && strings.Contains(line, "shutdown") {
			return nil
		}
	}
	return fmt.Errorf("logind holds no delay lock of the kubelet on shutdown, so a power-off would not wait for its graceful node shutdown")
}
