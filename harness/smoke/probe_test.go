package smoke

import (
	"errors"
	"strings"
	"testing"

	"github.com/drover-os/drover/harness/cluster"
)

// TestProbeAnswer: the probe's report is its stdout without the newline,
// and only after an exit 0; a non-zero exit or a broken stream is an
// error, the exit's carrying what the probe printed.
func TestProbeAnswer(t *testing.T) {
	args := []string{"put-etc", "x"}
	msg, err := probeAnswer("drift-edit", args, "{\"written\":true}\n", nil)
	if err != nil || msg != `{"written":true}` {
		t.Fatalf("exit 0: got %q, %v", msg, err)
	}
	exit := &cluster.ExitError{Pod: "default/p", Code: 1, Stdout: "{\"written\":false,\"error\":\"read-only\"}\n", Stderr: "boom\n"}
	msg, err = probeAnswer("drift-edit", args, exit.Stdout, exit)
	if err == nil || msg != "" {
		t.Fatalf("exit 1: got %q, %v; want an error and no report", msg, err)
	}
	for _, want := range []string{"drift-edit", "put-etc x", "exited 1", `"error":"read-only"`, "boom"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("exit 1: error %q does not name %q", err, want)
		}
	}
	msg, err = probeAnswer("drift-edit", args, "{\"written\":tr", errors.New("stream reset"))
	if err == nil || msg != "" || !strings.Contains(err.Error(), "stream reset") {
		t.Fatalf("broken stream: got %q, %v", msg, err)
	}
}

// TestJudgeProbePod: ready once Running on its node; ended or elsewhere
// it never will be; pending, not yet.
func TestJudgeProbePod(t *testing.T) {
	for _, tc := range []struct {
		p          cluster.Pod
		done, fail bool
	}{
		{cluster.Pod{Name: "p", NodeName: "n", Phase: "Running"}, true, false},
		{cluster.Pod{Name: "p", NodeName: "n", Phase: "Pending"}, false, false},
		{cluster.Pod{Name: "p", Phase: "Pending"}, false, false},
		{cluster.Pod{Name: "p", NodeName: "other", Phase: "Running"}, true, true},
		{cluster.Pod{Name: "p", NodeName: "n", Phase: "Failed", Reason: "Terminated"}, true, true},
		{cluster.Pod{Name: "p", NodeName: "n", Phase: "Succeeded"}, true, true},
	} {
		done, err := judgeProbePod(&tc.p, "n")
		if done != tc.done || (err != nil) != tc.fail {
			t.Errorf("%+v: got %v, %v; want done %v, failed %v", tc.p, done, err, tc.done, tc.fail)
		}
	}
}

// TestProbePodName: each boot its own pod, a valid object name.
func TestProbePodName(t *testing.T) {
	a, b := probePodName("0b3b5d32-7c1e-4a8e-9a4e-2f4c1f0e9d11"), probePodName("6f1c2a55-1d7b-4c3e-8e2a-9b0d4c7e5a22")
	if a == b || a != "host-probe-0b3b5d32-7c1e-4a8e-9a4e-2f4c1f0e9d11" {
		t.Fatalf("got %q and %q", a, b)
	}
}
