package ignition

import (
	"context"
	"os"
	"testing"
)

// TestPlanGolden pins the printed plan of the richest fixture: every step
// kind, owners by name and id, modes, the managed paths and their digests.
func TestPlanGolden(t *testing.T) {
	data, err := os.ReadFile("../../testdata/ignition/07-spec-3.5.0-rich.ign")
	must(t, err)
	plan, err := Prepare(context.Background(), data, testOptions)
	must(t, err)
	got := plan.String()
	const golden = "testdata/plan.golden"
	if *update {
		must(t, os.WriteFile(golden, []byte(got), 0o644))
	}
	want, err := os.ReadFile(golden)
	must(t, err)
	if got != string(want) {
		t.Errorf("plan differs from %s (run with -update after an intended change)\ngot:\n%s", golden, got)
	}
}

// TestPlanSteps checks the pieces Plan derives from the config: modes,
// the pure order (parents first) and Keep for files without contents.
func TestPlanSteps(t *testing.T) {
	data := []byte(`{"ignition":{"version":"3.5.0"},"storage":{
		"files":[{"path":"/etc/opt/a/b/c","contents":{"source":"data:,c"}},{"path":"/etc/opt/a/top","contents":{"source":"data:,t"},"mode":384},{"path":"/etc/opt/keep"}],
		"directories":[{"path":"/var/lib/x/y"},{"path":"/var/lib/x","mode":448}]}}`)
	cfg, err := Parse(data)
	must(t, err)
	plan, err := Plan(cfg)
	must(t, err)
	want := []string{
		"directory /var/lib/x mode 0700",
		"directory /var/lib/x/y mode 0755 if created",
		"file /etc/opt/keep keep contents or create empty mode 0644 if created",
		"file /etc/opt/a/top 1 bytes sha256 e3b98a4da31a127d4bde6e43033f66ba274cab0eb7eb1c70ec41402bf6273dd8 mode 0600",
		"file /etc/opt/a/b/c 1 bytes sha256 2e7d2c03a9507ae265ecf5b5356885a53393a2029d241394997265a1a25aefc6 mode 0644",
	}
	if len(plan.Steps) != len(want) {
		t.Fatalf("got %d steps:\n%s", len(plan.Steps), plan)
	}
	for i, s := range plan.Steps {
		if s.String() != want[i] {
			t.Errorf("step %d: got %q, want %q", i, s, want[i])
		}
	}
}

// TestPlanNeedsResolve: a plan cannot be made while remote contents are
// unknown, and says what to do.
func TestPlanNeedsResolve(t *testing.T) {
	data, err := os.ReadFile("../../testdata/ignition/13-http-sha256.ign")
	must(t, err)
	cfg, err := Parse(data)
	must(t, err)
	if _, err := Plan(cfg); err == nil || err.Error() != "ignition config refused: $.storage.files[0]: contents of /etc/opt/app.conf have not been fetched — call Resolve with a Fetcher before Plan" {
		t.Fatalf("Plan before Resolve: %v", err)
	}
	must(t, Resolve(context.Background(), cfg, testFetcher))
	if _, err := Plan(cfg); err != nil {
		t.Fatalf("Plan after Resolve: %v", err)
	}
}
