package smoke

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/drover-os/drover/agent/agent"
	"github.com/drover-os/drover/agent/ignition"
	"github.com/drover-os/drover/harness/cluster"
)

// TestSmokeUnitsAccepted: the smoke's user-data with its units passes the
// agent's own validation, and the agent will start the three enabled units.
func TestSmokeUnitsAccepted(t *testing.T) {
	base, err := os.ReadFile("../../testdata/userdata/pool.ign")
	if err != nil {
		t.Fatal(err)
	}
	ud := poolUserData(t)
	if !HasSmokeUnits(ud) || HasSmokeUnits(base) {
		t.Fatal("HasSmokeUnits must tell the two apart")
	}
	plan, err := ignition.Prepare(context.Background(), ud, agent.Options(nil))
	if err != nil {
		t.Fatalf("the agent refuses the smoke user-data: %v", err)
	}
	if want := []string{OneshotUnit, LongUnit, TimerUnit}; !slices.Equal(plan.Start, want) {
		t.Errorf("the agent would start %q, want %q", plan.Start, want)
	}
}

func goodEvidence(boots ...string) *Evidence {
	ev := &Evidence{BootID: boots[len(boots)-1], Runs: map[string][]EvidenceRun{}, Units: map[string]UnitState{
		OneshotUnit:  {"inactive", "dead", "success"},
		LongUnit:     {"active", "running", "success"},
		TimerUnit:    {"active", "elapsed", "success"},
		TimerService: {"inactive", "dead", "success"},
	}}
	for _, b := range boots {
		for _, f := range []string{"oneshot", "long", "tick"} {
			ev.Runs[f] = append(ev.Runs[f], EvidenceRun{BootID: b, PID: 100})
		}
	}
	v := DropinValue
	ev.KubeletEnv = &v
	ev.MaxMapCount = SysctlValue
	last := &ev.Runs["long"][len(boots)-1]
	last.Alive, last.Comm = true, "sleep"
	return ev
}

func TestEvidenceJudge(t *testing.T) {
	if err := goodEvidence("b1").Judge([]string{"b1"}); err != nil {
		t.Errorf("first boot: %v", err)
	}
	if err := goodEvidence("b1", "b2").Judge([]string{"b1", "b2"}); err != nil {
		t.Errorf("after the reboot: %v", err)
	}
	cases := map[string]func(ev *Evidence) []string{
		"the oneshot did not run after the reboot": func(ev *Evidence) []string {
			ev.Runs["oneshot"] = ev.Runs["oneshot"][:1]
			return []string{"b1", "b2"}
		},
		"the timer never fired": func(ev *Evidence) []string { delete(ev.Runs, "tick"); return []string{"b1", "b2"} },
		"the long-running unit died": func(ev *Evidence) []string {
			ev.Runs["long"][1].Alive = false
			return []string{"b1", "b2"}
		},
		"the oneshot failed": func(ev *Evidence) []string {
			ev.Units[OneshotUnit] = UnitState{"failed", "failed", "exit-code"}
			return []string{"b1", "b2"}
		},
		"the kubelet started without its drop-in":   func(ev *Evidence) []string { ev.KubeletEnv = nil; return []string{"b1", "b2"} },
		"the user-data's sysctl.d file not applied": func(ev *Evidence) []string { ev.MaxMapCount = "65530"; return []string{"b1", "b2"} },
		"no reboot happened":                        func(ev *Evidence) []string { return []string{"b2", "b2"} },
		"another boot is current":                   func(ev *Evidence) []string { ev.BootID = "b3"; return []string{"b1", "b2"} },
	}
	for name, breakIt := range cases {
		ev := goodEvidence("b1", "b2")
		if err := ev.Judge(breakIt(ev)); err == nil {
			t.Errorf("%s: Judge passed", name)
		}
	}
}

func TestJudgeExposure(t *testing.T) {
	for line, ok := range map[string]bool{
		"→ Overall exposure level for drover-agent.service: 4.3 OK 🙂":      true,
		"→ Overall exposure level for drover-agent.service: 6.9 MEDIUM 😐":  true,
		"→ Overall exposure level for drover-agent.service: 8.4 EXPOSED 🙁": false,
		"→ Overall exposure level for drover-agent.service: 9.6 UNSAFE 😨":  false,
		"": false,
	} {
		if err := JudgeExposure(line); (err == nil) != ok {
			t.Errorf("%q: %v", line, err)
		}
	}
}

func TestJudgeGuardCaps(t *testing.T) {
	good := []string{"CapInh: 0000000000000000", "CapPrm: 0000000000400004", "CapEff: 0000000000400004",
		"CapBnd: 0000000000400004", "CapAmb: 0000000000000000", "NoNewPrivs: 1", "Seccomp: 2"}
	if err := JudgeGuardCaps(good); err != nil {
		t.Error(err)
	}
	bad := slices.Clone(good)
	bad[3] = "CapBnd: 00000000002011ef" // the provisioning set
	if err := JudgeGuardCaps(bad); err == nil || !strings.Contains(err.Error(), "CapBnd") {
		t.Errorf("provisioning bounding set passed: %v", err)
	}
	if err := JudgeGuardCaps(nil); err == nil {
		t.Error("no /proc status lines passed")
	}
}

func TestJudgeDrift(t *testing.T) {
	msg := "local change to what the node is meant to hold: " + EvidenceScript + " contents (want a, got b); " + EvidenceScript + " mode (want 0755, got 0700)"
	n := &cluster.Node{Name: "n", Conditions: map[string]cluster.Condition{DriftCondition: {Status: "True", Reason: "LocalChange", Message: msg}}}
	ev := []cluster.Event{{Type: "Warning", Reason: "ConfigDrift", InvolvedKind: "Node", InvolvedName: "n", Message: msg}}
	if err := JudgeDrift(n, ev, EvidenceScript, "contents", "mode"); err != nil {
		t.Error(err)
	}
	if err := JudgeDrift(n, append(ev, ev[0]), EvidenceScript); err == nil {
		t.Error("two events for one change passed")
	}
	if err := JudgeDrift(n, nil, EvidenceScript); err == nil {
		t.Error("no event passed")
	}
	if err := JudgeDrift(n, ev, EvidenceScript, "owner"); err == nil {
		t.Error("an unreported kind of change passed")
	}
	if err := JudgeDriftCleared(n); err == nil {
		t.Error("a True condition passed as cleared")
	}
	n.Conditions[DriftCondition] = cluster.Condition{Status: "False", Reason: "NoDrift"}
	if err := JudgeDrift(n, ev, EvidenceScript); err == nil || JudgeDriftCleared(n) != nil {
		t.Error("False condition judged wrong")
	}
}
