package boot

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestPlanGolden pins what `drover-init --plan testdata/config.json`
// prints.
func TestPlanGolden(t *testing.T) {
	c := testConfig(t)
	var b strings.Builder
	for i, s := range Steps() {
		fmt.Fprintf(&b, "%2d. %s\n", i+1, s.Describe(c))
	}
	for _, s := range Steps() {
		fmt.Fprintf(&b, "%s\n", s)
	}
	path := filepath.Join("testdata", "plan.golden")
	if *update {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if b.String() != string(want) {
		t.Errorf("plan differs from %s (go test -update rewrites it):\n%s", path, b.String())
	}
}

func TestStepsOrder(t *testing.T) {
	names := StepNames(Steps())
	want := "mount-api config modules secure-boot signed-cmdline partitions verity mount-root read-ahead var-partition var-format var-mount var-stamp etc-overlay machine-id move-mounts switch-root"
	if strings.Join(names, " ") != want {
		t.Errorf("steps = %v", names)
	}
}

func fakeStep(name string, log *[]string, err error) Step {
	return Step{Name: name, describe: func(*Config) string { return name }, run: func(*Machine) error {
		*log = append(*log, name)
		return err
	}}
}

func TestRun(t *testing.T) {
	var out bytes.Buffer
	l := NewLog(time.Now())
	l.AttachWriter(&out)
	var ran []string
	m := NewMachine(DefaultPaths, l)
	m.Config = &Config{}
	m.Cmdline.Break = "c"
	err := Run(m, []Step{fakeStep("a", &ran, nil), fakeStep("b", &ran, nil), fakeStep("c", &ran, nil)})
	var brk *BreakError
	if !errors.As(err, &brk) || brk.Step != "c" || strings.Join(ran, ",") != "a,b" {
		t.Errorf("break: err %v, ran %v", err, ran)
	}
	if !regexp.MustCompile(`^drover-init: a \(\+\d+\.\d{3}s\)\ndrover-init: b \(\+\d+\.\d{3}s\)\n$`).MatchString(out.String()) {
		t.Errorf("console:\n%s", out.String())
	}

	ran = nil
	m.Cmdline.Break = ""
	boom := errors.New("boom")
	err = Run(m, []Step{fakeStep("a", &ran, nil), fakeStep("b", &ran, boom), fakeStep("c", &ran, nil)})
	if !errors.Is(err, boom) || err.Error() != "b: boom" || len(ran) != 2 {
		t.Errorf("failure: err %v, ran %v", err, ran)
	}
}

func TestLogBuffersUntilAttached(t *testing.T) {
	l := NewLog(time.Now())
	l.Printf("early %d", 1)
	l.Debugf("hidden")
	l.SetDebug(true)
	l.Debugf("shown")
	l.Fatal("partitions: no disk", 10*time.Second)
	var out bytes.Buffer
	l.AttachWriter(&out)
	want := "drover-init: early 1\ndrover-init:   shown\ndrover-init: FATAL: partitions: no disk; rebooting in 10s\n"
	if out.String() != want {
		t.Errorf("log:\n%q\nwant\n%q", out.String(), want)
	}
}

func TestHasExt4Magic(t *testing.T) {
	if !HasExt4Magic([]byte{0x53, 0xef}) || HasExt4Magic([]byte{0xef, 0x53}) || HasExt4Magic([]byte{0x53}) || HasExt4Magic(make([]byte, 2)) {
		t.Error("HasExt4Magic misreads the magic")
	}
}

func TestDeleteTree(t *testing.T) {
	root := t.TempDir()
	for _, p := range []string{"init", "etc/drover-init.json", "lib/modules/6.1/kernel/a.ko.xz", "sysroot/", "dev/"} {
		full := filepath.Join(root, p)
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("x"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("init", filepath.Join(root, "linuxrc")); err != nil {
		t.Fatal(err)
	}
	if err := DeleteTree(root); err != nil {
		t.Fatal(err)
	}
	left, err := os.ReadDir(root)
	if err != nil || len(left) != 0 {
		t.Errorf("left behind: %v (%v)", left, err)
	}
}

func TestParseSecureBootVar(t *testing.T) {
	for _, tc := range []struct {
		b    []byte
		on   bool
		fail bool
	}{
		{[]byte{6, 0, 0, 0, 1}, true, false},
		{[]byte{6, 0, 0, 0, 0}, false, false},
		{[]byte{6, 0, 0, 0, 2}, false, true},
		{[]byte{1}, false, true},
	} {
		on, err := ParseSecureBootVar(tc.b)
		if on != tc.on || (err != nil) != tc.fail {
			t.Errorf("ParseSecureBootVar(%v) = %v, %v", tc.b, on, err)
		}
	}
}

// TestSecureBootStep runs the step against a fake /sys with efivarfs
// already mounted (its files in place), as on a rerun, and reads the
// finding back as the agent does. Only a variable that reads 0, or
// firmware that has variables but no SecureBoot, is "off"; what cannot be
// read is "unknown".
func TestSecureBootStep(t *testing.T) {
	const bootCurrent = "BootCurrent-8be4df61-93ca-11d2-aa0d-00e098032b8c"
	for _, tc := range []struct {
		name    string
		signed  bool
		noEFI   bool              // no /sys/firmware/efi
		mount   error             // efivarfs does not mount
		vars    map[string][]byte // efivarfs's files
		state   string
		source  string
		console string
	}{
		{name: "on", vars: map[string][]byte{SecureBootVar: {6, 0, 0, 0, 1}}, state: SecureBootOn, source: "EFI variable SecureBoot = 1",
			console: "drover-init: secure-boot: on (EFI variable SecureBoot = 1)\n"},
		{name: "on, signed", signed: true, vars: map[string][]byte{SecureBootVar: {6, 0, 0, 0, 1}}, state: SecureBootOn, source: "EFI variable SecureBoot = 1",
			console: "drover-init: secure-boot: on (EFI variable SecureBoot = 1; the UKI is signed)\n"},
		{name: "off", vars: map[string][]byte{SecureBootVar: {6, 0, 0, 0, 0}}, state: SecureBootOff, source: "EFI variable SecureBoot = 0"},
		{name: "firmware without the variable", vars: map[string][]byte{bootCurrent: {6, 0, 0, 0, 1, 0}}, state: SecureBootOff,
			source: "the firmware sets no EFI variable SecureBoot"},
		{name: "empty efivarfs", signed: true, vars: map[string][]byte{}, state: SecureBootUnknown, source: "lists no variables at all",
			console: "drover-init: secure-boot: unknown (efivarfs at "},
		{name: "efivarfs does not mount (noefi)", signed: true, mount: errors.New("mounting efivarfs at x: no such device"), state: SecureBootUnknown,
			source: "mounting efivarfs at x: no such device", console: "drover-init: secure-boot: unknown (mounting efivarfs at x: no such device; the UKI is signed)\n"},
		{name: "bad value", vars: map[string][]byte{SecureBootVar: {6, 0, 0, 0, 7}}, state: SecureBootUnknown, source: "has value 7"},
		{name: "not UEFI, unsigned", noEFI: true, state: SecureBootOff, source: "not booted by UEFI"},
		{name: "not UEFI, signed UKI", signed: true, noEFI: true, state: SecureBootUnknown, source: "the UKI ran under UEFI, yet the kernel shows no "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			p := Paths{Sys: filepath.Join(root, "sys"), Run: filepath.Join(root, "run")}
			vars := filepath.Join(p.Sys, "firmware", "efi", "efivars")
			if !tc.noEFI {
				if err := os.MkdirAll(vars, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for name, b := range tc.vars {
				if err := os.WriteFile(filepath.Join(vars, name), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			m := NewMachine(p, NewLog(time.Now()))
			m.Config = testConfig(t)
			m.Config.SignedUKI = tc.signed
			m.mountEFIVars = func(string) (func(), error) {
				if tc.mount != nil {
					return nil, tc.mount
				}
				return func() {}, nil
			}
			var console strings.Builder
			m.Log.AttachWriter(&console)
			if got, _ := ReadSecureBoot(root); got != nil {
				t.Fatalf("ReadSecureBoot before the step = %+v, want nil", got)
			}
			if err := m.secureBoot(); err != nil {
				t.Fatal(err)
			}
			got, err := ReadSecureBoot(root)
			if err != nil || got == nil {
				t.Fatalf("ReadSecureBoot = %+v, %v", got, err)
			}
			if got.State != tc.state || got.Enabled != (tc.state == SecureBootOn) || !strings.Contains(got.Source, tc.source) || got.SignedUKI != tc.signed {
				t.Errorf("recorded %+v, want state %s, source with %q, signed UKI %v", got, tc.state, tc.source, tc.signed)
			}
			if m.secureBootState != tc.state {
				t.Errorf("the signed-cmdline step would judge by %q, want %q", m.secureBootState, tc.state)
			}
			if !strings.Contains(console.String(), tc.console) {
				t.Errorf("console %q lacks %q", console.String(), tc.console)
			}
		})
	}
}
