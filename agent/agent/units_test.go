package agent

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/drover-os/drover/agent/status"
)

// withUnits adds systemd units to a user-data made by userData.
func withUnits(t *testing.T, data []byte, units ...map[string]any) []byte {
	var cfg map[string]any
	must(t, json.Unmarshal(data, &cfg))
	var list []any
	for _, u := range units {
		list = append(list, u)
	}
	cfg["systemd"] = map[string]any{"units": list}
	b, err := json.Marshal(cfg)
	must(t, err)
	return b
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestEnabledUnitsStarted: the config's enabled units are started, all in
// one StartAll after the reload that makes systemd see them, and each one's
// result is in the status file; a failed one is reported without stopping
// the join.
func TestEnabledUnitsStarted(t *testing.T) {
	data := withUnits(t, userData(t, "hello"),
		map[string]any{"name": "evidence.service", "enabled": true,
			"contents": "[Service]\nType=oneshot\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"},
		map[string]any{"name": "tick.timer", "enabled": true,
			"contents": "[Timer]\nOnActiveSec=5\n[Install]\nWantedBy=timers.target\n"},
		map[string]any{"name": "broken.service", "enabled": true,
			"contents": "[Service]\nExecStart=/bin/false\n[Install]\nRequiredBy=custom.target\n"},
		map[string]any{"name": "idle.service", "contents": "[Service]\nExecStart=/bin/true\n"})
	r := newRig(t, data)
	r.sd.Fail = map[string]error{"broken.service": errors.New("exit 1")}
	if err := r.agent().Run(context.Background()); err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(r.log, "\n"))
	}
	i := slices.Index(r.sd.Calls, "start-all evidence.service tick.timer broken.service")
	if i < 0 || slices.Index(r.sd.Calls, "reload") > i || slices.Index(r.sd.Calls, "reload") < 0 {
		t.Fatalf("want one start-all of the enabled units after the reload, calls %q", r.sd.Calls)
	}
	st, err := status.Read(r.root)
	must(t, err)
	if st.State != "joined" {
		t.Fatalf("a failed user unit must not stop the join: %+v", st)
	}
	want := []status.Unit{
		{Name: "evidence.service", State: "ok", Job: "done", ActiveState: "active", Result: "success"},
		{Name: "tick.timer", State: "ok", Job: "done", ActiveState: "active", Result: "success"},
		{Name: "broken.service", State: "failed", Job: "failed", ActiveState: "failed", Result: "exit-code"},
	}
	if !slices.Equal(st.Units, want) {
		t.Errorf("status units %+v\nwant %+v", st.Units, want)
	}
	var phase status.Phase
	for _, p := range st.Phases {
		if p.Name == "units" {
			phase = p
		}
	}
	if phase.Result != "ok" || !strings.Contains(phase.Detail, "1 of 3 enabled unit(s) FAILED: broken.service") {
		t.Errorf("units phase %+v", phase)
	}
	if !slices.ContainsFunc(r.log, func(l string) bool { return strings.Contains(l, "unit broken.service: job failed") }) {
		t.Errorf("no console line for the failed unit:\n%s", strings.Join(r.log, "\n"))
	}
}
