package agent

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/internal/secretscan"
)

// TestNoTokenInVarAfterReadyFails: a join that fails at the Ready phase
// (the kubelet has its certificate, the Node never becomes Ready) leaves
// no copy of the bootstrap token's secret in /var, in any encoding.
func TestNoTokenInVarAfterReadyFails(t *testing.T) {
	r := newRig(t, userData(t, "hello"))
	r.api.staleReady = true // Ready only from before this boot's kubelet: never this boot's
	a := r.agent()
	a.dl.Ready = 300 * time.Millisecond
	err := a.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "Ready") {
		t.Fatalf("want a failure at the ready phase, got %v", err)
	}
	if !strings.Contains(strings.Join(r.log, "\n"), "ready: FAILED") {
		t.Fatalf("the join did not fail at the ready phase:\n%s", strings.Join(r.log, "\n"))
	}
	if !fileExists(filepath.Join(r.root, StoredConfig)) {
		t.Fatal("no stored config: the scan below would prove nothing")
	}
	hits, err := secretscan.Tree(filepath.Join(r.root, "var"), []byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) > 0 {
		t.Fatalf("the bootstrap token's secret is in /var after the failed join: %v", hits)
	}
}
