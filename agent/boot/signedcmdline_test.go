package boot

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

const (
	testHash   = "5c8d1e8b2bd0a5e0e2f2f7c6a0f3a6a4b2d7f0c1e3b5a7c9d1f3e5a7b9c1d3e5"
	testSigned = "console=ttyS0,115200 drover.roothash=" + testHash
)

func TestCompareCmdline(t *testing.T) {
	rh := "drover.roothash=" + testHash
	for _, tc := range []struct {
		name, signed, proc string
		want               CmdlineDiff
	}{
		{"exact, as /proc/cmdline prints it", testSigned, testSigned + "\n", CmdlineDiff{}},
		{"no newline", testSigned, testSigned, CmdlineDiff{}},
		{"trailing space", testSigned, testSigned + " \n", CmdlineDiff{}},
		// systemd-stub drops leading and trailing whitespace and turns each
		// control character into a space; the kernel splits on any run.
		{"stub whitespace", "\tconsole=ttyS0,115200\n" + rh + "\n", " console=ttyS0,115200 " + rh + "\n", CmdlineDiff{}},
		{"tab inside quotes", `x="a` + "\t" + `b" ` + rh, `x="a b" ` + rh, CmdlineDiff{}},
		{"SMBIOS extra appended", testSigned, testSigned + " drover.smbiostest=1\n",
			CmdlineDiff{Extra: []string{"drover.smbiostest=1"}, Appended: true}},
		{"several appended", testSigned, testSigned + " drover.config=/var/x systemd.unit=rescue.target\n",
			CmdlineDiff{Extra: []string{"drover.config=/var/x", "systemd.unit=rescue.target"}, Appended: true}},
		{"init arguments appended", testSigned, testSigned + " -- emergency\n",
			CmdlineDiff{Extra: []string{"--", "emergency"}, Appended: true}},
		// A repeated word overrides the signed one; it must not hide
		// behind the signed copy.
		{"signed word repeated", testSigned, testSigned + " console=ttyS0,115200\n", CmdlineDiff{Extra: []string{"console=ttyS0,115200"}, Appended: true}},
		{"roothash repeated", testSigned, testSigned + " " + rh + "\n", CmdlineDiff{Extra: []string{rh}, Appended: true}},
		{"extra prepended", testSigned, "drover.break=verity " + testSigned + "\n",
			CmdlineDiff{Extra: []string{"drover.break=verity"}}},
		{"extra in between", testSigned, "console=ttyS0,115200 drover.debug " + rh + "\n",
			CmdlineDiff{Extra: []string{"drover.debug"}}},
		{"reordered", testSigned, rh + " console=ttyS0,115200\n", CmdlineDiff{Reordered: true}},
		{"missing", testSigned, rh + "\n", CmdlineDiff{Missing: []string{"console=ttyS0,115200"}}},
		{"replaced", testSigned, "console=ttyS0 " + rh + "\n",
			CmdlineDiff{Extra: []string{"console=ttyS0"}, Missing: []string{"console=ttyS0,115200"}}},
		{"empty", testSigned, "\n", CmdlineDiff{Missing: []string{"console=ttyS0,115200", rh}}},
		{"quotes are part of the word", `x="a b" ` + rh, `x=a b ` + rh,
			CmdlineDiff{Extra: []string{"x=a", "b"}, Missing: []string{`x="a b"`}}},
		{"case matters", testSigned, strings.ToUpper(testSigned),
			CmdlineDiff{Extra: strings.Fields(strings.ToUpper(testSigned)), Missing: strings.Fields(testSigned)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CompareCmdline(tc.signed, tc.proc)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("CompareCmdline(%q, %q) = %+v, want %+v", tc.signed, tc.proc, got, tc.want)
			}
			if got.Same() != reflect.DeepEqual(tc.want, CmdlineDiff{}) {
				t.Errorf("Same() = %v for %+v", got.Same(), got)
			}
		})
	}
}

func TestCmdlineDiffString(t *testing.T) {
	for _, tc := range []struct {
		proc string
		want []string
	}{
		{testSigned + " drover.smbiostest=1\n", []string{`extra "drover.smbiostest=1" (appended after the signed command line: by systemd-stub from SMBIOS io.systemd.stub.kernel-cmdline-extra`}},
		{"drover.config=/var/x " + testSigned, []string{`extra "drover.config=/var/x" (not only appended`}},
		{"console=ttyS0", []string{`extra "console=ttyS0", missing "console=ttyS0,115200" "drover.roothash=`}},
		{"drover.roothash=" + testHash + " console=ttyS0,115200", []string{"the signed words in another order"}},
	} {
		got := CompareCmdline(testSigned, tc.proc).String()
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("diff for %q = %q, want it to contain %q", tc.proc, got, w)
			}
		}
	}
}

// TestJudgeCmdline is drover-init's decision table: signed or unsigned
// UKI × Secure Boot on, off or unreadable × the signed command line or
// one with an extra word.
func TestJudgeCmdline(t *testing.T) {
	extra := CompareCmdline(testSigned, testSigned+" noefi drover.smbiostest=1\n")
	same := CompareCmdline(testSigned, testSigned+"\n")
	const refuse, warn, boot = "refuse", "warn", "boot"
	for _, tc := range []struct {
		signed bool
		state  string
		diff   CmdlineDiff
		want   string
		says   string // what the error or warning must contain
	}{
		{true, SecureBootOn, same, boot, ""},
		{true, SecureBootOff, same, boot, ""},
		{true, SecureBootUnknown, same, boot, ""},
		{true, "", same, boot, ""},
		{false, SecureBootOn, same, boot, ""},
		{false, SecureBootOff, same, boot, ""},
		{false, SecureBootUnknown, same, boot, ""},
		{true, SecureBootOn, extra, refuse, "whatever Secure Boot reads as (here: on)"},
		{true, SecureBootOff, extra, refuse, "whatever Secure Boot reads as (here: off)"},
		{true, SecureBootUnknown, extra, refuse, "whatever Secure Boot reads as (here: unknown: it could not be read)"},
		{true, "", extra, refuse, "(here: unknown"}, // the secure-boot step did not run
		{false, SecureBootOn, extra, refuse, "under Secure Boot only the signed command line is honoured"},
		{false, SecureBootOff, extra, warn, "booting anyway because the UKI is unsigned and Secure Boot is off"},
		{false, SecureBootUnknown, extra, warn, "booting anyway because the UKI is unsigned and Secure Boot is unknown"},
	} {
		warning, err := JudgeCmdline(tc.signed, tc.state, tc.diff)
		got, text := boot, ""
		switch {
		case err != nil:
			got, text = refuse, err.Error()
			if warning != "" {
				t.Errorf("signed %v, %q: both an error and a warning", tc.signed, tc.state)
			}
		case warning != "":
			got, text = warn, warning
		}
		if got != tc.want {
			t.Errorf("signed %v, Secure Boot %q, same %v: %s (%q), want %s", tc.signed, tc.state, tc.diff.Same(), got, text, tc.want)
			continue
		}
		if tc.want == boot {
			continue
		}
		// Either way the line names every extra word.
		for _, w := range []string{"the kernel command line is not the signed one: ", `extra "noefi" "drover.smbiostest=1"`, tc.says} {
			if !strings.Contains(text, w) {
				t.Errorf("signed %v, Secure Boot %q: %q lacks %q", tc.signed, tc.state, text, w)
			}
		}
	}
}

// TestSignedCmdlineStep runs the step on a fake /proc/cmdline: a refusal
// stops the boot with a line naming the extra words; a warning goes to
// the console and the boot goes on.
func TestSignedCmdlineStep(t *testing.T) {
	for _, tc := range []struct {
		name       string
		signed     bool
		secureBoot string
		proc       string
		err        []string // what the error must contain; nil: no error
		console    []string
		noConsole  string
	}{
		{"signed, Secure Boot", false, SecureBootOn, testSigned + "\n", nil, nil, "WARNING"},
		{"signed, no Secure Boot", false, SecureBootOff, testSigned + "\n", nil, nil, "WARNING"},
		{"SMBIOS extra, Secure Boot", false, SecureBootOn, testSigned + " drover.smbiostest=1\n",
			[]string{"refusing to boot: the kernel command line is not the signed one: ", `extra "drover.smbiostest=1"`,
				"SMBIOS io.systemd.stub.kernel-cmdline-extra", "under Secure Boot only the signed command line is honoured"}, nil, "WARNING"},
		{"SMBIOS extra, no Secure Boot", false, SecureBootOff, testSigned + " drover.smbiostest=1\n", nil,
			[]string{`drover-init: WARNING: the kernel command line is not the signed one: extra "drover.smbiostest=1"`, "Secure Boot is off"}, ""},
		{"prepended, Secure Boot", false, SecureBootOn, "drover.config=/var/x " + testSigned + "\n",
			[]string{`extra "drover.config=/var/x"`}, nil, ""},
		{"signed UKI, noefi", true, SecureBootUnknown, testSigned + " noefi drover.smbiostest=1\n",
			[]string{`extra "noefi" "drover.smbiostest=1"`, "the UKI is signed"}, nil, "WARNING"},
		{"signed UKI, Secure Boot off", true, SecureBootOff, testSigned + " systemd.unit=rescue.target\n",
			[]string{`extra "systemd.unit=rescue.target"`, "(here: off)"}, nil, "WARNING"},
		{"signed UKI, the signed line", true, SecureBootUnknown, testSigned + "\n", nil, nil, "WARNING"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Paths{Proc: t.TempDir()}
			if err := os.WriteFile(filepath.Join(p.Proc, "cmdline"), []byte(tc.proc), 0o444); err != nil {
				t.Fatal(err)
			}
			m := NewMachine(p, NewLog(time.Now()))
			var console strings.Builder
			m.Log.AttachWriter(&console)
			m.Config = testConfig(t)
			m.Config.SignedUKI = tc.signed
			m.secureBootState = tc.secureBoot
			err := m.signedCmdline()
			if tc.err == nil && err != nil {
				t.Fatalf("error %v, want none", err)
			}
			if tc.err != nil && err == nil {
				t.Fatal("no error: the boot would go on")
			}
			for _, w := range tc.err {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			for _, w := range tc.console {
				if !strings.Contains(console.String(), w) {
					t.Errorf("console %q lacks %q", console.String(), w)
				}
			}
			if tc.noConsole != "" && strings.Contains(console.String(), tc.noConsole) {
				t.Errorf("console %q has %q", console.String(), tc.noConsole)
			}
		})
	}
}
