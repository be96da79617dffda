package smoke

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Security is the probe's "security" report: systemd-analyze security's
// own verdict on a unit, and the capabilities its main process holds now.
type Security struct {
	Overall string   `json:"overall"`
	Exposed []string `json:"exposed"`
	PID     int      `json:"pid"`
	Caps    []string `json:"caps"`
	Error   string   `json:"error"`
}

// ProbeSecurity runs systemd-analyze security UNIT on the node.
func (e *Env) ProbeSecurity(ctx context.Context, in *Instance, pod, unit string) (*Security, error) {
	msg, err := e.probe(ctx, in, pod, []string{"security", unit})
	if err != nil {
		return nil, err
	}
	var s Security
	if err := json.Unmarshal([]byte(msg), &s); err != nil {
		return nil, fmt.Errorf("probe security report %q: %w", msg, err)
	}
	return &s, nil
}

// exposureLevels are systemd-analyze security's verdicts, best first.
var exposureLevels = []string{"PERFECT", "SAFE", "OK", "MEDIUM", "EXPOSED", "UNSAFE", "DANGEROUS"}

// MaxExposure is the worst verdict the agent's unit may get.
const MaxExposure = "MEDIUM"

// Exposure reads "→ Overall exposure level for X: 4.2 OK 🙂".
func Exposure(overall string) (score float64, level string, err error) {
	_, rest, ok := strings.Cut(overall, "Overall exposure level for ")
	if ok {
		_, rest, ok = strings.Cut(rest, ": ")
	}
	f := strings.Fields(rest)
	if !ok || len(f) < 2 {
		return 0, "", fmt.Errorf("no overall exposure level in systemd-analyze security's output %q", overall)
	}
	score, err = strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0, "", fmt.Errorf("exposure score %q: %w", f[0], err)
	}
	return score, f[1], nil
}

// JudgeExposure fails a verdict worse than MaxExposure.
func JudgeExposure(overall string) error {
	_, level, err := Exposure(overall)
	if err != nil {
		return err
	}
	rank := func(l string) int {
		for i, x := range exposureLevels {
			if x == l {
				return i
			}
		}
		return len(exposureLevels)
	}
	if rank(level) > rank(MaxExposure) {
		return fmt.Errorf("systemd-analyze security: %s — worse than %s", overall, MaxExposure)
	}
	return nil
}

// GuardCaps are the capabilities the resident drift guard keeps:
// CAP_DAC_READ_SEARCH (bit 2) and CAP_SYS_BOOT (bit 22, for logind's
// power-off on a spot reclaim notice).
const GuardCaps = "0000000000400004"

// JudgeGuardCaps checks the /proc/<pid>/status lines of the resident agent:
// nothing but CAP_DAC_READ_SEARCH and CAP_SYS_BOOT in its effective,
// permitted and bounding sets, none inheritable or ambient, and
// no_new_privs.
func JudgeGuardCaps(lines []string) error {
	got := map[string]string{}
	for _, l := range lines {
		k, v, _ := strings.Cut(l, ":")
		got[k] = strings.TrimSpace(v)
	}
	var probs []string
	for k, want := range map[string]string{"CapEff": GuardCaps, "CapPrm": GuardCaps, "CapBnd": GuardCaps,
		"CapInh": "0000000000000000", "CapAmb": "0000000000000000", "NoNewPrivs": "1"} {
		if got[k] != want {
			probs = append(probs, fmt.Sprintf("%s %q, want %s", k, got[k], want))
		}
	}
	if len(probs) > 0 {
		return fmt.Errorf("the resident drift guard holds more than CAP_DAC_READ_SEARCH and CAP_SYS_BOOT: %s", strings.Join(probs, "; "))
	}
	return nil
}

// checkSecurity adds the least-privilege checks: systemd's own score of
// drover-agent.service, and the resident guard's capabilities.
func (e *Env) checkSecurity(ctx context.Context, r *Report, in *Instance, pod string) {
	s := time.Now()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	var sec *Security
	var err error
	// The agent drops its capabilities right after the join it reported:
	// a probe scheduled at that moment may still see the provisioning set.
	for try := 0; try < 3; try++ {
		if sec, err = e.ProbeSecurity(sctx, in, fmt.Sprintf("%s-%d", pod, try), "drover-agent.service"); err != nil {
			break
		}
		if JudgeGuardCaps(sec.Caps) == nil {
			break
		}
		time.Sleep(10 * time.Second)
	}
	if err != nil {
		r.add("systemd-analyze security drover-agent.service (not worse than "+MaxExposure+")", s, err, "")
		return
	}
	r.add("systemd-analyze security drover-agent.service (not worse than "+MaxExposure+")", s, JudgeExposure(sec.Overall),
		sec.Overall+" | "+strings.Join(sec.Exposed, " | "))
	r.add("drift guard runs with CAP_DAC_READ_SEARCH and CAP_SYS_BOOT only (/proc/<pid>/status)", s, JudgeGuardCaps(sec.Caps), strings.Join(sec.Caps, "; "))
}
