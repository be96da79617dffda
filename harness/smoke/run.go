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
	"github.com/drover-os/drover/harness/qemu"
	"github.com/drover-os/drover/harness/timeline"
	"github.com/drover-os/drover/nodecontract"
)

// Check is one pass/fail result (a JUnit test case).
type Check struct {
	Name   string        `json:"name"`
	Passed bool          `json:"passed"`
	Detail string        `json:"detail,omitempty"`
	Took   time.Duration `json:"tookNanoseconds"`
}

// Report collects checks and timelines.
type Report struct {
	Checks    []Check                      `json:"checks"`
	Timelines map[string]timeline.Timeline `json:"timelines"`  // per boot
	Logs      map[string]string            `json:"serialLogs"` // boot -> serial log path
}

func (r *Report) add(name string, start time.Time, err error, detail string) bool {
	c := Check{Name: name, Passed: err == nil, Detail: detail, Took: time.Since(start)}
	if err != nil {
		c.Detail = err.Error()
	}
	r.Checks = append(r.Checks, c)
	return err == nil
}

// Failed counts failed checks.
func (r *Report) Failed() int {
	n := 0
	for _, c := range r.Checks {
		if !c.Passed {
			n++
		}
	}
	return n
}

// Instance returns a VM under test and the metadata it was given.
type Instance struct {
	VM       *qemu.VM
	Config   *qemu.Config
	Meta     ecsmeta.Instance
	NodeName string
	// BootID is the boot ID in the Node's status when WaitJoined last
	// found it Ready: after a reboot, a Ready posted from that boot is
	// not this boot's.
	BootID string
	// ReadAtReady is the system disk's counters when the agent said Ready
	// on the console of the boot WaitJoined last waited for (QEMU's count
	// starts again at each boot: Restart starts a new QEMU).
	ReadAtReady qemu.BlockStats
	// probe is the host probe pod of the boot that last ran one
	// (probe.go).
	probe *hostProbe
}

// Boot starts a fresh instance of image with the given user-data and
// metadata faults.
// The emulator's counters start again at zero for the boot.
func (e *Env) Boot(ctx context.Context, image, stateDir string, nvme bool, meta ecsmeta.Instance, faults ecsmeta.Faults) (*Instance, error) {
	return e.bootWith(ctx, image, stateDir, nvme, meta, faults, nil)
}

// bootWith is Boot with data disks (host raw files, see qemu.Config).
func (e *Env) bootWith(ctx context.Context, image, stateDir string, nvme bool, meta ecsmeta.Instance, faults ecsmeta.Faults, dataDisks []string) (*Instance, error) {
	e.Metadata.SetInstance(meta)
	e.Metadata.SetFaults(faults)
	e.Metadata.ResetLog()
	cfg := e.VMConfig(image, stateDir, nvme)
	cfg.DataDisks = dataDisks
	if _, err := PrepareBus(cfg); err != nil {
		return nil, err
	}
	vm, err := qemu.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &Instance{VM: vm, Config: cfg, Meta: meta, NodeName: strings.ToLower(meta.Hostname)}, nil
}

// Restart powers the instance off cleanly and boots the same disk again,
// attached as NVMe or virtio-blk (as after a change of ECS instance type).
func (e *Env) Restart(ctx context.Context, in *Instance, nvme bool) error {
	if err := in.VM.Shutdown(3 * time.Minute); err != nil {
		e.logf("%v", err)
	}
	in.Config.NVMe = nvme
	if _, err := PrepareBus(in.Config); err != nil {
		return err
	}
	vm, err := qemu.Start(ctx, in.Config)
	if err != nil {
		return err
	}
	in.VM = vm
	return nil
}

// WaitJoined waits for the agent to report the node Ready on the console
// of the current boot (a Node object from an earlier boot may still say
// Ready), then for the API server to agree with a status the kubelet
// posted from a boot other than the one the instance last joined from.
func (e *Env) WaitJoined(ctx context.Context, in *Instance) error {
	return e.waitJoined(ctx, in, "FAILED:", "FATAL")
}

// waitJoined is WaitJoined, where the console lines stop mean the join
// failed.
func (e *Env) waitJoined(ctx context.Context, in *Instance, stop ...string) error {
	got, err := in.VM.WaitFor(ctx, append([]string{"] ready: ok"}, stop...)...)
	if err != nil {
		return err
	}
	if got != "] ready: ok" {
		return fmt.Errorf("provisioning failed on the node: %s", lastMatch(in.VM.Log(), got))
	}
	// At once: what the node read until Ready, not what the checks read
	// after it.
	if in.ReadAtReady, err = in.VM.BlockStats(qemu.BootDisk); err != nil {
		return fmt.Errorf("reading the system disk's counters at Ready: %w", err)
	}
	for {
		n, err := e.Cluster.Node(ctx, in.NodeName)
		if err == nil {
			if err = readyFromNewBoot(n, in.BootID); err == nil {
				in.BootID = n.BootID
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s not Ready in the API: %w (%w)", in.NodeName, err, ctx.Err())
		case <-time.After(2 * time.Second):
		}
	}
}

// readyFromNewBoot says why n is not Ready as the kubelet of a boot other
// than prev (the boot ID of the instance's last join, "" before the first)
// posted it.
func readyFromNewBoot(n *cluster.Node, prev string) error {
	switch {
	case n.Conditions["Ready"] == (cluster.Condition{}):
		return errors.New("no Ready condition posted")
	case !n.Ready:
		return fmt.Errorf("Ready is not True: %s: %s", n.ReadyReason, n.ReadyMessage)
	case n.BootID == "":
		return errors.New("Ready, but the status gives no nodeInfo.bootID")
	case n.BootID == prev:
		return fmt.Errorf("Ready, but posted from boot %s, the one before the reboot", prev)
	}
	return nil
}

func lastMatch(log, pat string) string {
	lines := strings.Split(log, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], pat) {
			return strings.TrimSpace(lines[i])
		}
	}
	return ""
}

// CheckNode verifies providerID, the ECS labels and the architecture.
func (e *Env) CheckNode(ctx context.Context, in *Instance) error {
	n, err := e.Cluster.Node(ctx, in.NodeName)
	if err != nil {
		return err
	}
	return JudgeNode(n, in.Meta, in.Config.Arch)
}

// JudgeNode checks a Node's providerID and ECS labels against the
// instance's metadata, and its architecture label against the image's.
func JudgeNode(n *cluster.Node, meta ecsmeta.Instance, arch string) error {
	want := meta.RegionID + "." + meta.InstanceID
	var probs []string
	if n.ProviderID != want {
		probs = append(probs, fmt.Sprintf("providerID %q, want %q", n.ProviderID, want))
	}
	// The kubelet labels kubernetes.io/arch with its own GOARCH: the node
	// runs a kubelet of the image's architecture (arm64 under emulation).
	for k, v := range map[string]string{"topology.kubernetes.io/region": meta.RegionID,
		"topology.kubernetes.io/zone": meta.ZoneID, "node.kubernetes.io/instance-type": meta.InstanceType,
		"kubernetes.io/arch": arch} {
		if v == "" || n.Labels[k] != v {
			probs = append(probs, fmt.Sprintf("label %s=%q, want %q", k, n.Labels[k], v))
		}
	}
	if len(probs) > 0 {
		slices.Sort(probs)
		return fmt.Errorf("node %s: %s", n.Name, strings.Join(probs, "; "))
	}
	return nil
}

// CheckIdentity checks the labels drover rollout compares with a launch
// template: the image's build ID (from its manifest) and the digest of the
// user-data the metadata emulator served, computed here from those bytes.
func (e *Env) CheckIdentity(ctx context.Context, in *Instance, buildID string) (string, error) {
	n, err := e.Cluster.Node(ctx, in.NodeName)
	if err != nil {
		return "", err
	}
	return JudgeIdentity(n, buildID, in.Meta.UserData)
}

// JudgeIdentity is CheckIdentity's verdict on a Node.
func JudgeIdentity(n *cluster.Node, buildID string, userData []byte) (string, error) {
	if buildID == "" {
		return "", errors.New("no build ID to compare with: the image manifest records none")
	}
	d, err := nodecontract.UserDataLabel(userData)
	if err != nil {
		return "", fmt.Errorf("digest of the user-data served: %w", err)
	}
	var probs []string
	for k, v := range map[string]string{nodeconfig.LabelBuildID: buildID, nodeconfig.LabelNodeConfig: d} {
		if n.Labels[k] != v {
			probs = append(probs, fmt.Sprintf("label %s=%q, want %q", k, n.Labels[k], v))
		}
	}
	if len(probs) > 0 {
		slices.Sort(probs)
		return "", fmt.Errorf("node %s: %s", n.Name, strings.Join(probs, "; "))
	}
	return fmt.Sprintf("%s=%s, %s=%s", nodeconfig.LabelBuildID, buildID, nodeconfig.LabelNodeConfig, d), nil
}

// CheckVersions compares the Node's status.nodeInfo, as the API server
// has it, with what the image's build recorded. The detail is the Node's
// own pair and the API server's version, the evidence a version table
// (scripts/smoke-matrix.sh) is built from.
func (e *Env) CheckVersions(ctx context.Context, in *Instance, want Versions) (string, error) {
	if want.Kubelet == "" || want.Containerd == "" {
		return "", fmt.Errorf("no kubelet or containerd version to compare with (kubelet %q, containerd %q): the smoke plan needs the image manifest's", want.Kubelet, want.Containerd)
	}
	n, err := e.Cluster.Node(ctx, in.NodeName)
	if err != nil {
		return "", err
	}
	server, err := e.Cluster.ServerVersion(ctx)
	if err != nil {
		return "", err
	}
	return JudgeVersions(n, server, want)
}

// JudgeVersions compares a Node's status.nodeInfo with what the image's
// build recorded; the detail is the Node's pair and the API server's
// version.
func JudgeVersions(n *cluster.Node, server string, want Versions) (string, error) {
	got := fmt.Sprintf("kubeletVersion=%s containerRuntimeVersion=%s apiServer=%s", n.KubeletVersion, n.ContainerRuntimeVersion, server)
	if want.Kubelet == "" || want.Containerd == "" {
		return got, fmt.Errorf("no kubelet or containerd version to compare with (kubelet %q, containerd %q): the smoke plan needs the image manifest's", want.Kubelet, want.Containerd)
	}
	var probs []string
	if n.KubeletVersion != want.Kubelet {
		probs = append(probs, fmt.Sprintf("kubeletVersion %q, but the image's manifest records kubelet %s", n.KubeletVersion, want.Kubelet))
	}
	if rv := want.RuntimeVersion(); n.ContainerRuntimeVersion != rv {
		probs = append(probs, fmt.Sprintf("containerRuntimeVersion %q, but the image's manifest records containerd %s (%s)", n.ContainerRuntimeVersion, want.Containerd, rv))
	}
	if len(probs) > 0 {
		return got, fmt.Errorf("node %s: %s", n.Name, strings.Join(probs, "; "))
	}
	return got, nil
}

// RunPod runs a pod pinned to the node to completion and returns its
// termination message.
func (e *Env) RunPod(ctx context.Context, in *Instance, name, image string, args []string, host bool) (string, error) {
	return e.runPodSpec(ctx, in, name, podSpec(in.NodeName, e.GuestRegistry()+"/"+image, args, host))
}

// runPodSpec runs a pod of spec in the default namespace as RunPod does.
func (e *Env) runPodSpec(ctx context.Context, in *Instance, name string, spec map[string]any) (string, error) {
	pod := map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec":     spec,
	}
	body, _ := json.Marshal(pod)
	if err := e.Cluster.CreatePod(ctx, "default", body); err != nil {
		return "", err
	}
	for {
		p, err := e.Cluster.Pod(ctx, "default", name)
		if err == nil && p != nil {
			if done, msg, err := JudgePod(p, in.NodeName); done {
				return msg, err
			}
		}
		select {
		case <-ctx.Done():
			phase := "unknown"
			if p != nil {
				phase = p.Phase + " " + p.Reason + " " + p.Message
			}
			return "", fmt.Errorf("pod %s did not complete (%s): %w", name, phase, ctx.Err())
		case <-time.After(2 * time.Second):
		}
	}
}

// JudgePod says whether a pod pinned to node has finished and how: done
// with its termination message once it Succeeded on that node; done with
// an error once it Failed, or ran anywhere else.
func JudgePod(p *cluster.Pod, node string) (done bool, msg string, err error) {
	if p.NodeName != "" && p.NodeName != node {
		return true, "", fmt.Errorf("pod %s ran on node %s, not %s", p.Name, p.NodeName, node)
	}
	switch p.Phase {
	case "Succeeded":
		return true, p.TerminationMessage, nil
	case "Failed":
		return true, "", fmt.Errorf("pod %s failed: %s %s %s", p.Name, p.Reason, p.Message, p.TerminationMessage)
	}
	return false, "", nil
}

func podSpec(node, image string, args []string, host bool) map[string]any {
	c := map[string]any{"name": "main", "image": image, "args": args, "terminationMessagePolicy": "File"}
	spec := map[string]any{"nodeName": node, "restartPolicy": "Never", "containers": []any{c},
		"tolerations": []any{map[string]any{"operator": "Exists"}}}
	if host {
		spec["hostNetwork"], spec["hostPID"] = true, true
		c["securityContext"] = map[string]any{"privileged": true}
		c["volumeMounts"] = []any{
			map[string]any{"name": "host", "mountPath": "/host", "readOnly": true},
			map[string]any{"name": "host-etc", "mountPath": "/host-etc"},
		}
		spec["volumes"] = []any{
			map[string]any{"name": "host", "hostPath": map[string]any{"path": "/"}},
			map[string]any{"name": "host-etc", "hostPath": map[string]any{"path": "/etc"}},
		}
	}
	return spec
}
