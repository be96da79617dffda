package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// User-data the agent refuses stops drover rollout before any API call:
// the endpoints here answer nothing, so reaching one would fail otherwise.
func TestRolloutRefusesUserDataTheAgentRefuses(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	ud := filepath.Join(dir, "bad.ign")
	os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600)
	os.WriteFile(ud, []byte(`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/motd","contents":{"source":"data:,x"}}]}}`), 0o600)
	t.Setenv("ALIBABA_CLOUD_ACCESS_KEY_ID", "LTAI-x")
	t.Setenv("ALIBABA_CLOUD_ACCESS_KEY_SECRET", "y")
	t.Setenv("DROVER_ECS_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("DROVER_ESS_ENDPOINT", "http://127.0.0.1:1")
	_, stderr, code := drover(t, "rollout", "--region", "cn-hangzhou", "--scaling-group", "asg-x", "--image", "m-x",
		"--userdata", ud, "--kubeconfig", kc)
	if code != 1 || !strings.Contains(stderr, "no /etc/drover/node.yaml") || !strings.Contains(stderr, ud) {
		t.Errorf("exit %d, stderr %q: want 1 and the agent's refusal naming the file", code, stderr)
	}
}
