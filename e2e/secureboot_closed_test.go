//go:build e2e

package e2e

// What TestSecureBoot needs to judge that a signed UKI fails closed: the
// SMBIOS boot that appends noefi and another word, the credentials that
// must not be imported, the UKI's SBAT line.

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/harness/qemu"
	"github.com/drover-os/drover/harness/smoke"
	"github.com/drover-os/drover/image/build"
)

// The markers the credentials of the signed boot would write on /var.
const (
	markerSMBIOS = "/var/lib/drover-e2e-credential-smbios"
	markerFwCfg  = "/var/lib/drover-e2e-credential-fwcfg"
)

// credentialLine is a tmpfiles.d line that writes marker.
func credentialLine(marker string) string {
	return "f " + marker + " 0644 root root - imported\n"
}

// checkNoCredentialMarkers reads the stopped VM's var partition: neither
// credential's marker may be there. systemd-tmpfiles-setup must have run,
// else their absence would prove nothing.
//
// Both credentials are tmpfiles.extra, and PID 1 imports fw_cfg's before
// SMBIOS's and keeps the first of a name (it loads qemu_fw_cfg itself,
// in QEMU, to read fw_cfg). So an image built without
// systemd.import_credentials=no gets the fw_cfg marker; given only the
// SMBIOS credential, the SMBIOS one. Each was seen failing this check.
func checkNoCredentialMarkers(t *testing.T, c *qemu.Config, log string) {
	t.Helper()
	// systemd's status line, its unit name cut short:
	// "[  OK  ] Finished systemd-tmpfiles-setup.se…reate System Files and Directories."
	if !regexp.MustCompile(`Finished systemd-tmpfiles-setup\.s.*System Files and Directories`).MatchString(log) {
		t.Errorf("systemd-tmpfiles-setup.service did not finish: a credential could not have written its marker:\n%s", grepLines(log, "tmpfiles"))
	}
	found, err := smoke.ReadVarFiles(t.Context(), c, markerSMBIOS, markerFwCfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{markerSMBIOS, markerFwCfg} {
		if data, ok := found[m]; ok {
			t.Errorf("%s is on the node's /var (%q): systemd imported a system credential the hypervisor set", m, data)
		}
	}
	if len(found) == 0 {
		t.Logf("no credential marker on /var; systemd said:\n%s", grepLines(log, "import_credentials", "credentials:"))
	}
}

// smbiosExtra is what the SMBIOS boot asks systemd-stub to append: noefi,
// which keeps the kernel from UEFI runtime services, so that drover-init
// cannot read the Secure Boot state, and a word of no meaning.
const smbiosExtra = "noefi drover.smbiostest=1"

// smbiosCmdlineRefused boots the signed image under Secure Boot through
// `drover run --qemu-arg`, with an SMBIOS Type 11 OEM string that makes
// systemd-stub append noefi and another word to the signed command line.
// The kernel must show the words (the firmware path is real), drover-init
// must find the Secure Boot state unreadable and still refuse to boot,
// naming both words, and nothing may start after: the refusal reboots,
// which ends QEMU (-no-reboot) and so drover run (in 1.5 min under TCG).
// A boot that goes on runs into --timeout (not --until, which fails a VM
// that exits without showing its text).
func smbiosCmdlineRefused(t *testing.T, image, state string) {
	start := time.Now()
	run(t, bin("drover"), "run", "--secure-boot", "--fresh", "--state", state, "--disk-size", "2147483648", "--timeout", "6m",
		"--qemu-arg=-smbios", "--qemu-arg=type=11,value=io.systemd.stub.kernel-cmdline-extra="+smbiosExtra, image)
	took := time.Since(start).Round(time.Second)
	log := string(readFile(t, filepath.Join(state, "serial.log")))
	if problems := checkSMBIOSRefusal(log); len(problems) > 0 {
		t.Fatalf("%s\n%s", strings.Join(problems, "\n"), tail(log, 40))
	}
	t.Logf("refused in %s:\n%s", took, grepLines(log, "Kernel command line:", "secureboot:", "drover-init: secure-boot", "drover-init: FATAL", "reboot:"))
}

// checkSMBIOSRefusal judges the console of the SMBIOS boot.
func checkSMBIOSRefusal(log string) []string {
	var problems []string
	kernel := regexp.MustCompile(`Kernel command line: (.*)`).FindStringSubmatch(log)
	if kernel == nil || !strings.HasSuffix(strings.TrimSpace(kernel[1]), " "+smbiosExtra) {
		problems = append(problems, fmt.Sprintf("the kernel's command line does not end in %s (systemd-stub appended no SMBIOS extra): %q", smbiosExtra, kernel))
	}
	// The case the boot is for: noefi hid the state from drover-init
	// (the kernel's own secureboot: line comes from the boot stub, before
	// noefi counts).
	if !regexp.MustCompile(`drover-init: secure-boot: unknown \(.*; the UKI is signed\)`).MatchString(log) {
		problems = append(problems, "drover-init did not find the Secure Boot state unreadable with a signed UKI (noefi had no effect?)")
	}
	var quoted []string
	for _, w := range strings.Fields(smbiosExtra) {
		quoted = append(quoted, strconv.Quote(w))
	}
	refusal := `drover-init: FATAL: signed-cmdline: refusing to boot: the kernel command line is not the signed one: extra ` + strings.Join(quoted, " ") + " "
	if at := strings.Index(log, refusal); at < 0 {
		problems = append(problems, "no refusal line "+strconv.Quote(refusal))
	} else {
		if !strings.Contains(log[at:], "the UKI is signed, so only its signed command line is honoured, whatever Secure Boot reads as (here: unknown") {
			problems = append(problems, "the refusal does not say why")
		}
		if !strings.Contains(log[at:], "reboot: Restarting system") {
			problems = append(problems, "the machine did not restart after the refusal")
		}
	}
	for _, after := range []string{"drover-init: partitions", "drover-init: switch-root", "Reached target", "drover-agent", "Welcome to"} {
		if strings.Contains(log, after) {
			problems = append(problems, fmt.Sprintf("%q on the console: the boot went on", after))
		}
	}
	return problems
}

// checkSBAT dumps the UKI's .sbat with objcopy: the SBAT header line
// first, systemd-stub's own entries kept, and the drover entry last with
// the recipe's generation, as shim reads it (component, generation,
// vendor, package, version, URL).
func checkSBAT(t *testing.T, uki string, mf *build.Manifest) {
	dir := t.TempDir()
	dump := filepath.Join(dir, "sbat.csv")
	run(t, "objcopy", "--dump-section", ".sbat="+dump, uki, filepath.Join(dir, "copy.efi"))
	csv := string(readFile(t, dump))
	t.Logf(".sbat:\n%s", csv)
	lines := strings.Split(strings.TrimSuffix(csv, "\n"), "\n")
	want := fmt.Sprintf("drover,%d,drover,minimal,%s,https://github.com/drover-os/drover", sbatGeneration, mf.Version)
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "sbat,1,") || lines[len(lines)-1] != want ||
		!strings.HasPrefix(lines[1], "systemd-stub,") || !strings.HasSuffix(csv, "\n") {
		t.Errorf(".sbat is\n%s\nwant the sbat,1 header, systemd-stub's entries, then %q", csv, want)
	}
	for _, l := range lines {
		if strings.Count(l, ",") != 5 {
			t.Errorf(".sbat line %q does not have SBAT's six fields", l)
		}
	}
}

// smbiosRefusalConsole is the SMBIOS boot's console as TestSecureBoot saw
// it (trimmed).
const smbiosRefusalConsole = `[    0.000000] secureboot: Secure boot enabled
[    0.000000] Kernel command line: console=ttyS0,115200 systemd.import_credentials=no drover.roothash=51137ec2fc2b3fd7989d6052378c3a4203b2d8fa67885e7d34837b513162f61d noefi drover.smbiostest=1
[    3.843104] drover-init: secure-boot (+1.137s)
[    3.850933] drover-init: secure-boot: unknown (mounting efivarfs at /sys/firmware/efi/efivars: operation not supported (the kernel does not use UEFI runtime services: noefi or efi=noruntime?); the UKI is signed)
[    3.867621] drover-init: FATAL: signed-cmdline: refusing to boot: the kernel command line is not the signed one: extra "noefi" "drover.smbiostest=1" (appended after the signed command line: by systemd-stub from SMBIOS io.systemd.stub.kernel-cmdline-extra or an add-on's .cmdline); the UKI is signed, so only its signed command line is honoured, whatever Secure Boot reads as (here: unknown: it could not be read); rebooting in 10s
[   13.891188] reboot: Restarting system
`

// TestSMBIOSRefusalChecks: the verdict on the SMBIOS boot accepts the
// console it saw and refuses each way the boot could have gone wrong.
func TestSMBIOSRefusalChecks(t *testing.T) {
	if p := checkSMBIOSRefusal(smbiosRefusalConsole); len(p) > 0 {
		t.Fatalf("the refusal console was refused: %q", p)
	}
	for _, c := range []struct{ name, old, new, want string }{
		{"no extra from the stub", " noefi drover.smbiostest=1\n", "\n", "does not end in"},
		{"noefi not appended", " noefi drover.smbiostest=1\n", " drover.smbiostest=1\n", "does not end in"},
		// noefi had no effect: drover-init read the state (and refused
		// for it being on), so the unreadable case was not exercised.
		{"Secure Boot read", "secure-boot: unknown (mounting efivarfs at /sys/firmware/efi/efivars: operation not supported (the kernel does not use UEFI runtime services: noefi or efi=noruntime?); the UKI is signed)",
			"secure-boot: on (EFI variable SecureBoot = 1; the UKI is signed)", "did not find the Secure Boot state unreadable"},
		{"an unsigned UKI", "; the UKI is signed)\n", ")\n", "did not find the Secure Boot state unreadable"},
		{"a warning instead", "FATAL: signed-cmdline: refusing to boot: the kernel command line", "WARNING: the kernel command line", "no refusal line"},
		{"another word named", `extra "noefi" "drover.smbiostest=1"`, `extra "noefi" "drover.other=1"`, "no refusal line"},
		{"noefi not named", `extra "noefi" "drover.smbiostest=1"`, `extra "drover.smbiostest=1"`, "no refusal line"},
		{"no reason", "the UKI is signed, so only", "only", "does not say why"},
		{"the old reason", "the UKI is signed, so only its signed command line is honoured, whatever Secure Boot reads as (here: unknown: it could not be read)",
			"under Secure Boot only the signed command line is honoured", "does not say why"},
		{"no restart", "reboot: Restarting system", "", "did not restart"},
		{"the boot went on", "[   13.891188]", "drover-init: partitions (+2.0s)\nReached target sysinit.target\n[   13.891188]", "the boot went on"},
	} {
		console := strings.Replace(smbiosRefusalConsole, c.old, c.new, 1)
		if console == smbiosRefusalConsole {
			t.Fatalf("%s: the fixture edit changed nothing", c.name)
		}
		p := checkSMBIOSRefusal(console)
		if !strings.Contains(strings.Join(p, "\n"), c.want) {
			t.Errorf("%s: problems %q, want one containing %q", c.name, p, c.want)
		}
	}
}
