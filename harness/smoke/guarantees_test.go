package smoke

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/drover-os/drover/agent/agent"
	"github.com/drover-os/drover/agent/ignition"
	"github.com/drover-os/drover/agent/status"
	"github.com/drover-os/drover/harness/cluster"
)

func poolUserData(t *testing.T) []byte {
	base, err := os.ReadFile("../../testdata/userdata/pool.ign")
	if err != nil {
		t.Fatal(err)
	}
	ud, err := WithSmokeUnits(base)
	if err != nil {
		t.Fatal(err)
	}
	return ud
}

// TestGuaranteeUserDataPassesThePolicy: the guarantee boot tests the
// effect check only while the static policy lets its override through;
// the double-gzip boot only while drover validate refuses it.
func TestGuaranteeUserDataPassesThePolicy(t *testing.T) {
	ud, err := GuaranteeUserData(poolUserData(t))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := ignition.Prepare(context.Background(), ud, agent.Options(nil))
	if err != nil {
		t.Fatalf("the static policy refuses the run-time override: %v", err)
	}
	if !strings.Contains(strings.Join(plan.Start, " "), OverrideUnit) {
		t.Errorf("the agent would not start %s: %v", OverrideUnit, plan.Start)
	}
	if ps := ignition.Validate(DoubleGzip(poolUserData(t)), agent.Options(nil)); len(ps) == 0 {
		t.Error("drover validate accepts double-gzipped user-data")
	}
}

func TestJudgeGuaranteeRefusal(t *testing.T) {
	const line = "[  41.2] kubelet: FAILED: GUARANTEE BROKEN: kubelet.service is the image's unit with the image's and the config's drop-ins only: drop-in " + OverrideDropIn + " is neither the image's nor the applied config's (changed by " + OverrideDropIn + ")"
	good := &status.Status{State: "failed", Error: line[strings.Index(line, "GUARANTEE"):]}
	if err := JudgeGuaranteeRefusal(line, good, OverrideDropIn); err != nil {
		t.Fatalf("a good refusal: %v", err)
	}
	for name, c := range map[string]struct {
		line string
		st   *status.Status
	}{
		"no console line":         {"", good},
		"another failure":         {"[  41.2] kubelet: FAILED: waiting for kubelet healthz", good},
		"file not named":          {strings.ReplaceAll(line, OverrideDropIn, "?"), good},
		"no status":               {line, nil},
		"status joined":           {line, &status.Status{State: "joined", Error: good.Error}},
		"status without the file": {line, &status.Status{State: "failed", Error: "GUARANTEE BROKEN: something"}},
	} {
		if err := JudgeGuaranteeRefusal(c.line, c.st, OverrideDropIn); err == nil {
			t.Errorf("%s: passed", name)
		}
	}
}

func TestJudgeNotReady(t *testing.T) {
	notFound := &cluster.APIError{Code: 404, Reason: "NotFound"}
	if err := JudgeNotReady("n", nil, notFound); err != nil {
		t.Errorf("absent node: %v", err)
	}
	if err := JudgeNotReady("n", &cluster.Node{Name: "n"}, nil); err != nil {
		t.Errorf("registered, not Ready: %v", err)
	}
	for name, c := range map[string]struct {
		n   *cluster.Node
		err error
	}{
		"Ready":             {&cluster.Node{Name: "n", Ready: true}, nil},
		"API unreachable":   {nil, errors.New("connection refused")},
		"forbidden":         {nil, &cluster.APIError{Code: 403, Reason: "Forbidden"}},
		"no node, no error": {nil, nil},
	} {
		func() {
			defer func() {
				if recover() != nil {
					t.Errorf("%s: panicked", name)
				}
			}()
			if err := JudgeNotReady("n", c.n, c.err); err == nil {
				t.Errorf("%s: passed", name)
			}
		}()
	}
}

func TestJudgePlantedNotRun(t *testing.T) {
	if err := JudgePlantedNotRun(`{"path":"/var/lib/drover-smoke/planted","exists":false}`); err != nil {
		t.Fatalf("absent: %v", err)
	}
	for _, bad := range []string{
		`{"path":"/var/lib/drover-smoke/planted","exists":true}`,
		`{"path":"/var/lib/drover-smoke/planted","exists":false,"error":"permission denied"}`,
		`{"path":"/var/lib/drover-smoke/planted"}`,
		`not json`,
		``,
	} {
		if err := JudgePlantedNotRun(bad); err == nil {
			t.Errorf("%q passed", bad)
		}
	}
}

func TestJudgePlanted(t *testing.T) {
	if err := JudgePlanted(`{"planted":true,"after":"x"}`); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{`{"planted":false,"error":"no such file"}`, `{}`, `nope`} {
		if err := JudgePlanted(bad); err == nil {
			t.Errorf("%q passed", bad)
		}
	}
}

func TestStoredConfigGot(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	if got := StoredConfigGot(`{"planted":true,"after":"` + sum + `"}`); got != sum[:12] {
		t.Errorf("got %q, want %q", got, sum[:12])
	}
	for _, msg := range []string{`{"planted":true,"storedDeleted":true}`, `{"after":"abc"}`, `nope`} {
		if got := StoredConfigGot(msg); got != "missing" {
			t.Errorf("%s: got %q, want missing", msg, got)
		}
	}
}

func TestJudgeStoredDrift(t *testing.T) {
	const path = "/var/lib/drover/config.ign"
	// What a boot finds, and what the guard of the boot before saw.
	found := func(got string) string {
		return "local change to what the node is meant to hold: " + path + " contents (want the user-data's (sha256 ed33864401e9, token redacted), got " + got + ")"
	}
	guard := func(got string) string {
		return "local change to what the node is meant to hold: " + path + " contents (want e2a4585e9f96, got " + got + "); /var/lib/drover/config.sha256 presence (want present, got missing)"
	}
	ev := func(msg string) cluster.Event {
		return cluster.Event{Type: "Warning", Reason: "ConfigDrift", InvolvedKind: "Node", InvolvedName: "n", Message: msg}
	}
	n := &cluster.Node{Name: "n", Conditions: map[string]cluster.Condition{DriftCondition: {Status: "True", Message: found("missing")}}}
	// The guard's Events of the boot before, of the same file and even the
	// same finding, do not count.
	if err := JudgeStoredDrift(n, []cluster.Event{ev(guard("0123456789ab")), ev(guard("missing")), ev(found("0123456789ab")), ev(found("missing"))}, path, "missing"); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		cond string
		ev   []cluster.Event
	}{
		"only the guard's Event":    {"True", []cluster.Event{ev(guard("missing"))}},
		"another finding's Event":   {"True", []cluster.Event{ev(found("0123456789ab"))}},
		"two Events of the finding": {"True", []cluster.Event{ev(found("missing")), ev(found("missing"))}},
		"condition False":           {"False", []cluster.Event{ev(found("missing"))}},
	} {
		n.Conditions[DriftCondition] = cluster.Condition{Status: c.cond, Message: found("missing")}
		if err := JudgeStoredDrift(n, c.ev, path, "missing"); err == nil {
			t.Errorf("%s passed", name)
		}
	}
	n.Conditions[DriftCondition] = cluster.Condition{Status: "True", Message: guard("missing")}
	if err := JudgeStoredDrift(n, []cluster.Event{ev(found("missing"))}, path, "missing"); err == nil {
		t.Error("a condition of the guard's finding passed")
	}
}

func TestJudgeFailedClosed(t *testing.T) {
	const want = "configuration is immutable"
	st := &status.Status{State: "failed", Error: "the user-data changed since the first boot …: " + want,
		Phases: []status.Phase{{Name: "start"}, {Name: "kernel"}, {Name: "config"}}}
	if err := JudgeFailedClosed(st, want); err != nil {
		t.Fatal(err)
	}
	applied := *st
	applied.Phases = append(append([]status.Phase(nil), st.Phases...), status.Phase{Name: "apply"})
	if err := JudgeFailedClosed(&applied, want); err == nil || !strings.Contains(err.Error(), "apply") {
		t.Errorf("a refused boot that applied passed: %v", err)
	}
	joined := *st
	joined.State = "joined"
	if err := JudgeFailedClosed(&joined, want); err == nil {
		t.Error("a joined node passed")
	}
	if err := JudgeFailedClosed(nil, want); err == nil {
		t.Error("no status passed")
	}
}
