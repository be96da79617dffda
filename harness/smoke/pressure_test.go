package smoke

import (
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/harness/cluster"
)

func TestJudgeConditionFalseMemoryPressure(t *testing.T) {
	node := func(c map[string]cluster.Condition) *cluster.Node { return &cluster.Node{Name: "n", Conditions: c} }
	if err := JudgeConditionFalse(node(map[string]cluster.Condition{"MemoryPressure": {Status: "False"}}), "MemoryPressure", "before"); err != nil {
		t.Fatal(err)
	}
	for name, n := range map[string]*cluster.Node{
		"missing": node(nil),
		"true":    node(map[string]cluster.Condition{"MemoryPressure": {Status: "True", Reason: "KubeletHasInsufficientMemory"}}),
		"unknown": node(map[string]cluster.Condition{"MemoryPressure": {Status: "Unknown"}}),
	} {
		if err := JudgeConditionFalse(n, "MemoryPressure", "before"); err == nil {
			t.Errorf("%s: passed", name)
		}
	}
}

func TestJudgePressureOn(t *testing.T) {
	created := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	on := cluster.Condition{Status: "True", Reason: "KubeletHasInsufficientMemory", LastTransitionTime: created.Add(25 * time.Second)}
	off := cluster.Condition{Status: "False", Reason: "KubeletHasSufficientMemory"}
	ok := []pressureSample{{At: created.Add(12 * time.Second), Ready: true, MemoryPressure: off}, {At: created.Add(26 * time.Second), Ready: true, MemoryPressure: on}}
	if _, err := JudgePressureOn(ok, created); err != nil {
		t.Fatal(err)
	}
	early := on
	early.LastTransitionTime = created.Add(-time.Minute)
	notReady := append([]pressureSample(nil), ok...)
	notReady[0].Ready = false
	for name, c := range map[string]struct {
		samples []pressureSample
		want    string
	}{
		"never true":     {ok[:1], "still False"},
		"none":           {nil, "no Node"},
		"true too early": {[]pressureSample{{At: created.Add(26 * time.Second), Ready: true, MemoryPressure: early}}, "before the unit filled"},
		"not ready":      {notReady, "not Ready"},
	} {
		_, err := JudgePressureOn(c.samples, created)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, c.want)
		}
	}
}

func TestJudgePressureOff(t *testing.T) {
	released := time.Date(2026, 12, 3, 8, 1, 10, 0, time.UTC)
	before := map[string]any{"kubelet.service": "MainPID=812 NRestarts=0", "containerd.service": "MainPID=700 NRestarts=0",
		"drover-agent.service": "MainPID=300 NRestarts=0", "unit": "drover-smoke-pressure.service"}
	after := map[string]any{"kubelet.service": "MainPID=812 NRestarts=0", "containerd.service": "MainPID=700 NRestarts=0",
		"drover-agent.service": "MainPID=300 NRestarts=0"}
	node := func(c cluster.Condition) *cluster.Node {
		return &cluster.Node{Name: "n", Conditions: map[string]cluster.Condition{"MemoryPressure": c}}
	}
	good := cluster.Condition{Status: "False", Reason: "KubeletHasSufficientMemory", LastTransitionTime: released.Add(5 * time.Minute)}
	if _, err := JudgePressureOff(node(good), released, before, after); err != nil {
		t.Fatal(err)
	}
	restarted := map[string]any{"kubelet.service": "MainPID=812 NRestarts=0", "containerd.service": "MainPID=1900 NRestarts=1",
		"drover-agent.service": "MainPID=300 NRestarts=0"}
	early := good
	early.LastTransitionTime = released.Add(-30 * time.Second)
	for name, c := range map[string]struct {
		n     *cluster.Node
		after map[string]any
		want  string
	}{
		"still true":           {node(cluster.Condition{Status: "True"}), after, "still True"},
		"false while held":     {node(early), after, "while the memory was still held"},
		"containerd restarted": {node(good), restarted, "containerd.service restarted"},
		"no pids":              {node(good), map[string]any{}, "no MainPID"},
	} {
		_, err := JudgePressureOff(c.n, released, before, c.after)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, c.want)
		}
	}
}
