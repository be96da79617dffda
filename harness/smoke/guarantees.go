package smoke

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/drover-os/drover/agent/agent"
	"github.com/drover-os/drover/agent/ignition"
	"github.com/drover-os/drover/agent/status"
	"github.com/drover-os/drover/harness/cluster"
	"github.com/drover-os/drover/harness/ecsmeta"
)

// The guarantee boot's user-data carries a kubelet override the static
// policy cannot see: a oneshot that, at run time and before the kubelet
// starts, copies a drop-in turning on anonymous access and the read-only
// port into /etc/systemd/system.control, a directory the user-data itself
// may not write. Only the agent's check of the running node can catch it.
const (
	OverrideUnit   = "smoke-override.service"
	OverrideSource = "/etc/opt/drover-smoke/50-smoke-override.conf"
	OverrideDropIn = "/etc/systemd/system.control/kubelet.service.d/50-smoke-override.conf"
	overrideText   = "[Service]\nExecStart=\nExecStart=/usr/bin/kubelet $KUBELET_ARGS --anonymous-auth=true --authorization-mode=AlwaysAllow --read-only-port=10255\n"
)

// GuaranteeUserData adds the run-time kubelet override to a good user-data.
func GuaranteeUserData(good []byte) ([]byte, error) {
	var cfg map[string]any
	if err := json.Unmarshal(good, &cfg); err != nil {
		return nil, err
	}
	storage, _ := cfg["storage"].(map[string]any)
	if storage == nil {
		storage = map[string]any{}
		cfg["storage"] = storage
	}
	files, _ := storage["files"].([]any)
	storage["files"] = append(files, map[string]any{"path": OverrideSource, "mode": 0o644,
		"contents": map[string]any{"source": "data:," + url.PathEscape(overrideText)}})
	sd, _ := cfg["systemd"].(map[string]any)
	if sd == nil {
		sd = map[string]any{}
		cfg["systemd"] = sd
	}
	units, _ := sd["units"].([]any)
	sd["units"] = append(units, map[string]any{"name": OverrideUnit, "enabled": true,
		"contents": "[Unit]\nDescription=drover smoke: a kubelet override dropped where the static policy does not look\nBefore=kubelet.service\n\n" +
			"[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/sh -c 'mkdir -p " + filepath.Dir(OverrideDropIn) +
			" && cp " + OverrideSource + " " + OverrideDropIn + " && systemctl daemon-reload'\n\n[Install]\nWantedBy=multi-user.target\n"})
	return json.Marshal(cfg)
}

// refusedBoot is a fresh instance booted with a user-data it must not
// join with.
type refusedBoot struct {
	name  string // what the boot is, for its check and its log
	id    string // its instance ID and hostname say refusal-<id>; its state is in vm-<dir>
	dir   string
	wait  string // the console line that says it refused
	limit time.Duration
}

// boot boots it and waits until the console shows the refusal or a join.
// in is nil when it did not boot (the report says why); seen is which of
// the two came, line the last refusal line.
func (b refusedBoot) boot(ctx context.Context, e *Env, r *Report, p Plan, ud []byte) (in *Instance, meta ecsmeta.Instance, seen, line string, err error) {
	meta = ECSInstance()
	meta.InstanceID, meta.Hostname, meta.UserData = "i-bp1drover0"+b.id, "izbp1drover0"+b.id+"0z", ud
	s := time.Now()
	in, err = e.Boot(ctx, p.Image, filepath.Join(e.opts.WorkDir, "vm-"+b.dir), p.NVMe, meta, ecsmeta.Faults{})
	if !r.add("boot with "+b.name, s, err, "") {
		return nil, meta, "", "", err
	}
	r.Logs[b.name] = in.Config.SerialLog()
	wctx, cancel := context.WithTimeout(ctx, b.limit)
	seen, err = in.VM.WaitFor(wctx, b.wait, "] ready: ok")
	cancel()
	return in, meta, seen, lastMatch(in.VM.Log(), b.wait), err
}

// JudgeGuaranteeRefusal checks the agent's refusal of a node whose
// kubelet was overridden at run time: a failed phase naming a broken
// guarantee and the file that broke it, in the console line and in the
// status file.
func JudgeGuaranteeRefusal(consoleLine string, st *status.Status, file string) error {
	var probs []string
	if !strings.Contains(consoleLine, "FAILED: GUARANTEE BROKEN") || !strings.Contains(consoleLine, file) {
		probs = append(probs, fmt.Sprintf("console: want a failed phase naming a broken guarantee and %s, got %q", file, consoleLine))
	}
	switch {
	case st == nil:
		probs = append(probs, "no status file")
	case st.State != "failed" || !strings.Contains(st.Error, "GUARANTEE BROKEN") || !strings.Contains(st.Error, file):
		probs = append(probs, fmt.Sprintf("status file: state %q, error %q; want failed naming a broken guarantee and %s", st.State, st.Error, file))
	}
	return errIf(probs)
}

// JudgeNotReady checks the API server's answer for a node that must not be
// Ready: absent (404), or present without Ready=True.
func JudgeNotReady(name string, n *cluster.Node, err error) error {
	if err != nil || n == nil {
		return NodeAbsent(name, n, err)
	}
	if n.Ready {
		return fmt.Errorf("node %s is Ready although its kubelet broke a guarantee", n.Name)
	}
	return nil
}

// guaranteeBoot boots a fresh instance with GuaranteeUserData: the user-data
// passes the static policy (drover validate's checks), the override lands,
// and the agent's effect check must stop the node from joining.
func (e *Env) guaranteeBoot(ctx context.Context, r *Report, p Plan, good []byte) {
	s := time.Now()
	ud, err := GuaranteeUserData(good)
	if err == nil {
		// The point of the scenario: a path the static policy does not
		// know. If the policy learns to refuse this user-data, the boot
		// below would test the policy, not the effect check.
		if ps := ignition.Validate(ud, agent.Options(ignition.MapFetcher{})); len(ps) > 0 {
			err = fmt.Errorf("the static policy refuses the run-time override's user-data, so the effect check would not be reached: %v", ps)
		}
	}
	if !r.add("run-time kubelet override passes the static policy (drover validate)", s, err, OverrideUnit+" copies "+OverrideDropIn) {
		return
	}
	in, meta, got, line, err := refusedBoot{name: "a kubelet override dropped at run time", id: "override", dir: "guarantee",
		wait: "FAILED: GUARANTEE BROKEN", limit: 20 * time.Minute}.boot(ctx, e, r, p, ud)
	if in == nil {
		return
	}
	defer in.VM.Stop()
	if err == nil && got != "FAILED: GUARANTEE BROKEN" {
		err = fmt.Errorf("the node joined with its kubelet overridden by %s", OverrideDropIn)
	}
	r.add("the agent's effect check refuses the kubelet (console)", s, err, line)
	s = time.Now()
	name := strings.ToLower(meta.Hostname)
	n, err := e.Cluster.Node(ctx, name)
	r.add("overridden node is not Ready (API)", s, JudgeNotReady(name, n, err), "")
	s = time.Now()
	if err := in.VM.Shutdown(3 * time.Minute); err != nil {
		e.logf("%v", err)
	}
	st, err := ReadStatus(ctx, in.Config)
	if err == nil {
		err = JudgeGuaranteeRefusal(line, st, OverrideDropIn)
	}
	detail := ""
	if st != nil {
		detail = st.Error
	}
	r.add("broken guarantee and the file named in the console and the status file", s, err, detail)
	e.checkNoSecretIn(ctx, r, in, "refused by the effect check", true)
}

// What the privileged pod plants: a unit leaving evidence of each run.
const (
	plantedUnit     = "smoke-planted.service"
	plantedEvidence = EvidenceDir + "/planted"
)

// plant runs the probe's mode (plant-stored, plant-contents) in a
// privileged pod and returns its answer.
func (e *Env) plant(ctx context.Context, r *Report, in *Instance, mode, what string, args ...string) (string, bool) {
	s := time.Now()
	msg, err := e.probe(ctx, in, mode, append([]string{mode}, args...))
	if err == nil {
		err = JudgePlanted(msg)
	}
	return msg, r.add(what, s, err, msg)
}

// JudgePlanted reads the probe's answer to a plant: it must say it
// planted.
func JudgePlanted(msg string) error {
	var res struct {
		Planted bool   `json:"planted"`
		Error   string `json:"error"`
	}
	if err := json.Unmarshal([]byte(msg), &res); err != nil {
		return fmt.Errorf("probe answer %q: %v", msg, err)
	}
	if !res.Planted {
		return fmt.Errorf("the probe did not plant: %s", res.Error)
	}
	return nil
}

// StoredConfigGot is what the guard's drift report says it found in the
// stored config after the plant answered msg: the first 12 hex digits of
// the edited file's sha256 (plant-stored's "after"), or "missing" (the
// file deleted).
func StoredConfigGot(msg string) string {
	var res struct {
		After string `json:"after"`
	}
	if json.Unmarshal([]byte(msg), &res) != nil || len(res.After) < 12 {
		return "missing"
	}
	return res.After[:12]
}

// judgeTamper checks a boot after a plant: the drift reported on the
// Node (condition and exactly one Event naming the stored config and what
// the agent found there, got), and nothing planted ran (the evidence
// file absent) or was written as a unit. Its probes are named after pod,
// each round its own.
func (e *Env) judgeTamper(ctx context.Context, r *Report, in *Instance, what, pod, got, evidence string) {
	s := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	err := e.waitNode(wctx, in, func(n *cluster.Node, ev []cluster.Event) error {
		return JudgeStoredDrift(n, ev, agent.StoredConfig, got)
	})
	cancel()
	r.add(what+" reported: DroverConfigDrift and a ConfigDrift Event name "+agent.StoredConfig+" (got "+got+")", s, err, "")
	s = time.Now()
	msg, err := e.probe(ctx, in, pod+"-ran", []string{"exists", "/var/" + evidence})
	if err == nil {
		err = JudgePlantedNotRun(msg)
	}
	r.add(what+": the planted unit did not run (/var/"+evidence+" absent)", s, err, msg)
	s = time.Now()
	msg, err = e.probe(ctx, in, pod+"-unit", []string{"exists", "/etc/systemd/system/" + plantedUnit})
	if err == nil {
		err = JudgePlantedNotRun(msg)
	}
	r.add(what+": the planted unit was not written (/etc/systemd/system/"+plantedUnit+" absent)", s, err, msg)
}

// tamperReboot is the second round of a privileged pod's persistence
// attempt: it deletes the agent's stored config and plants a unit in its
// remote-contents store, and the node reboots with its user-data
// unchanged. The node must come back Ready with the user-data's
// configuration, say so on the Node, and neither write nor run what was
// planted; the planted contents are removed.
func (e *Env) tamperReboot(ctx context.Context, r *Report, in *Instance, p Plan) {
	msg, ok := e.plant(ctx, r, in, "plant-contents", "privileged pod deletes "+agent.StoredConfig+" and plants a unit in "+agent.ContentsDir, plantedUnit, plantedEvidence)
	if !ok {
		return
	}
	s := time.Now()
	if err := e.Restart(ctx, in, p.NVMe); !r.add("reboot with the user-data as at launch", s, err, "") {
		return
	}
	r.Logs["third boot"] = in.Config.SerialLog()
	prev := in.BootID
	jctx, cancel := context.WithTimeout(ctx, p.JoinTimeout)
	err := e.waitJoined(jctx, in, "] ready: FAILED", "FATAL")
	cancel()
	if !r.add("Ready again after the reboot without a stored config", s, err, "posted from boot "+in.BootID+", not "+prev) {
		return
	}
	e.judgeTamper(ctx, r, in, "deleted stored config", "stored-deleted", "missing", plantedEvidence)
	var res struct {
		Contents string `json:"contents"`
	}
	json.Unmarshal([]byte(msg), &res)
	s = time.Now()
	got, err := e.probe(ctx, in, "planted-contents", []string{"exists", res.Contents})
	if err == nil {
		err = JudgePlantedNotRun(got)
	}
	r.add("the planted remote contents were removed ("+res.Contents+" absent)", s, err, got)
}

// changedUserDataBoot reboots the instance with a user-data other than
// the one it was launched with: the node must refuse it and fail closed,
// applying nothing (the stored copy cannot be confirmed against it) and
// starting no kubelet: the Node keeps the boot ID of the last boot that
// joined, and the status file says why.
func (e *Env) changedUserDataBoot(ctx context.Context, r *Report, in *Instance, p Plan) {
	changed := in.Meta
	changed.UserData = append(append([]byte(nil), in.Meta.UserData...), ' ')
	e.Metadata.SetInstance(changed)
	defer e.Metadata.SetInstance(in.Meta)
	s := time.Now()
	if err := e.Restart(ctx, in, p.NVMe); !r.add("reboot with a changed user-data", s, err, "") {
		return
	}
	r.Logs["changed user-data"] = in.Config.SerialLog()
	wctx, cancel := context.WithTimeout(ctx, p.JoinTimeout)
	got, err := in.VM.WaitFor(wctx, "] config: FAILED", "] ready: ok", "] apply: ok")
	cancel()
	if err == nil && got != "] config: FAILED" {
		err = fmt.Errorf("the node went on with a changed user-data: %s", lastMatch(in.VM.Log(), got))
	}
	r.add("changed user-data refused in the config phase (console)", s, err, lastMatch(in.VM.Log(), "config: FAILED"))
	s = time.Now()
	if err := in.VM.Shutdown(3 * time.Minute); err != nil {
		e.logf("%v", err)
	}
	st, err := ReadStatus(ctx, in.Config)
	if err == nil {
		err = JudgeFailedClosed(st, agent.ErrImmutable.Error())
	}
	detail := ""
	if st != nil {
		detail = st.Error
	}
	r.add("refused with nothing applied: the status file names the refusal, no apply or kubelet phase ran", s, err, detail)
	s = time.Now()
	n, err := e.Cluster.Node(ctx, in.NodeName)
	if err == nil && n.BootID != in.BootID {
		err = fmt.Errorf("the Node's bootID is %s, not the last joined boot's %s: a kubelet ran on the refused boot", n.BootID, in.BootID)
	}
	r.add("no kubelet on the refused boot (API: the Node's bootID is the last joined boot's)", s, err, "")
}

// JudgeFailedClosed checks the status file of a boot that must have
// refused its configuration before applying anything: failed naming
// want, and no phase after config begun but the ones that run beside it
// from the start (kernel).
func JudgeFailedClosed(st *status.Status, want string) error {
	if err := JudgeRefusalStatus(st, want); err != nil {
		return err
	}
	var ran []string
	for _, ph := range st.Phases {
		switch ph.Name {
		case "start", "kernel", "config":
		default:
			ran = append(ran, ph.Name)
		}
	}
	if len(ran) > 0 {
		return fmt.Errorf("phases %v ran on a refused boot", ran)
	}
	return nil
}

// JudgePlantedNotRun reads the probe's "exists" answer for the planted
// unit's evidence file: it must be absent, and the probe must have looked.
func JudgePlantedNotRun(msg string) error {
	var res struct {
		Path   string `json:"path"`
		Exists *bool  `json:"exists"`
		Error  string `json:"error"`
	}
	if err := json.Unmarshal([]byte(msg), &res); err != nil || res.Exists == nil {
		return fmt.Errorf("probe answer %q: %v", msg, err)
	}
	if res.Error != "" {
		return fmt.Errorf("the probe could not look at %s: %s", res.Path, res.Error)
	}
	if *res.Exists {
		return fmt.Errorf("%s exists: what the privileged pod planted took effect", res.Path)
	}
	return nil
}

// DoubleGzip compresses a user-data twice.
func DoubleGzip(ud []byte) []byte {
	for range 2 {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write(ud)
		zw.Close()
		ud = b.Bytes()
	}
	return ud
}

// doubleGzipBoot boots a fresh instance whose user-data is gzip inside
// gzip: drover validate refuses it, and so must the node, storing nothing
// (its bootstrap token must not reach /var).
func (e *Env) doubleGzipBoot(ctx context.Context, r *Report, p Plan, good []byte) {
	s := time.Now()
	ud := DoubleGzip(good)
	ps := ignition.Validate(ud, agent.Options(ignition.MapFetcher{}))
	var err error
	if len(ps) == 0 {
		err = fmt.Errorf("drover validate accepts double-gzipped user-data")
	}
	if !r.add("double-gzipped user-data refused by drover validate", s, err, fmt.Sprint(ps)) {
		return
	}
	in, _, got, line, err := refusedBoot{name: "double-gzipped user-data", id: "gzipgzip", dir: "gzip2",
		wait: "apply: FAILED", limit: 15 * time.Minute}.boot(ctx, e, r, p, ud)
	if in == nil {
		return
	}
	defer in.VM.Stop()
	if err == nil {
		err = JudgeRefusalLine(got, line, ps[0].Message)
	}
	r.add("the node refuses it as drover validate does", s, err, line)
	e.checkNoSecretIn(ctx, r, in, "double-gzipped user-data refused", false)
}
