//go:build integration

package cluster

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testVersion is the default recipe's kubelet version (recipes/ecs-node.yaml);
// the control plane matches it.
const testVersion = "v1.37.2"

// testCacheDir is shared between runs so that only the first run builds.
func testCacheDir() string { return filepath.Join(os.TempDir(), "drover-cluster-cache") }

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Helper()
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestIntegrationBinaries builds (or finds cached) the control-plane
// binaries and checks that each reports the version it was stamped with.
func TestIntegrationBinaries(t *testing.T) {
	ctx := context.Background()
	buildLog, err := os.Create(filepath.Join(t.TempDir(), "build.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer buildLog.Close()
	start := time.Now()
	bins, err := BuildBinaries(ctx, testCacheDir(), testVersion, testLog{t}, buildLog)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("BuildBinaries took %s", time.Since(start).Round(time.Second))
	for _, p := range []string{bins.APIServer, bins.ControllerManager} {
		dst := filepath.Join(t.TempDir(), "bin")
		if err := install(p, dst); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(dst, "--version").CombinedOutput()
		if err != nil {
			t.Fatalf("%s --version: %v\n%s", p, err, out)
		}
		if got := strings.TrimSpace(string(out)); got != "Kubernetes "+testVersion {
			t.Errorf("%s --version = %q, want %q", p, got, "Kubernetes "+testVersion)
		}
	}
}
