//go:build e2e

package e2e

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEcsNodeJoins builds the default recipe and runs the pipeline's gate
// on it: drover smoke with every check — join through a hardened metadata
// service answering 30% of requests with errors, providerID and labels, a
// Pod from the local registry, node hardening, a reboot (stored config,
// /etc edit gone, changed user-data refused) and a policy-breaking
// user-data that must not join. The JUnit report must list every check as
// passed.
func TestEcsNodeJoins(t *testing.T) {
	work, err := os.MkdirTemp("", "drover-e2e-ecs-node-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	out := filepath.Join(work, "out")
	run(t, bin("drover"), "build", filepath.Join(repo, "recipes", "ecs-node.yaml"), "-o", out,
		"--agent", bin("drover-agent"), "--init", bin("drover-init"))
	raw := filepath.Join(out, "ecs-node.raw")
	for _, f := range []string{"ecs-node.raw", "ecs-node.qcow2", "ecs-node.vhd", "ecs-node.manifest.json", "ecs-node.spdx.json", "ecs-node.provenance.json"} {
		fi, err := os.Stat(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%-26s %6.1f MiB", f, float64(fi.Size())/(1<<20))
	}
	junit := filepath.Join(work, "smoke.xml")
	// The control plane binaries are cached across runs, like the kubelet.
	cache := filepath.Join(os.TempDir(), "drover-cluster-cache")
	console := run(t, bin("drover"), "smoke", raw, "--work", filepath.Join(work, "smoke"), "--cache", cache,
		"--reboot", "--policy-check", "--metadata-errors", "0.3", "--junit", junit)
	t.Logf("drover smoke:\n%s", console)
	data, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	var suite struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Cases    []struct {
			Name    string    `xml:"name,attr"`
			Failure *struct{} `xml:"failure"`
		} `xml:"testcase"`
	}
	if err := xml.Unmarshal(data, &suite); err != nil {
		t.Fatal(err)
	}
	want := []string{"node joins and is Ready", "providerID and ECS labels", "pod from the local registry runs to completion",
		"node hardening", "Ready again after the reboot", "changed user-data refused", "/etc edit gone", "refusal on the console",
		"refusal in the status file", "refused node does not join"}
	for _, w := range want {
		found := false
		for _, c := range suite.Cases {
			if strings.HasPrefix(c.Name, w) {
				found = true
				if c.Failure != nil {
					t.Errorf("check %q failed", c.Name)
				}
			}
		}
		if !found {
			t.Errorf("check %q missing from the JUnit report", w)
		}
	}
	if suite.Failures != 0 {
		t.Errorf("%d of %d smoke checks failed", suite.Failures, suite.Tests)
	}
}
