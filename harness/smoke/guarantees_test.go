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
