package qemu

import (
	"slices"
	"testing"
)

// TestArgsExtra: extra arguments come last, in order and unsplit (an
// -smbios value carries commas).
func TestArgsExtra(t *testing.T) {
	c := testConfig()
	extra := []string{"-smbios", "type=11,value=io.systemd.stub.kernel-cmdline-extra=drover.smbiostest=1"}
	c.ExtraArgs = extra
	a := c.Args(false)
	if len(a) < len(extra) || !slices.Equal(a[len(a)-len(extra):], extra) {
		t.Errorf("args %q do not end in %q", a, extra)
	}
	if got := len(a) - len(testConfig().Args(false)); got != len(extra) {
		t.Errorf("extra args added %d arguments, want %d", got, len(extra))
	}
}
