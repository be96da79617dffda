package smoke

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/drover-os/drover/harness/cluster"
	"github.com/drover-os/drover/harness/registry"
)

// Host probes. Most checks ask the node a question through the probe
// program (harness/registry/programs/probe) with the privileged host pod
// spec (podSpec's host: hostNetwork, hostPID, / at /host, /etc at
// /host-etc). Starting a pod per question costs 14-20 s under TCG
// (sandbox, runc, shim, the kubelet's status); so each boot of an
// instance gets one such pod, which only waits ("serve": until SIGTERM),
// and each question is an exec of the probe in it, through the API
// server's pods/exec to the kubelet (Env's kubelet forward, cluster.Exec).
// The exec'd process is the same program in the same container: the same
// namespaces, mounts and privileges as the fresh pod it replaces; the
// answer is its stdout and its exit status, never something the harness
// wrote.
//
// A check stays a pod of its own where the pod is what it tests (a pull,
// a cached or offline image, the sandbox, the OOM kill, the preStop
// hook), where it needs a spec of its own (cis: its service account;
// pressure: the kubelet's admission and the pod's start time), or where
// the exec path would go through what it breaks (kill-containerd: exec
// runs through containerd).

// probeTimeout bounds the wait for a boot's probe pod to run.
const probeTimeout = 5 * time.Minute

// hostProbe is an instance's host probe pod on one boot.
type hostProbe struct {
	pod    string
	bootID string // the Node's status.nodeInfo.bootID when the pod ran
}

// probePodName is the host probe pod of the boot bootID: each boot has
// its own, so an exec can only reach the pod this boot started.
func probePodName(bootID string) string { return "host-probe-" + bootID }

// probe runs the probe program with args on the node, in the host probe
// pod of the boot the Node reports now (started on first use), and
// returns what it printed. name says which check asked, for errors. As
// with a pod's termination message, a non-zero exit is an error carrying
// the output.
func (e *Env) probe(ctx context.Context, in *Instance, name string, args []string) (string, error) {
	pod, err := e.hostProbePod(ctx, in)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	stdout, _, err := e.Cluster.Exec(ctx, "default", pod, "main", append([]string{"/probe"}, args...))
	return probeAnswer(name, args, stdout, err)
}

// probeAnswer is probe's result of an exec that printed stdout and ended
// with err: the probe's report (one line of JSON, as in its termination
// message) only when the command exited 0.
func probeAnswer(name string, args []string, stdout string, err error) (string, error) {
	msg := strings.TrimRight(stdout, "\n")
	var exit *cluster.ExitError
	switch {
	case errors.As(err, &exit):
		return "", fmt.Errorf("probe %s (%s) exited %d: %s %s", name, strings.Join(args, " "), exit.Code, msg, strings.TrimSpace(exit.Stderr))
	case err != nil:
		return "", fmt.Errorf("probe %s (%s): %w", name, strings.Join(args, " "), err)
	}
	return msg, nil
}

// hostProbePod returns the running host probe pod of the instance's
// current boot, the boot ID its Node reports, starting the pod if this
// boot has none yet; the pod of an earlier boot is deleted.
func (e *Env) hostProbePod(ctx context.Context, in *Instance) (string, error) {
	n, err := e.Cluster.Node(ctx, in.NodeName)
	if err != nil {
		return "", fmt.Errorf("the Node's boot ID, for the host probe pod: %w", err)
	}
	if n.BootID == "" {
		return "", fmt.Errorf("node %s reports no nodeInfo.bootID: no host probe pod can be tied to its boot", in.NodeName)
	}
	if in.probe != nil && in.probe.bootID == n.BootID {
		// Still running, or this boot lost it: an evicted or killed
		// probe pod is a finding, not something to start again.
		p, err := e.Cluster.Pod(ctx, "default", in.probe.pod)
		if err != nil {
			return "", fmt.Errorf("host probe pod %s: %w", in.probe.pod, err)
		}
		if done, err := judgeProbePod(p, in.NodeName); !done || err != nil {
			return "", fmt.Errorf("host probe pod %s of boot %s is no longer running (%s %s %s): %v", p.Name, n.BootID, p.Phase, p.Reason, p.Message, err)
		}
		return in.probe.pod, nil
	}
	if in.probe != nil {
		// Gone with its boot; its object would only clutter the API.
		e.Cluster.DeletePod(ctx, "default", in.probe.pod)
		in.probe = nil
	}
	name := probePodName(n.BootID)
	body, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec":     podSpec(in.NodeName, e.GuestRegistry()+"/"+registry.ProbeImage, []string{"serve"}, true),
	})
	s := time.Now()
	if _, err := e.waitPod(ctx, in, name, body, probeTimeout, func(p *cluster.Pod) (bool, error) {
		return judgeProbePod(p, in.NodeName)
	}); err != nil {
		return "", fmt.Errorf("host probe pod: %w", err)
	}
	e.logf("host probe pod %s running on %s (boot %s) after %s", name, in.NodeName, n.BootID, time.Since(s).Round(time.Second))
	in.probe = &hostProbe{pod: name, bootID: n.BootID}
	return name, nil
}

// judgeProbePod: the host probe pod is ready for execs once Running on
// node; ended or elsewhere, it never will be.
func judgeProbePod(p *cluster.Pod, node string) (bool, error) {
	switch {
	case p.NodeName != "" && p.NodeName != node:
		return true, fmt.Errorf("pod %s is on node %s, not %s", p.Name, p.NodeName, node)
	case p.Phase == "Succeeded" || p.Phase == "Failed":
		return true, fmt.Errorf("pod %s ended (%s %s %s %s)", p.Name, p.Phase, p.Reason, p.Message, p.TerminationMessage)
	}
	return p.Phase == "Running", nil
}
