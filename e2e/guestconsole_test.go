package e2e

// Not behind the e2e tag: the checker of the guest's console is plain
// parsing, tested here against fixed consoles in every tier.

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// guestPackages are the packages whose -tags vmtest tests need a kernel
// with device-mapper and dm-verity. run is the -test.run pattern of the
// first pass; restart names the test that ends with the kernel restarting
// the machine, run alone after everything else.
var guestPackages = []struct {
	name, pkg, run, restart string
}{
	{"dm", "./agent/dm", "^TestGuest", ""},
	{"boot", "./agent/boot", "^TestGuest", "TestGuestRestartOnCorruption"},
	{"erofsz", "./image/erofsz", "^TestGuest", ""},
}

// guestCorruptBlock is the data block agent/boot's
// TestGuestRestartOnCorruption corrupts (its GuestCorruptBlock).
const guestCorruptBlock = 7

var (
	guestResult = regexp.MustCompile(`(?m)^\s*--- (PASS|FAIL|SKIP): (\S+)`)
	guestExit   = regexp.MustCompile(`(?m)^GUEST-EXIT (\S+) (-?\d+)$`)
)

// checkGuestConsole requires every expected test to pass, nothing to fail
// or skip, each first-pass binary to exit 0, and the restart test to end
// with the kernel's corruption line and restart, never returning.
func checkGuestConsole(console string, expect map[string][]string) []string {
	var problems []string
	fail := func(f string, a ...any) { problems = append(problems, fmt.Sprintf(f, a...)) }
	results := map[string]string{}
	for _, m := range guestResult.FindAllStringSubmatch(console, -1) {
		results[m[2]] = m[1]
		if m[1] != "PASS" {
			fail("guest test %s: %s", m[2], m[1])
		}
	}
	exits := map[string]string{}
	for _, m := range guestExit.FindAllStringSubmatch(console, -1) {
		exits[m[1]] = m[2]
	}
	for _, p := range guestPackages {
		for _, name := range expect[p.name] {
			if name == p.restart {
				continue
			}
			if exits[p.name] != "0" {
				fail("guest: %s tests exited %q, want 0", p.name, exits[p.name])
			}
			if results[name] != "PASS" {
				fail("guest test %s.%s did not pass (result %q)", p.name, name, results[name])
			}
		}
	}
	if code, ok := exits["restart"]; ok {
		fail("guest: the restart test returned (exit %s): the kernel did not restart on the corrupted block", code)
	}
	corrupted := regexp.MustCompile(fmt.Sprintf(`device-mapper: verity: \d+:\d+: data block %d is corrupted`, guestCorruptBlock))
	if !strings.Contains(console, "GUEST-RUN restart") || !corrupted.MatchString(console) {
		fail("guest: no kernel line %q after GUEST-RUN restart", corrupted)
	}
	if !strings.Contains(console, "Restarting system with command 'dm-verity device corrupted'") {
		fail("guest: the kernel did not restart with reason 'dm-verity device corrupted'")
	}
	if strings.Contains(console, "GUEST-ERROR") || strings.Contains(console, "GUEST-DONE") {
		fail("guest: the run did not end in the restart")
	}
	return problems
}

// goodGuestConsole is what a passing guest prints (trimmed).
const goodGuestConsole = `drover-init: modules (+0.252s)
GUEST-RUN dm
=== RUN   TestGuestVerityDevice
--- PASS: TestGuestVerityDevice (1.85s)
=== RUN   TestGuestCreateTableCleansUp
--- PASS: TestGuestCreateTableCleansUp (0.01s)
PASS
GUEST-EXIT dm 0
GUEST-RUN restart
=== RUN   TestGuestRestartOnCorruption
    guest_test.go:107: reading corrupted data block 7 through /dev/dm-0: the kernel must restart the machine now
[   16.190452] device-mapper: verity: 7:0: data block 7 is corrupted
[   16.191000] reboot: Restarting system with command 'dm-verity device corrupted'
`

func TestGuestConsoleChecks(t *testing.T) {
	expect := map[string][]string{
		"dm":   {"TestGuestVerityDevice", "TestGuestCreateTableCleansUp"},
		"boot": {"TestGuestRestartOnCorruption"},
	}
	if p := checkGuestConsole(goodGuestConsole, expect); len(p) > 0 {
		t.Fatalf("a passing console was refused: %q", p)
	}
	for _, c := range []struct{ name, old, new, want string }{
		{"a skip", "--- PASS: TestGuestCreateTableCleansUp", "--- SKIP: TestGuestCreateTableCleansUp", "TestGuestCreateTableCleansUp: SKIP"},
		{"a failure", "--- PASS: TestGuestVerityDevice", "    --- FAIL: TestGuestVerityDevice", "TestGuestVerityDevice: FAIL"},
		{"a missing test", "--- PASS: TestGuestVerityDevice (1.85s)\n", "", "dm.TestGuestVerityDevice did not pass"},
		{"a failed binary", "GUEST-EXIT dm 0", "GUEST-EXIT dm 1", `dm tests exited "1"`},
		{"the restart test returning", "[   16.191000]", "GUEST-EXIT restart 1\nGUEST-DONE\n[   16.191000]", "the restart test returned"},
		{"another block", "data block 7 is", "data block 8 is", "data block 7 is corrupted"},
		{"no restart", "Restarting system with command 'dm-verity device corrupted'", "Power down", "did not restart"},
	} {
		console := strings.Replace(goodGuestConsole, c.old, c.new, 1)
		if console == goodGuestConsole {
			t.Fatalf("%s: the fixture edit changed nothing", c.name)
		}
		p := checkGuestConsole(console, expect)
		if !strings.Contains(strings.Join(p, "\n"), c.want) {
			t.Errorf("%s: problems %q, want one containing %q", c.name, p, c.want)
		}
	}
}
