package smoke

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/drover-os/drover/agent/status"
	"github.com/drover-os/drover/harness/ecsmeta"
	"github.com/drover-os/drover/harness/registry"
	"github.com/drover-os/drover/harness/timeline"
)

// Plan says which scenarios a smoke run covers.
type Plan struct {
	Image       string
	UserData    []byte  // nil: rendered for the local cluster
	ErrorRate   float64 // fraction of metadata requests answered 5xx/429
	NVMe        bool
	Reboot      bool // reboot: Ready again without re-provisioning, /etc edit gone, changed user-data refused
	PolicyCheck bool // a policy-breaking user-data must not join
	JoinTimeout time.Duration
}

// Run runs the plan and returns the report; the VMs are stopped at the end.
func (e *Env) Run(ctx context.Context, p Plan) *Report {
	r := &Report{Timelines: map[string]timeline.Timeline{}, Logs: map[string]string{}}
	if p.JoinTimeout == 0 {
		p.JoinTimeout = 25 * time.Minute
	}
	ud := p.UserData
	if ud == nil {
		var err error
		if ud, err = e.UserData(); err != nil {
			r.add("render user-data", time.Now(), err, "")
			return r
		}
	}
	meta := ECSInstance()
	meta.UserData = ud
	start := time.Now()
	in, err := e.Boot(ctx, p.Image, filepath.Join(e.opts.WorkDir, "vm-join"), p.NVMe, meta,
		ecsmeta.Faults{ErrorRate: p.ErrorRate, Seed: 30})
	if !r.add("boot", start, err, "") {
		return r
	}
	defer in.VM.Stop()
	r.Logs["first boot"] = in.Config.SerialLog()
	jctx, cancel := context.WithTimeout(ctx, p.JoinTimeout)
	err = e.WaitJoined(jctx, in)
	cancel()
	r.Timelines["first boot"] = timeline.Parse(in.VM.Log())
	detail := fmt.Sprintf("metadata: hardened (token required), %.0f%% of requests failed with 5xx/429", p.ErrorRate*100)
	if !r.add("node joins and is Ready", start, err, detail) {
		return r
	}
	step := func(name string, fn func(ctx context.Context) (string, error)) bool {
		s := time.Now()
		sctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		d, err := fn(sctx)
		return r.add(name, s, err, d)
	}
	step("providerID and ECS labels", func(ctx context.Context) (string, error) {
		return meta.RegionID + "." + meta.InstanceID, e.CheckNode(ctx, in)
	})
	step("pod from the local registry runs to completion", func(ctx context.Context) (string, error) {
		_, err := e.RunPod(ctx, in, "hello", registry.HelloImage, nil, false)
		return registry.HelloImage, err
	})
	step("node hardening (listeners, sshd, read-only /, bootstrap kubeconfig)", func(ctx context.Context) (string, error) {
		pr, err := e.Probe(ctx, in, "probe-1")
		if err != nil {
			return "", err
		}
		b, _ := json.Marshal(pr)
		return string(b), pr.Hardening()
	})
	// bootfast: no failed unit on this boot (units.go).
	e.checkNoFailedUnits(ctx, r, in, "first boot", "probe-units-1")
	if p.Reboot {
		e.reboot(ctx, r, in, p)
	}
	in.VM.Stop()
	if p.PolicyCheck {
		e.policy(ctx, r, p, ud)
	}
	return r
}

// reboot edits /etc, changes the user-data, and reboots: the node must
// come back Ready from its stored config, without the edit, refusing the
// new user-data.
func (e *Env) reboot(ctx context.Context, r *Report, in *Instance, p Plan) {
	s := time.Now()
	if _, err := e.RunPod(ctx, in, "edit-etc", registry.ProbeImage, []string{"edit-etc"}, true); !r.add("edit /etc before the reboot", s, err, "") {
		return
	}
	changed := in.Meta
	changed.UserData = append(append([]byte(nil), in.Meta.UserData...), ' ')
	e.Metadata.SetInstance(changed)
	s = time.Now()
	if err := e.Restart(ctx, in); !r.add("reboot", s, err, "") {
		return
	}
	r.Logs["second boot"] = in.Config.SerialLog()
	jctx, cancel := context.WithTimeout(ctx, p.JoinTimeout)
	err := e.WaitJoined(jctx, in)
	cancel()
	log := in.VM.Log()
	r.Timelines["second boot"] = timeline.Parse(log)
	if !r.add("Ready again after the reboot", s, err, "") {
		return
	}
	s = time.Now()
	var probs []string
	if !strings.Contains(log, "stored config from first boot") {
		probs = append(probs, "the agent did not re-apply the stored config")
	}
	if !strings.Contains(log, "REFUSED: user-data changed since first boot") {
		probs = append(probs, "the changed user-data was not refused on the console")
	}
	r.add("changed user-data refused, stored config re-applied", s, errIf(probs), lastMatch(log, "REFUSED"))
	s = time.Now()
	pr, err := e.Probe(ctx, in, "probe-2")
	if err == nil {
		probs = nil
		if pr.EtcEditExists {
			probs = append(probs, "the /etc edit survived the reboot")
		}
		if pr.Bootstrap {
			probs = append(probs, "a bootstrap kubeconfig was written again (re-provisioning)")
		}
		err = errIf(probs)
	}
	r.add("/etc edit gone, no re-provisioning", s, err, "")
	// bootfast: no failed unit after the reboot either (units.go).
	e.checkNoFailedUnits(ctx, r, in, "after the reboot", "probe-units-2")
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
	meta := ECSInstance()
	meta.InstanceID, meta.Hostname, meta.UserData = "i-bp1drover0refused", "izbp1drover0refused0z", bad
	s := time.Now()
	in, err := e.Boot(ctx, p.Image, filepath.Join(e.opts.WorkDir, "vm-policy"), p.NVMe, meta, ecsmeta.Faults{})
	if !r.add("boot with policy-breaking user-data", s, err, "") {
		return
	}
	defer in.VM.Stop()
	r.Logs["policy boot"] = in.Config.SerialLog()
	wctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	got, err := in.VM.WaitFor(wctx, "apply: FAILED", "] ready: ok")
	cancel()
	want := fmt.Sprintf(`$.storage.files[%d].path: "/usr/local/bin/not-allowed"`, idx)
	line := lastMatch(in.VM.Log(), "apply: FAILED")
	if err == nil && (got != "apply: FAILED" || !strings.Contains(line, want)) {
		err = fmt.Errorf("console: want a refusal naming %s, got %q", want, line)
	}
	r.add("refusal on the console", s, err, line)
	s = time.Now()
	if err := in.VM.Shutdown(2 * time.Minute); err != nil {
		e.logf("%v", err)
	}
	st, err := ReadStatus(ctx, in.Config)
	if err == nil && (st.State != "failed" || !strings.Contains(st.Error, want)) {
		err = fmt.Errorf("status file: state %q, error %q; want failed naming %s", st.State, st.Error, want)
	}
	detail := ""
	if st != nil {
		detail = st.Error
	}
	r.add("refusal in the status file ("+status.LastBootPath+")", s, err, detail)
	s = time.Now()
	n, _ := e.Cluster.Node(ctx, strings.ToLower(meta.Hostname))
	var nerr error
	if n != nil {
		nerr = fmt.Errorf("node %s registered although its user-data was refused", n.Name)
	}
	r.add("refused node does not join", s, nerr, "")
}

func errIf(probs []string) error {
	if len(probs) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(probs, "; "))
}

// Timelines boots n fresh instances one after the other, each until its
// node is Ready, and returns their boot timelines (for make bench).
func (e *Env) Timelines(ctx context.Context, image string, n int, nvme bool, timeout time.Duration) ([]timeline.Timeline, error) {
	ud, err := e.UserData()
	if err != nil {
		return nil, err
	}
	var out []timeline.Timeline
	for i := 1; i <= n; i++ {
		meta := ECSInstance()
		meta.InstanceID = fmt.Sprintf("i-bp1drover0bench%d", i)
		meta.Hostname = fmt.Sprintf("izbp1drover0bench%dz", i)
		meta.UserData = ud
		in, err := e.Boot(ctx, image, filepath.Join(e.opts.WorkDir, fmt.Sprintf("vm-bench-%d", i)), nvme, meta, ecsmeta.Faults{})
		if err != nil {
			return out, err
		}
		jctx, cancel := context.WithTimeout(ctx, timeout)
		err = e.WaitJoined(jctx, in)
		cancel()
		in.VM.Stop()
		if err != nil {
			return out, fmt.Errorf("boot %d: %w", i, err)
		}
		out = append(out, timeline.Parse(in.VM.Log()))
	}
	return out, nil
}
