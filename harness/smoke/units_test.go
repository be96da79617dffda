package smoke

import (
	"strings"
	"testing"
)

func TestUnitsResultErr(t *testing.T) {
	if err := (&UnitsResult{}).Err(); err != nil {
		t.Errorf("no failed unit: %v", err)
	}
	u := &UnitsResult{Failed: []string{"ldconfig.service", "b.service"}, Journal: map[string][]string{
		"ldconfig.service": {"[    9.1] systemd[1]: ldconfig.service: Failed to locate executable /sbin/ldconfig: No such file or directory"},
	}}
	err := u.Err()
	if err == nil {
		t.Fatal("failed units must fail the check")
	}
	for _, want := range []string{"2 failed unit(s) (systemctl --failed): ldconfig.service, b.service",
		"journalctl -b -u b.service:", "journalctl -b -u ldconfig.service:\n    [    9.1] systemd[1]: ldconfig.service: Failed to locate executable"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%s", want, err)
		}
	}
}
