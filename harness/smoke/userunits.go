package smoke

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// The launch template's own units the smoke user-data carries, as a user
// would write them: an enabled oneshot, an enabled long-running service and
// an enabled timer (with the service it triggers), each wanted by a
// different target. Each run appends "BOOT-ID PID" to a file of its own
// under /var/EvidenceDir, so the node's disk says which boots each one ran
// in; the long-running one then execs sleep, so its PID stays alive.
const (
	EvidenceDir    = "lib/drover-smoke"
	EvidenceScript = "/etc/opt/drover-smoke/evidence.sh"
	OneshotUnit    = "smoke-oneshot.service"
	LongUnit       = "smoke-long.service"
	TimerUnit      = "smoke-tick.timer"
	TimerService   = "smoke-tick.service"
)

// The kubelet.service drop-in's setting. A kubelet drop-in may set only
// the proxy variables in Environment= (agent/ignition's directive
// allowlist), so the smoke marks the kubelet with a NO_PROXY entry no
// request ever matches.
const (
	DropinEnv   = "NO_PROXY"
	DropinValue = "applied-before-start.drover-smoke.invalid"
)

// A sysctl.d file of the launch template's: systemd-sysctl reads
// /etc/sysctl.d at boot, before or after the agent wrote it, so it is in
// effect only if the agent has it run again after apply. vm.max_map_count
// is global (the probe pod sees the node's) and 65530 by default.
const (
	SysctlFile  = "/etc/sysctl.d/90-drover-smoke.conf"
	SysctlValue = "262144"
)

// SmokeUnits are the units SmokeUnits adds, the ones the evidence check asks
// systemctl about.
var SmokeUnits = []string{OneshotUnit, LongUnit, TimerUnit, TimerService}

const evidenceScript = `#!/bin/sh
# drover smoke: evidence that a launch template's unit ran, and in which boot.
set -e
mkdir -p /var/` + EvidenceDir + `
echo "$(cat /proc/sys/kernel/random/boot_id) $$" >> /var/` + EvidenceDir + `/"$1"
if [ "$2" = stay ]; then exec sleep infinity; fi
`

func smokeUnits() []any {
	unit := func(name, body string, enabled bool) map[string]any {
		u := map[string]any{"name": name, "contents": body}
		if enabled {
			u["enabled"] = true
		}
		return u
	}
	return []any{
		unit(OneshotUnit, "[Unit]\nDescription=drover smoke: a oneshot from the launch template\n\n[Service]\nType=oneshot\nExecStart=/bin/sh "+EvidenceScript+" oneshot\n\n[Install]\nWantedBy=multi-user.target\n", true),
		unit(LongUnit, "[Unit]\nDescription=drover smoke: a long-running service from the launch template\n\n[Service]\nExecStart=/bin/sh "+EvidenceScript+" long stay\n\n[Install]\nWantedBy=multi-user.target\n", true),
		unit(TimerUnit, "[Unit]\nDescription=drover smoke: a timer from the launch template\n\n[Timer]\nOnActiveSec=2s\nAccuracySec=1s\n\n[Install]\nWantedBy=timers.target\n", true),
		unit(TimerService, "[Unit]\nDescription=drover smoke: what the timer runs\n\n[Service]\nType=oneshot\nExecStart=/bin/sh "+EvidenceScript+" tick\n", false),
		// A drop-in for an image unit: in the kubelet's environment only
		// if systemd loaded it before starting the kubelet.
		map[string]any{"name": "kubelet.service", "dropins": []any{map[string]any{"name": "50-drover-smoke.conf",
			"contents": "[Service]\nEnvironment=" + DropinEnv + "=" + DropinValue + "\n"}}},
	}
}

// WithSmokeUnits adds the smoke's units and their script to a rendered
// user-data (an Ignition config).
func WithSmokeUnits(ud []byte) ([]byte, error) {
	var cfg map[string]any
	if err := json.Unmarshal(ud, &cfg); err != nil {
		return nil, fmt.Errorf("adding the smoke units to the user-data: %w", err)
	}
	storage, _ := cfg["storage"].(map[string]any)
	if storage == nil {
		storage = map[string]any{}
		cfg["storage"] = storage
	}
	files, _ := storage["files"].([]any)
	storage["files"] = append(files, map[string]any{"path": EvidenceScript, "mode": 0o755,
		"contents": map[string]any{"source": "data:," + url.PathEscape(evidenceScript)}},
		map[string]any{"path": SysctlFile, "mode": 0o644,
			"contents": map[string]any{"source": "data:," + url.PathEscape("vm.max_map_count = "+SysctlValue+"\n")}})
	sd, _ := cfg["systemd"].(map[string]any)
	if sd == nil {
		sd = map[string]any{}
		cfg["systemd"] = sd
	}
	units, _ := sd["units"].([]any)
	sd["units"] = append(units, smokeUnits()...)
	return json.Marshal(cfg)
}

// HasSmokeUnits says whether a user-data carries the smoke's units (a
// user-data given to drover smoke from outside may not).
func HasSmokeUnits(ud []byte) bool {
	return strings.Contains(string(ud), EvidenceScript) && strings.Contains(string(ud), OneshotUnit)
}

// EvidenceRun is one line a smoke unit wrote.
type EvidenceRun struct {
	BootID string `json:"bootId"`
	PID    int    `json:"pid"`
	Alive  bool   `json:"alive"`
	Comm   string `json:"comm"`
}

// UnitState is systemctl's view of a unit.
type UnitState struct {
	Active string `json:"active"`
	Sub    string `json:"sub"`
	Result string `json:"result"`
}

// Evidence is the probe's "evidence" report.
type Evidence struct {
	BootID string                   `json:"bootId"`
	Runs   map[string][]EvidenceRun `json:"runs"`
	Units  map[string]UnitState     `json:"units"`
	// KubeletEnv is NO_PROXY (DropinEnv) in the running kubelet's
	// environment; nil: not set.
	KubeletEnv  *string  `json:"kubeletEnv"`
	MaxMapCount string   `json:"maxMapCount"`
	Errors      []string `json:"errors"`
}

// ReadEvidence runs the probe's evidence mode on the node.
func (e *Env) ReadEvidence(ctx context.Context, in *Instance, pod string) (*Evidence, error) {
	msg, err := e.probe(ctx, in, pod, append([]string{"evidence", EvidenceDir}, SmokeUnits...))
	if err != nil {
		return nil, err
	}
	var ev Evidence
	if err := json.Unmarshal([]byte(msg), &ev); err != nil {
		return nil, fmt.Errorf("probe evidence report %q: %w", msg, err)
	}
	return &ev, nil
}

// Judge checks that each smoke unit ran in every boot of boots (oldest
// first; the last is the current one) and in no other: the oneshot and the
// timer's service once per boot, the long-running service once per boot
// and still running now (its PID alive as sleep), the units in the states
// systemctl shows for what they are.
func (ev *Evidence) Judge(boots []string) error {
	var probs []string
	if ev.BootID == "" || len(boots) == 0 || ev.BootID != boots[len(boots)-1] {
		return fmt.Errorf("the node's boot id is %q, want %q (errors: %v)", ev.BootID, boots, ev.Errors)
	}
	for i := range boots {
		for j := i + 1; j < len(boots); j++ {
			if boots[i] == boots[j] {
				return fmt.Errorf("boots %d and %d have the same boot id %s: the node did not reboot", i+1, j+1, boots[i])
			}
		}
	}
	for _, name := range []string{"oneshot", "long", "tick"} {
		runs := ev.Runs[name]
		var got []string
		for _, r := range runs {
			got = append(got, r.BootID)
		}
		if strings.Join(got, " ") != strings.Join(boots, " ") {
			probs = append(probs, fmt.Sprintf("/var/%s/%s: ran in boots %q, want once in each of %q", EvidenceDir, name, got, boots))
			continue
		}
		if last := runs[len(runs)-1]; name == "long" && (!last.Alive || last.Comm != "sleep") {
			probs = append(probs, fmt.Sprintf("the long-running unit's process %d is not running now (alive %t, comm %q)", last.PID, last.Alive, last.Comm))
		}
	}
	want := map[string]UnitState{
		OneshotUnit:  {Active: "inactive", Sub: "dead", Result: "success"},
		LongUnit:     {Active: "active", Sub: "running", Result: "success"},
		TimerUnit:    {Active: "active", Sub: "elapsed", Result: "success"},
		TimerService: {Active: "inactive", Sub: "dead", Result: "success"},
	}
	for _, u := range SmokeUnits {
		got, ok := ev.Units[u]
		w := want[u]
		if u == TimerUnit && got.Sub == "waiting" {
			w.Sub = "waiting" // both mean it fired and has nothing left to do this boot
		}
		if !ok || got != w {
			probs = append(probs, fmt.Sprintf("systemctl show %s: %+v, want %+v", u, got, w))
		}
	}
	if ev.KubeletEnv == nil || *ev.KubeletEnv != DropinValue {
		probs = append(probs, fmt.Sprintf("the running kubelet's environment lacks %s=%s: the kubelet.service drop-in was not in effect when it started (got %v)", DropinEnv, DropinValue, ev.KubeletEnv))
	}
	if ev.MaxMapCount != SysctlValue {
		probs = append(probs, fmt.Sprintf("vm.max_map_count is %q, want %s from the user-data's %s: systemd-sysctl did not apply it", ev.MaxMapCount, SysctlValue, SysctlFile))
	}
	if len(ev.Errors) > 0 {
		probs = append(probs, "probe errors: "+strings.Join(ev.Errors, "; "))
	}
	return errIf(probs)
}

// checkUserUnits adds the check that the launch template's own units ran
// on this boot (and on every boot before it, once each), from what they
// wrote themselves; it returns the boots seen so far.
func (e *Env) checkUserUnits(ctx context.Context, r *Report, in *Instance, boot, pod string, boots []string) []string {
	s := time.Now()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	var ev *Evidence
	var err error
	// The timer fires 2 s after it starts: give it a few probe rounds.
	for try := 0; try < 5; try++ {
		if ev, err = e.ReadEvidence(sctx, in, fmt.Sprintf("%s-%d", pod, try)); err != nil {
			break
		}
		if err = ev.Judge(append(boots, ev.BootID)); err == nil || len(ev.Runs["tick"]) > len(boots) {
			break
		}
		time.Sleep(10 * time.Second)
	}
	detail := ""
	if ev != nil {
		b, _ := json.Marshal(ev)
		detail = string(b)
		boots = append(boots, ev.BootID)
	}
	r.add("launch template units ran: oneshot, long-running, timer; kubelet drop-in and sysctl.d file in effect ("+boot+")", s, err, detail)
	return boots
}

// b64 is the probe's put-etc content encoding.
func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
