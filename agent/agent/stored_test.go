package agent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-os/drover/agent/status"
)

// reboot simulates a reboot of the rig's node: a fresh /etc, /var kept.
func (r *rig) reboot() {
	os.RemoveAll(filepath.Join(r.root, "etc"))
	r.log = nil
}

// TestStoredConfigConfirmed: on a later boot the stored (redacted) config
// is confirmed against the unchanged user-data — no drift, units start.
func TestStoredConfigConfirmed(t *testing.T) {
	r := newRig(t, userData(t, "v1"))
	if err := r.agent().Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	stored, _ := os.ReadFile(filepath.Join(r.root, StoredConfig))
	if string(stored) == string(r.prov.data) {
		t.Fatal("the stored config was not redacted: this test needs a redacted one")
	}
	r.reboot()
	a := r.agent()
	if err := a.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	log := strings.Join(r.log, "\n")
	if strings.Contains(log, "DRIFT") || len(a.known.list()) > 0 || !strings.Contains(log, "stored config confirmed against it") {
		t.Fatalf("a redacted stored config of the same user-data is not confirmed:\n%s", log)
	}
}

// TestEditedStoredConfigIsDrift: root on the node (a privileged pod)
// edits the stored config to add a unit; on the next boot the agent finds
// the stored config is not the user-data's, reports it as drift, and does
// not start the added unit.
func TestEditedStoredConfigIsDrift(t *testing.T) {
	r := newRig(t, userData(t, "v1"))
	if err := r.agent().Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(r.root, StoredConfig)
	raw, _ := os.ReadFile(p)
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["systemd"] = map[string]any{"units": []any{map[string]any{"name": "planted.service", "enabled": true,
		"contents": "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"}}}
	edited, _ := json.Marshal(cfg)
	os.WriteFile(p, edited, 0o600)
	r.reboot()
	a := r.agent()
	if err := a.Run(context.Background()); err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(r.log, "\n"))
	}
	if r.sd.Called("start planted.service") {
		t.Error("the planted unit was started")
	}
	for _, c := range r.sd.Calls {
		if strings.Contains(c, "planted") {
			t.Errorf("systemd call %q for the planted unit", c)
		}
	}
	log := strings.Join(r.log, "\n")
	if !strings.Contains(log, "DRIFT: "+StoredConfig) || !strings.Contains(log, "changed on the node") {
		t.Errorf("no drift on the console:\n%s", log)
	}
	d := a.known.list()
	if len(d) != 1 || d[0].Path != StoredConfig {
		t.Errorf("known drift %v", d)
	}
	found := false
	for _, x := range a.checkAll() {
		found = found || x.Path == StoredConfig
	}
	if !found {
		t.Errorf("the guard's round does not report %s: %v", StoredConfig, a.checkAll())
	}
	st, _ := status.Read(r.root)
	if !strings.Contains(st.Error, StoredConfig) {
		t.Errorf("status error %q does not name %s", st.Error, StoredConfig)
	}
}
