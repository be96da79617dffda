package smoke

import (
	"strings"
	"testing"

	"github.com/drover-os/drover/harness/cluster"
	"github.com/drover-os/drover/harness/qemu"
)

// TestReadyFromNewBoot: a Node is joined from this boot only when Ready
// and posted from a boot other than the last join's.
func TestReadyFromNewBoot(t *testing.T) {
	node := func(status, reason, boot string) *cluster.Node {
		n := &cluster.Node{BootID: boot, Conditions: map[string]cluster.Condition{}}
		if status != "" {
			n.Conditions["Ready"] = cluster.Condition{Status: status, Reason: reason}
			n.Ready, n.ReadyReason = status == "True", reason
		}
		return n
	}
	for _, tc := range []struct {
		n          *cluster.Node
		prev, want string
	}{
		{node("True", "KubeletReady", "b1"), "", ""},
		{node("True", "KubeletReady", "b2"), "b1", ""},
		{node("True", "KubeletReady", "b1"), "b1", "posted from boot b1, the one before the reboot"},
		{node("True", "KubeletReady", ""), "", "no nodeInfo.bootID"},
		{node("Unknown", "NodeRebooted", "b1"), "b1", "Ready is not True: NodeRebooted"},
		{node("False", "KubeletNotReady", "b2"), "b1", "Ready is not True: KubeletNotReady"},
		{node("", "", ""), "", "no Ready condition posted"},
	} {
		err := readyFromNewBoot(tc.n, tc.prev)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Node %+v after boot %q: %v, want %q", tc.n, tc.prev, err, tc.want)
		}
	}
}

func TestJoinDetailNamesTheBytesRead(t *testing.T) {
	got := joinDetail("metadata: 30% errors", qemu.BlockStats{ReadBytes: 123731968, ReadOps: 5012})
	if want := "metadata: 30% errors; system disk read until Ready: 118.0 MiB in 5012 requests"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
