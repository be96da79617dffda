package smoke

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ignitionPaths lists the file paths and unit names of an Ignition config.
func ignitionPaths(t *testing.T, ud []byte) (files, units []string) {
	t.Helper()
	var cfg struct {
		Storage struct {
			Files []struct {
				Path string `json:"path"`
			} `json:"files"`
		} `json:"storage"`
		Systemd struct {
			Units []struct {
				Name string `json:"name"`
			} `json:"units"`
		} `json:"systemd"`
	}
	if err := json.Unmarshal(ud, &cfg); err != nil {
		t.Fatalf("not an Ignition config: %v\n%s", err, ud)
	}
	for _, f := range cfg.Storage.Files {
		files = append(files, f.Path)
	}
	for _, u := range cfg.Systemd.Units {
		units = append(units, u.Name)
	}
	return files, units
}

// TestUserDataAdditions: the smoke's files and units are appended to what
// the user-data holds, and added to one that has no storage or systemd
// section at all.
func TestUserDataAdditions(t *testing.T) {
	const bare = `{"ignition":{"version":"3.4.0"}}`
	const full = `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/opt/own.conf"}]},"systemd":{"units":[{"name":"own.service"}]}}`
	for _, tc := range []struct {
		name       string
		add        func([]byte) ([]byte, error)
		in         string
		files, uts string
	}{
		{"smoke units, bare", WithSmokeUnits, bare,
			EvidenceScript + " " + SysctlFile, OneshotUnit + " " + LongUnit + " " + TimerUnit + " " + TimerService + " kubelet.service"},
		{"smoke units, kept", WithSmokeUnits, full,
			"/etc/opt/own.conf " + EvidenceScript + " " + SysctlFile, "own.service " + OneshotUnit + " " + LongUnit + " " + TimerUnit + " " + TimerService + " kubelet.service"},
		{"guarantee override, bare", GuaranteeUserData, bare, OverrideSource, OverrideUnit},
		{"guarantee override, kept", GuaranteeUserData, full, "/etc/opt/own.conf " + OverrideSource, "own.service " + OverrideUnit},
	} {
		ud, err := tc.add([]byte(tc.in))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		files, units := ignitionPaths(t, ud)
		if strings.Join(files, " ") != tc.files || strings.Join(units, " ") != tc.uts {
			t.Errorf("%s: files %q, units %q; want %q, %q", tc.name, files, units, tc.files, tc.uts)
		}
	}
	for _, add := range []func([]byte) ([]byte, error){WithSmokeUnits, GuaranteeUserData} {
		if _, err := add([]byte("not json")); err == nil {
			t.Error("a user-data that is not JSON was extended")
		}
	}
}

// TestEvidenceJudgeMessages: the verdict says what went wrong with which
// boots and units.
func TestEvidenceJudgeMessages(t *testing.T) {
	ev := goodEvidence("b1", "b2", "b3")
	if err := ev.Judge([]string{"b1", "b2", "b3"}); err != nil {
		t.Fatalf("three boots: %v", err)
	}
	for _, tc := range []struct {
		name  string
		boots []string
		want  string
	}{
		{"first and last boot the same", []string{"b3", "b2", "b3"}, "boots 1 and 3 have the same boot id b3: the node did not reboot"},
		{"last two the same", []string{"b1", "b3", "b3"}, "boots 2 and 3 have the same boot id b3: the node did not reboot"},
		{"no boots", nil, `the node's boot id is "b3", want []`},
	} {
		if err := ev.Judge(tc.boots); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: Judge = %v, want %q", tc.name, err, tc.want)
		}
	}
	// A timer that fired and waits for its next elapse is as good as one
	// that has elapsed; a oneshot is never "waiting".
	ev.Units[TimerUnit] = UnitState{"active", "waiting", "success"}
	if err := ev.Judge([]string{"b1", "b2", "b3"}); err != nil {
		t.Errorf("timer waiting: %v", err)
	}
	ev.Units[OneshotUnit] = UnitState{"inactive", "waiting", "success"}
	if err := ev.Judge([]string{"b1", "b2", "b3"}); err == nil || !strings.Contains(err.Error(), "systemctl show "+OneshotUnit) {
		t.Errorf("oneshot waiting: %v", err)
	}
}

// TestReportAddRecordsPassFail: each check records whether it passed, the
// error as its detail when it failed.
func TestReportAddRecordsPassFail(t *testing.T) {
	r := &Report{}
	r.add("first", time.Now(), nil, "all good")
	r.add("second", time.Now(), errors.New("boom"), "unused")
	r.add("third", time.Now(), nil, "")
	var got []string
	for _, c := range r.Checks {
		got = append(got, c.Name+"="+map[bool]string{true: "pass", false: "fail"}[c.Passed]+":"+c.Detail)
	}
	if want := "first=pass:all good second=fail:boom third=pass:"; strings.Join(got, " ") != want {
		t.Errorf("checks %q, want %q", strings.Join(got, " "), want)
	}
	if r.Failed() != 1 {
		t.Errorf("Failed() = %d, want 1", r.Failed())
	}
}

// TestSparseCopyBadLength: a length the file cannot be cut to is an error,
// not a copy of the wrong size.
func TestSparseCopyBadLength(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "var.img")
	if err := sparseCopy(dst, bytes.NewReader([]byte("data")), -1); err == nil {
		t.Error("sparseCopy to length -1 succeeded")
	}
}
