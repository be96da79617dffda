package smoke

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/drover-os/drover/harness/cluster"
	"github.com/drover-os/drover/harness/registry"
)

// The pod the OOM check runs: a 64 MiB limit, 256 MiB asked for.
const (
	oomPod       = "oom-kill"
	oomLimit     = "64Mi"
	oomAllocMiB  = "256"
	healthWindow = 3 * time.Minute // for the agent's report to reach the API server
)

// checkKernelHealth makes the kernel report two problems on the node and
// looks for them where a pool's auto-repair would: the Node's Events and
// conditions in the API server. First a container past its memory limit
// (a cgroup OOM kill): an OOMKilling Event with the kernel's line, the
// pod OOMKilled, the node still Ready. Then a real ext4 error on a scratch
// loop file system mounted errors=remount-ro: a FilesystemError Event and
// the ReadonlyFilesystem condition, each with the kernel's line.
func (e *Env) checkKernelHealth(ctx context.Context, r *Report, in *Instance) {
	s := time.Now()
	name := "kernel OOM kill reported: OOMKilling Event with the kernel's line, pod OOMKilled, node Ready"
	pod := map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": oomPod, "namespace": "default"},
		"spec": map[string]any{
			"nodeName": in.NodeName, "restartPolicy": "Never",
			"tolerations": []any{map[string]any{"operator": "Exists"}},
			"containers": []any{map[string]any{
				"name": "main", "image": e.GuestRegistry() + "/" + registry.ProbeImage, "args": []string{"alloc", oomAllocMiB},
				"resources": map[string]any{"limits": map[string]any{"memory": oomLimit}, "requests": map[string]any{"memory": oomLimit}},
			}},
		},
	}
	body, _ := json.Marshal(pod)
	detail, err := e.waitFinding(ctx, in, body, oomPod, func(p *cluster.Pod, n *cluster.Node, evs []cluster.Event) (string, error) {
		return JudgeOOMReport(p, n, evs)
	})
	r.add(name, s, err, detail)

	s = time.Now()
	name = "filesystem error reported: FilesystemError Event and ReadonlyFilesystem=True with the kernel's lines"
	msg, err := e.probe(ctx, in, "fs-error", []string{"fserror"})
	if err != nil {
		r.add(name, s, err, msg)
		return
	}
	detail, err = e.waitFinding(ctx, in, nil, "", func(_ *cluster.Pod, n *cluster.Node, evs []cluster.Event) (string, error) {
		return JudgeFSErrorReport(msg, n, evs)
	})
	r.add(name, s, err, detail)
}

// waitFinding creates the pod (if body is not nil) and judges the pod, the
// Node and the Node's Events until the verdict passes or healthWindow ends.
func (e *Env) waitFinding(ctx context.Context, in *Instance, body []byte, pod string,
	judge func(*cluster.Pod, *cluster.Node, []cluster.Event) (string, error)) (string, error) {
	if body != nil {
		if err := e.Cluster.CreatePod(ctx, "default", body); err != nil {
			return "", err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, healthWindow)
	defer cancel()
	for {
		var p *cluster.Pod
		var err error
		if pod != "" {
			p, err = e.Cluster.Pod(ctx, "default", pod)
		}
		var n *cluster.Node
		if err == nil {
			n, err = e.Cluster.Node(ctx, in.NodeName)
		}
		var evs []cluster.Event
		if err == nil {
			evs, err = e.Cluster.Events(ctx, "default", "Node", in.NodeName)
		}
		detail := ""
		if err == nil {
			if detail, err = judge(p, n, evs); err == nil {
				return detail, nil
			}
		}
		select {
		case <-ctx.Done():
			return detail, fmt.Errorf("%w (after %s)", err, healthWindow)
		case <-time.After(3 * time.Second):
		}
	}
}

// oomLine is the kernel's line for a cgroup OOM kill of the probe
// (mm/oom_kill.c).
var oomLine = regexp.MustCompile(`Memory cgroup out of memory: Killed process \d+ \(probe\)`)

// JudgeOOMReport: the agent posted an OOMKilling Event about the Node
// carrying the kernel's line for the probe, the pod's container ended
// OOMKilled (the kubelet's view of the same kill), and the Node is Ready.
func JudgeOOMReport(p *cluster.Pod, n *cluster.Node, evs []cluster.Event) (string, error) {
	var probs []string
	ev := findEvent(evs, "OOMKilling", oomLine)
	if ev == nil {
		probs = append(probs, "no OOMKilling Event from drover-agent with the kernel's \"Memory cgroup out of memory: Killed process N (probe)\" line")
	}
	// The runtime says OOMKilled when the kill was in the container's own
	// cgroup; when the pod's cgroup (the same 64 MiB, plus the sandbox)
	// hit its limit first, containerd 2.4 reports Error, exit code 137
	// (SIGKILL): seen on the node with the kernel's memcg line for the
	// probe. Either way the container was killed, not ended.
	killed := p != nil && p.Phase == "Failed" && len(p.TerminatedReasons) == 1 && len(p.ExitCodes) == 1 &&
		(p.TerminatedReasons[0] == "OOMKilled" || p.TerminatedReasons[0] == "Error" && p.ExitCodes[0] == 137)
	if !killed {
		got := "no pod"
		if p != nil {
			got = fmt.Sprintf("%s %v exit %v", p.Phase, p.TerminatedReasons, p.ExitCodes)
		}
		probs = append(probs, fmt.Sprintf("pod %s is %s, want Failed [OOMKilled], or [Error] exit 137 (SIGKILL)", oomPod, got))
	}
	if !n.Ready {
		probs = append(probs, fmt.Sprintf("node %s not Ready (%s: %s)", n.Name, n.ReadyReason, n.ReadyMessage))
	}
	detail := ""
	if ev != nil {
		detail = ev.Reason + ": " + ev.Message
	}
	if p != nil {
		detail += fmt.Sprintf("; pod %s %v exit %v", p.Phase, p.TerminatedReasons, p.ExitCodes)
	}
	if len(probs) > 0 {
		return detail, fmt.Errorf("%s", strings.Join(probs, "; "))
	}
	return detail, nil
}

var (
	fsErrorLine = regexp.MustCompile(`EXT4-fs error \(device (loop\d+)\): trigger_test_error:\d+: comm \S+: drover smoke`)
	fsRemountRO = regexp.MustCompile(`^EXT4-fs \((loop\d+)\): Remounting filesystem read-only`)
)

// JudgeFSErrorReport: the probe's scratch file system went from rw to ro,
// the agent posted a FilesystemError Event with the kernel's error line
// for that loop device, and the Node's ReadonlyFilesystem condition is
// True with the kernel's remount line for it.
func JudgeFSErrorReport(probeMsg string, n *cluster.Node, evs []cluster.Event) (string, error) {
	var pr struct {
		Device, Before, After, Superblock, Error string
	}
	if err := json.Unmarshal([]byte(probeMsg), &pr); err != nil {
		return "", fmt.Errorf("probe report %q: %w", probeMsg, err)
	}
	dev := strings.TrimPrefix(pr.Device, "/dev/")
	var probs []string
	// The effect: a write worked before the error and fails after it.
	if pr.Error != "" || dev == "" || pr.Before != "yes" || pr.After != "no" {
		probs = append(probs, fmt.Sprintf("the scratch file system did not go read-only (device %q, writable %q then %q, superblock %q, %s)", pr.Device, pr.Before, pr.After, pr.Superblock, pr.Error))
	}
	ev := findEvent(evs, "FilesystemError", fsErrorLine)
	if ev == nil {
		probs = append(probs, "no FilesystemError Event from drover-agent with the kernel's \"EXT4-fs error (device loopN): trigger_test_error\" line")
	} else if m := fsErrorLine.FindStringSubmatch(ev.Message); m[1] != dev {
		probs = append(probs, fmt.Sprintf("the FilesystemError Event names %s, the probe's device is %s", m[1], dev))
	}
	c := n.Conditions["ReadonlyFilesystem"]
	m := fsRemountRO.FindStringSubmatch(c.Message)
	switch {
	case c.Status != "True" || c.Reason != "FilesystemIsReadOnly" || m == nil:
		probs = append(probs, fmt.Sprintf("condition ReadonlyFilesystem %s/%s %q, want True/FilesystemIsReadOnly with the kernel's remount line", c.Status, c.Reason, c.Message))
	case m[1] != dev:
		probs = append(probs, fmt.Sprintf("ReadonlyFilesystem names %s, the probe's device is %s", m[1], dev))
	}
	detail := fmt.Sprintf("%s writable %s → %s (superblock %s); ReadonlyFilesystem %s: %s", pr.Device, pr.Before, pr.After, pr.Superblock, c.Status, c.Message)
	if len(probs) > 0 {
		return detail, fmt.Errorf("%s", strings.Join(probs, "; "))
	}
	return detail, nil
}

// JudgeFSConditionCleared: after a reboot the agent says again that no
// file system is read-only (the scratch one is gone with the boot).
func JudgeFSConditionCleared(n *cluster.Node) error {
	if c := n.Conditions["ReadonlyFilesystem"]; c.Status != "False" || c.Reason != "FilesystemIsNotReadOnly" {
		return fmt.Errorf("condition ReadonlyFilesystem %s/%s %q after the reboot, want False/FilesystemIsNotReadOnly", c.Status, c.Reason, c.Message)
	}
	return nil
}

// findEvent is the drover-agent Warning Event with reason whose message
// matches line.
func findEvent(evs []cluster.Event, reason string, line *regexp.Regexp) *cluster.Event {
	for i, ev := range evs {
		if ev.Source == "drover-agent" && ev.Type == "Warning" && ev.Reason == reason && line.MatchString(ev.Message) {
			return &evs[i]
		}
	}
	return nil
}
