package smoke

import "testing"

// TestRuntimeVersion: containerd's CRI reports its version without the
// module version's v, after its name.
func TestRuntimeVersion(t *testing.T) {
	if got := (Versions{Kubelet: "v1.37.2", Containerd: "v2.4.2"}).RuntimeVersion(); got != "containerd://2.4.2" {
		t.Errorf("RuntimeVersion = %q, want containerd://2.4.2", got)
	}
}
