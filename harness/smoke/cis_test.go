package smoke

import (
	"strings"
	"testing"

	"github.com/drover-os/drover/harness/cis"
)

// TestJudgeCIS: the smoke's CIS line fails naming each failed check's ID,
// and when the probe could not read something, even if no check failed.
func TestJudgeCIS(t *testing.T) {
	if _, _, err := JudgeCIS(&cis.Evidence{}); err == nil || !strings.Contains(err.Error(), "CIS ACK 1.0 4.1.1 FAIL") ||
		!strings.Contains(err.Error(), "CIS ACK 1.0 4.2.1 FAIL") {
		t.Errorf("empty evidence: %v", err)
	}
	_, failed, err := JudgeCIS(&cis.Evidence{Errors: []string{"kubelet.service has no main process"}})
	if err == nil || !strings.Contains(err.Error(), "could not read: kubelet.service has no main process") || len(failed) == 0 {
		t.Errorf("probe errors: %v", err)
	}
}
