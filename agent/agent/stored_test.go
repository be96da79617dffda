package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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

// plantUnit adds an enabled unit to the stored config, as a privileged
// pod could.
func plantUnit(t *testing.T, r *rig) {
	t.Helper()
	p := filepath.Join(r.root, StoredConfig)
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["systemd"] = map[string]any{"units": []any{map[string]any{"name": "planted.service", "enabled": true,
		"contents": "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"}}}
	edited, _ := json.Marshal(cfg)
	if err := os.WriteFile(p, edited, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestStateOnVarDecidesNothing: the two rounds of a privileged pod's
// persistence attempt. First it edits the stored config and deletes its
// digest (so the edit cannot be told from a changed user-data by the
// digest alone); then it deletes the stored config and plants remote
// contents. Each time the next boot applies the instance's user-data and
// nothing planted, reports the drift, stays joined, keeps the token
// redacted, and writes the stored copy and its digest again.
func TestStateOnVarDecidesNothing(t *testing.T) {
	ud := userData(t, "v1")
	r := newRig(t, ud)
	if err := r.agent().Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	redacted, _ := os.ReadFile(filepath.Join(r.root, StoredConfig))
	planted := []byte("[Service]\nExecStart=/bin/sh -c 'echo planted'\n")
	rounds := []struct {
		name   string
		tamper func()
	}{
		{"stored config edited, digest deleted", func() {
			plantUnit(t, r)
			os.Remove(filepath.Join(r.root, StoredDigest))
		}},
		{"stored config deleted, remote contents planted", func() {
			os.Remove(filepath.Join(r.root, StoredConfig))
			sum := sha256.Sum256(planted)
			dir := filepath.Join(r.root, ContentsDir)
			os.MkdirAll(dir, 0o700)
			os.WriteFile(filepath.Join(dir, "sha256-"+hex.EncodeToString(sum[:])), planted, 0o600)
			// and one under a hash its bytes do not have
			os.WriteFile(filepath.Join(dir, "sha256-"+strings.Repeat("0", 64)), planted, 0o600)
		}},
	}
	for _, round := range rounds {
		round.tamper()
		r.reboot()
		r.sd.Calls = nil
		a := r.agent()
		if err := a.Run(context.Background()); err != nil {
			t.Fatalf("%s: %v\n%s", round.name, err, strings.Join(r.log, "\n"))
		}
		log := strings.Join(r.log, "\n")
		if !strings.Contains(log, "DRIFT: ") || !strings.Contains(log, "the instance's user-data is applied instead") {
			t.Errorf("%s: no drift on the console:\n%s", round.name, log)
		}
		if d := a.known.list(); len(d) != 1 || d[0].Path != StoredConfig {
			t.Errorf("%s: known drift %v", round.name, d)
		}
		for _, c := range r.sd.Calls {
			if strings.Contains(c, "planted") {
				t.Errorf("%s: systemd call %q for the planted unit", round.name, c)
			}
		}
		if st, _ := status.Read(r.root); st.State != "joined" || !strings.Contains(st.Error, StoredConfig) {
			t.Errorf("%s: status %q %q, want joined with the drift named", round.name, st.State, st.Error)
		}
		if motd, _ := os.ReadFile(filepath.Join(r.root, "/etc/opt/motd")); string(motd) != "v1" {
			t.Errorf("%s: the user-data's file not applied: %q", round.name, motd)
		}
		if got, _ := os.ReadFile(filepath.Join(r.root, StoredConfig)); string(got) != string(redacted) {
			t.Errorf("%s: the stored config is not written again as the user-data's redacted form:\n%s", round.name, got)
		}
		if d, _ := os.ReadFile(filepath.Join(r.root, StoredDigest)); strings.TrimSpace(string(d)) != digest(ud) {
			t.Errorf("%s: %s = %q, want the user-data's digest again", round.name, StoredDigest, d)
		}
		noSecretLeft(t, r.root, round.name)
		if left, _ := os.ReadDir(filepath.Join(r.root, ContentsDir)); len(left) != 0 {
			t.Errorf("%s: planted remote contents left in %s: %v", round.name, ContentsDir, left)
		}
	}
	// The boot after: the restored stored copy is confirmed, no drift.
	r.reboot()
	a := r.agent()
	if err := a.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if log := strings.Join(r.log, "\n"); strings.Contains(log, "DRIFT") || !strings.Contains(log, "confirmed against it") {
		t.Errorf("the restored stored config is not confirmed:\n%s", log)
	}
}

// TestNoUserDataOnAProvisionedNodeFailsClosed: the user-data gone (404)
// on a node provisioned from one: nothing from /var is applied, no
// kubelet, and the status says why.
func TestNoUserDataOnAProvisionedNodeFailsClosed(t *testing.T) {
	r := newRig(t, userData(t, "v1"))
	if err := r.agent().Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.reboot()
	r.sd.Calls = nil
	r.prov.data, r.prov.present = nil, false
	err := r.agent().Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "has no user-data now") {
		t.Fatalf("want a refusal, got %v", err)
	}
	if fileExists(filepath.Join(r.root, "/etc/opt/motd")) || len(r.sd.Calls) != 0 {
		t.Errorf("applied or started without the user-data: calls %v", r.sd.Calls)
	}
	if st, _ := status.Read(r.root); st.State != "failed" || !strings.Contains(st.Error, "has no user-data now") {
		t.Errorf("status %q %q", st.State, st.Error)
	}
}
