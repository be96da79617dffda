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

func TestConsoleProblems(t *testing.T) {
	clean := "[    0.000000] Linux version 6.12\n[    3.48] device-mapper: verity: sha256 using shash \"sha256-avx2\"\n[  OK  ] Finished systemd-tmpfiles-setup.service\n"
	// An earlier boot in the same log does not count.
	old := "[    0.000000] Linux version 6.12\n[FAILED] Failed to start ldconfig.service - Rebuild Dynamic Linker Cache.\n"
	if p := ConsoleProblems(old + clean); len(p) != 0 {
		t.Errorf("clean boot: %q", p)
	}
	bad := "[    0.000000] Linux version 6.12\r\n[    3.48] device-mapper: verity: sha256 using shash \"sha256-generic\"\r\n" +
		"         Starting systemd-hwdb-update.service - Rebuild Hardware Database...\r\n" +
		"[FAILED] Failed to start drover-smoke-fails.service - drover smoke test: a unit that fails on purpose.\r\n"
	p := ConsoleProblems(clean + bad)
	want := []string{
		`dm-verity hashes with sha256-generic: the initrd did not load the CPU's SHA-256 module (crypto-sha256) before the verity target: [    3.48] device-mapper: verity: sha256 using shash "sha256-generic"`,
		"the udev hwdb is rebuilt at boot: Starting systemd-hwdb-update.service - Rebuild Hardware Database...",
		"a unit failed: [FAILED] Failed to start drover-smoke-fails.service - drover smoke test: a unit that fails on purpose.",
	}
	if strings.Join(p, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(p, "\n"), strings.Join(want, "\n"))
	}
}
