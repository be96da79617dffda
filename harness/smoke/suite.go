package smoke

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/drover-os/drover/agent/agent"
	"github.com/drover-os/drover/agent/status"
	"github.com/drover-os/drover/harness/cluster"
	"github.com/drover-os/drover/harness/qemu"
	"github.com/drover-os/drover/harness/registry"
	"github.com/drover-os/drover/harness/timeline"
	"github.com/drover-os/drover/internal/bytesize"
)

// Plan says which scenarios a smoke run covers.
type Plan struct {
	Image    string
	UserData []byte         // nil: rendered for the local cluster
	Metadata MetadataFaults // during the first boot; each one set must happen
	NVMe     bool           // attach the disk as NVMe (else virtio-blk)
	// Reboot: reboot with the disk moved to the other controller (NVMe ↔
	// virtio-blk, as after a change of instance type); Ready again without
	// re-provisioning, /etc edit gone, changed user-data refused.
	Reboot bool
	// PolicyCheck: a policy-breaking user-data, a kubelet override made
	// at run time (the effect check) and a double-gzipped user-data must
	// not join, and the last two leave no bootstrap token in /var.
	PolicyCheck bool
	JoinTimeout time.Duration
	// Conformance: run conformance.Subset of Kubernetes' e2e suite on the
	// first boot (the environment started with Options.Conformance).
	Conformance *Suite
	// Want is what the image's build recorded of its kubelet and
	// containerd (its manifest); the Node must report the same.
	Want Versions
}

// Versions are a node image's kubelet and containerd module versions, as
// its manifest records them (v1.37.2, v2.4.2).
type Versions struct {
	Kubelet, Containerd string
	// Sandbox and SandboxDigest are the pod sandbox image the image ships
	// and its index digest.
	Sandbox, SandboxDigest string
	// BuildID is the image's build ID, which the Node's
	// drover.dev/build-id label must carry.
	BuildID string
	// Cached are the recipe's cached workload images (none: no image
	// cache check); CacheDisk is the cache disk image's file, "" when
	// none ships on one. The main instance's boots attach it as its last
	// data disk.
	Cached    []CachedImage
	CacheDisk string
}

// RuntimeVersion is the containerRuntimeVersion a Node running containerd
// at v.Containerd reports: containerd's CRI names itself and its version
// without the module version's v.
func (v Versions) RuntimeVersion() string {
	return "containerd://" + strings.TrimPrefix(v.Containerd, "v")
}

// Run runs the plan and returns the report; the VMs are stopped at the end.
func (e *Env) Run(ctx context.Context, p Plan) *Report {
	r := &Report{Timelines: map[string]timeline.Timeline{}, Logs: map[string]string{}}
	if p.JoinTimeout == 0 {
		p.JoinTimeout = 25 * time.Minute
	}
	e.cacheHosts = cachedHosts(p.Want.Cached)
	ud := p.UserData
	if ud == nil {
		var err error
		if ud, err = e.UserData(); err == nil {
			// A launch template's own units: the checks below look for
			// what they wrote on each boot.
			ud, err = WithSmokeUnits(ud)
		}
		if err != nil {
			r.add("render user-data", time.Now(), err, "")
			return r
		}
	}
	units := HasSmokeUnits(ud)
	meta := ECSInstance()
	meta.UserData = ud
	start := time.Now()
	// Two data disks: an empty one for container storage, and one holding
	// ext4 that the node must leave alone (storage.go).
	disks, err := prepareDataDisks(ctx, filepath.Join(e.opts.WorkDir, "vm-join-data"))
	if err == nil && p.Want.CacheDisk != "" {
		disks.Cache, err = copyCacheDisk(p.Want.CacheDisk, filepath.Join(e.opts.WorkDir, "vm-join-data"))
	}
	var in *Instance
	if err == nil {
		in, err = e.bootWith(ctx, p.Image, filepath.Join(e.opts.WorkDir, "vm-join"), p.NVMe, meta, p.Metadata.emulator(), disks.order(false))
	}
	if !r.add("boot", start, err, "") {
		return r
	}
	defer in.VM.Stop()
	r.Logs["first boot"] = in.Config.SerialLog()
	jctx, cancel := context.WithTimeout(ctx, p.JoinTimeout)
	err = e.WaitJoined(jctx, in)
	cancel()
	r.Timelines["first boot"] = timeline.Parse(in.VM.Log())
	stats := e.Metadata.Stats()
	if !r.add("node joins and is Ready", start, err, joinDetail(p.Metadata.String(), in.ReadAtReady)) {
		return r
	}
	if p.Metadata.Configured() {
		detail, err := p.Metadata.Check(stats)
		r.add("metadata faults injected and survived", start, err, detail)
	}
	step := func(name string, fn func(ctx context.Context) (string, error)) bool {
		s := time.Now()
		sctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		d, err := fn(sctx)
		return r.add(name, s, err, d)
	}
	step("providerID and ECS labels", func(ctx context.Context) (string, error) {
		return meta.RegionID + "." + meta.InstanceID + ", kubernetes.io/arch=" + in.Config.Arch, e.CheckNode(ctx, in)
	})
	step("Node reports the image's kubelet and containerd", func(ctx context.Context) (string, error) {
		return e.CheckVersions(ctx, in, p.Want)
	})
	step("Node labelled with the image's build ID and the user-data's config digest", func(ctx context.Context) (string, error) {
		return e.CheckIdentity(ctx, in, p.Want.BuildID)
	})
	e.checkAllocatable(ctx, r, in, "first boot")
	step("pod from the local registry runs to completion", func(ctx context.Context) (string, error) {
		_, err := e.RunPod(ctx, in, "hello", registry.HelloImage, nil, false)
		return registry.HelloImage, err
	})
	// Before the e2e suite, whose own pause image (k8s/pause, a
	// workload's, not the sandbox) it pulls from the registry: the
	// sandbox check wants no pause image asked of it until then.
	e.checkSandboxImage(ctx, r, in, p.Want)
	// Before the memory pressure (whose taint keeps the suite's pods off
	// the node) and the checks that break things on purpose.
	if p.Conformance != nil {
		e.checkConformanceSubset(ctx, r, p.Conformance)
	}
	// Early, so that the kubelet's transition period runs out during the
	// checks below; checkPressureCleared looks again at the end.
	pressure := e.checkMemoryPressure(ctx, r, in)
	e.checkCachedImages(ctx, r, in, p.Want)
	var first *ProbeResult
	step("node hardening (TCP/UDP sockets, sshd, read-only /, bootstrap kubeconfig)", func(ctx context.Context) (string, error) {
		pr, err := e.Probe(ctx, in, "probe-1")
		if err != nil {
			return "", err
		}
		first = pr
		b, _ := json.Marshal(pr)
		return string(b), pr.Hardening()
	})
	if first != nil {
		r.add("disk attached as "+busName(p.NVMe), time.Now(), DiskBus(first.VarSource, p.NVMe), "/var on "+first.VarSource)
	}
	dataUUID := e.checkStorageOnNode(ctx, r, in, "first boot", "probe-storage-1")
	e.checkKernelHealth(ctx, r, in)
	var boots []string
	if units {
		boots = e.checkUserUnits(ctx, r, in, "first boot", "probe-evidence-1", nil)
	}
	e.checkSecurity(ctx, r, in, "probe-security")
	e.checkCIS(ctx, r, in, "probe-cis")
	if units {
		e.checkDrift(ctx, r, in)
	}
	// bootfast: no failed unit on this boot (units.go).
	e.checkNoFailedUnits(ctx, r, in, "first boot", "probe-units-1")
	e.checkTimeSync(ctx, r, in, "first boot", "probe-time-1")
	e.checkNICLinkLoss(ctx, r, in)
	e.checkPressureCleared(ctx, r, in, pressure)
	// After the pressure's check, which wants containerd's MainPID unchanged.
	e.checkContainerdRestarts(ctx, r, in)
	// Late: it detaches the RAM role for a while, and a pull it fails
	// keeps retrying in the background.
	e.checkPrivateACR(ctx, r, in)
	if p.Reboot {
		e.reboot(ctx, r, in, p, boots, disks, dataUUID)
	} else {
		e.checkGracefulStop(ctx, r, in)
		e.checkNoSecret(ctx, r, in, "first boot")
	}
	in.VM.Stop()
	e.checkDataDiskAfter(ctx, r, disks, dataUUID)
	e.checkUntouched(ctx, r, in, disks, firstBootName(1, p.NVMe))
	if p.PolicyCheck {
		e.policy(ctx, r, p, ud)
		e.guaranteeBoot(ctx, r, p, ud)
		e.doubleGzipBoot(ctx, r, p, ud)
	}
	return r
}

// rebootMemoryMiB is the memory of the instance after the reboot; the
// first boot has VMConfig's.
const rebootMemoryMiB = 4096

// reboot edits /etc and, as a privileged pod's persistence attempt, the
// agent's stored config (deleting its digest too), and reboots with the
// disk on the other controller: the node must come back Ready with the
// user-data's configuration, without the edits, reporting the drift.
func (e *Env) reboot(ctx context.Context, r *Report, in *Instance, p Plan, boots []string, disks *dataDisks, dataUUID string) {
	s := time.Now()
	mark := fmt.Sprintf("drover smoke edit %d", s.UnixNano())
	msg, err := e.probe(ctx, in, "edit-etc", []string{"edit-etc", mark})
	if err == nil {
		err = EtcEdited(msg, mark)
	}
	if !r.add("edit /etc before the reboot (written and read back)", s, err, msg) {
		return
	}
	tampered, ok := e.plant(ctx, r, in, "plant-stored", "privileged pod edits "+agent.StoredConfig+" (adds an enabled unit) and deletes "+agent.StoredDigest, plantedUnit, plantedEvidence, "delete-digest")
	if !ok {
		return
	}
	// Stopped by a spot reclaim notice: the flagless run presses the
	// power button instead (checkGracefulStop), each a boot's end.
	e.checkSpotStop(ctx, r, in)
	e.checkNoSecret(ctx, r, in, "first boot")
	s = time.Now()
	nvme := !p.NVMe
	// Another size too, as after a change of instance type: the
	// reservations follow the memory the node now has.
	in.Config.MemoryMiB = rebootMemoryMiB
	// The data disks in the reverse order: their device names change,
	// container storage must follow the filesystem's UUID.
	in.Config.DataDisks = disks.order(true)
	if err := e.Restart(ctx, in, nvme); !r.add(fmt.Sprintf("reboot with the disk on %s and %d MiB of memory", busName(nvme), rebootMemoryMiB), s, err, "") {
		return
	}
	r.Logs["second boot"] = in.Config.SerialLog()
	first := in.BootID
	jctx, cancel := context.WithTimeout(ctx, p.JoinTimeout)
	err = e.WaitJoined(jctx, in)
	cancel()
	log := in.VM.Log()
	r.Timelines["second boot"] = timeline.Parse(log)
	if !r.add("Ready again after the reboot", s, err, joinDetail("the Node's Ready posted from boot "+in.BootID+", not "+first, in.ReadAtReady)) {
		return
	}
	e.judgeTamper(ctx, r, in, "edited stored config", "stored-edited", StoredConfigGot(tampered), plantedEvidence)
	var probs []string
	e.checkAllocatable(ctx, r, in, "after the reboot")
	e.checkStorageAfterReboot(ctx, r, in, dataUUID)
	s = time.Now()
	_, err = e.waitFinding(ctx, in, nil, "", func(_ *cluster.Pod, n *cluster.Node, _ []cluster.Event) (string, error) {
		return "", JudgeFSConditionCleared(n)
	})
	r.add("ReadonlyFilesystem back to False after the reboot", s, err, "")
	s = time.Now()
	_, err = e.waitFinding(ctx, in, nil, "", func(_ *cluster.Pod, n *cluster.Node, _ []cluster.Event) (string, error) {
		return "", JudgeConditionFalse(n, "FrequentContainerdRestart", "after the reboot (systemd's count starts again)")
	})
	r.add("FrequentContainerdRestart back to False after the reboot", s, err, "")
	s = time.Now()
	pr, err := e.Probe(ctx, in, "probe-2")
	if err == nil {
		probs = nil
		if err := pr.EtcEditGone(); err != nil {
			probs = append(probs, err.Error())
		}
		if pr.Bootstrap {
			probs = append(probs, "a bootstrap kubeconfig was written again (re-provisioning)")
		}
		err = errIf(probs)
		r.add("disk attached as "+busName(nvme)+" after the reboot", s, DiskBus(pr.VarSource, nvme), "/var on "+pr.VarSource)
	}
	r.add("/etc edit gone, no re-provisioning", s, err, "")
	if boots != nil {
		e.checkUserUnits(ctx, r, in, "after the reboot: each once per boot, different boot ids", "probe-evidence-2", boots)
	}
	// bootfast: no failed unit after the reboot either (units.go).
	e.checkNoFailedUnits(ctx, r, in, "after the reboot", "probe-units-2")
	e.checkTimeSync(ctx, r, in, "after the reboot", "probe-time-2")
	// The stored config deleted and remote contents planted: the agent
	// must notice again; then a changed user-data, which it must refuse.
	e.tamperReboot(ctx, r, in, p)
	e.checkNoSecret(ctx, r, in, "after the reboots")
	e.changedUserDataBoot(ctx, r, in, p)
}

// policy boots a fresh instance whose user-data writes outside /etc and
// /var: the node must refuse it with a path-addressed error on the console
// and in the status file, and never join.
func (e *Env) policy(ctx context.Context, r *Report, p Plan, good []byte) {
	var cfg map[string]any
	if err := json.Unmarshal(good, &cfg); err != nil {
		r.add("policy-breaking user-data refused", time.Now(), err, "")
		return
	}
	storage := cfg["storage"].(map[string]any)
	files := storage["files"].([]any)
	idx := len(files)
	storage["files"] = append(files, map[string]any{"path": "/usr/local/bin/not-allowed", "mode": 0o755,
		"contents": map[string]any{"source": "data:,x"}})
	bad, _ := json.Marshal(cfg)
	s := time.Now()
	in, meta, got, line, err := refusedBoot{name: "policy-breaking user-data", id: "refused", dir: "policy",
		wait: "apply: FAILED", limit: 15 * time.Minute}.boot(ctx, e, r, p, bad)
	if in == nil {
		return
	}
	defer in.VM.Stop()
	want := fmt.Sprintf(`$.storage.files[%d].path: "/usr/local/bin/not-allowed"`, idx)
	if err == nil {
		err = JudgeRefusalLine(got, line, want)
	}
	r.add("refusal on the console", s, err, line)
	s = time.Now()
	if err := in.VM.Shutdown(2 * time.Minute); err != nil {
		e.logf("%v", err)
	}
	st, err := ReadStatus(ctx, in.Config)
	if err == nil {
		err = JudgeRefusalStatus(st, want)
	}
	detail := ""
	if st != nil {
		detail = st.Error
	}
	r.add("refusal in the status file ("+status.LastBootPath+")", s, err, detail)
	s = time.Now()
	name := strings.ToLower(meta.Hostname)
	n, err := e.Cluster.Node(ctx, name)
	r.add("refused node does not join (API: 404 for node "+name+")", s, NodeAbsent(name, n, err), "")
}

// NodeAbsent judges the API server's answer to GET /api/v1/nodes/<name> for
// a node that must not exist: only a 404 NotFound from the API server
// proves it; any other error (unreachable, 403, 500) proves nothing.
func NodeAbsent(name string, n *cluster.Node, err error) error {
	if err == nil {
		if n == nil {
			return fmt.Errorf("node %s: the API answered without an error or a Node", name)
		}
		return fmt.Errorf("node %s registered although its user-data was refused", n.Name)
	}
	var ae *cluster.APIError
	if !errors.As(err, &ae) {
		return fmt.Errorf("the API server did not answer, so the node's absence is unproven: %w", err)
	}
	if ae.Code != http.StatusNotFound || ae.Reason != "NotFound" {
		return fmt.Errorf("want 404 NotFound for node %s, the API server answered %d %s: %w", name, ae.Code, ae.Reason, err)
	}
	return nil
}

func errIf(probs []string) error {
	if len(probs) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(probs, "; "))
}

// JudgeRefusalLine checks the console of a boot that must be refused at
// apply: the first of "apply: FAILED" and "] ready: ok" seen was the
// refusal, and its line names want.
func JudgeRefusalLine(seen, line, want string) error {
	if seen != "apply: FAILED" || !strings.Contains(line, "apply: FAILED") || !strings.Contains(line, want) {
		return fmt.Errorf("console: want a refusal naming %s, got %q (first seen: %q)", want, line, seen)
	}
	return nil
}

// JudgeRefusalStatus checks the status file of a refused boot: failed,
// naming want.
func JudgeRefusalStatus(st *status.Status, want string) error {
	if st == nil || st.State != "failed" || !strings.Contains(st.Error, want) {
		state, msg := "", ""
		if st != nil {
			state, msg = st.State, st.Error
		}
		return fmt.Errorf("status file: state %q, error %q; want failed naming %s", state, msg, want)
	}
	return nil
}

// joinDetail adds to a join's detail what the node read from its system
// disk until Ready: on ECS, boot time (issue 36).
func joinDetail(detail string, read qemu.BlockStats) string {
	d := fmt.Sprintf("system disk read until Ready: %s in %d requests", bytesize.Format(read.ReadBytes), read.ReadOps)
	if detail == "" {
		return d
	}
	return detail + "; " + d
}
