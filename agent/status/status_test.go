package status

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRecorder(t *testing.T) {
	root := t.TempDir()
	var lines []string
	up := 1.0
	r := NewRecorder(root, func(s string) { lines = append(lines, s) }, func() float64 { up += 0.5; return up })
	r.now = func() time.Time { return time.Unix(1764000000, 0) }
	r.Begin("config")
	r.End("user-data from ecs (812 bytes)", nil)
	r.Begin("apply")
	r.End("", errors.New(`$.storage.files[0].path: "/usr/x" is outside /etc and /var`))
	s, err := Read(root)
	if err != nil {
		t.Fatal(err)
	}
	if s.State != "failed" || s.Phase != "apply" || len(s.Phases) != 2 || s.Phases[0].Result != "ok" || s.Phases[1].Result != "failed" {
		t.Fatalf("status %+v", s)
	}
	if !strings.Contains(s.Error, `apply: $.storage.files[0].path: "/usr/x" is outside /etc and /var`) {
		t.Errorf("error %q", s.Error)
	}
	want := []string{
		"drover-agent: [   1.50s] config: started",
		"drover-agent: [   2.00s] config: ok (0.5s): user-data from ecs (812 bytes)",
		"drover-agent: [   2.50s] apply: started",
		`drover-agent: [   3.00s] apply: FAILED: $.storage.files[0].path: "/usr/x" is outside /etc and /var`,
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("console:\n%s", strings.Join(lines, "\n"))
	}
	if out := Format(s); !strings.Contains(out, "state: failed (phase apply)") {
		t.Errorf("format:\n%s", out)
	}
}

func TestSpanAndProcessStart(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "proc/self"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A command name with a space and a parenthesis, as the kernel allows.
	stat := "252 (drover agent) S 1 252 252 0 -1 4194560 1520 0 0 0 21 9 0 0 20 0 6 0 1422 1300000000 3000 18446744073709551615\n"
	if err := os.WriteFile(filepath.Join(root, "proc/self/stat"), []byte(stat), 0o644); err != nil {
		t.Fatal(err)
	}
	exec, err := ProcessStart(root)
	if err != nil || exec != 14.22 {
		t.Fatalf("ProcessStart = %v, %v; want 14.22 (starttime 1422 ticks)", exec, err)
	}
	var lines []string
	r := NewRecorder(root, func(s string) { lines = append(lines, s) }, func() float64 { return 15.9 })
	r.now = func() time.Time { return time.Unix(1764000000, 0) }
	r.Span("start", exec, "exec at 14.22s")
	s, err := Read(root)
	if err != nil {
		t.Fatal(err)
	}
	p := s.Phases[0]
	if p.Name != "start" || p.Result != "ok" || p.UptimeS != 14.22 || p.UptimeE != 15.9 || p.Ended.Sub(p.Started).Round(time.Millisecond) != 1680*time.Millisecond {
		t.Errorf("phase %+v", p)
	}
	want := "drover-agent: [  14.22s] start: started\ndrover-agent: [  15.90s] start: ok (1.7s): exec at 14.22s"
	if got := strings.Join(lines, "\n"); got != want {
		t.Errorf("console:\n%s\nwant:\n%s", got, want)
	}
	if err := os.WriteFile(filepath.Join(root, "proc/self/stat"), []byte("252 (drover-agent) S 1 252\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ProcessStart(root); err == nil || !strings.Contains(err.Error(), "fields after the command name") {
		t.Errorf("short stat: err %v", err)
	}
}

func TestSchedStat(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "proc/self"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "proc/self/schedstat"), []byte("1500000000 250000000 12\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cpu, wait, err := SchedStat(root)
	if err != nil || cpu != 1.5 || wait != 0.25 {
		t.Fatalf("SchedStat = %v, %v, %v; want 1.5 s on a CPU, 0.25 s waiting", cpu, wait, err)
	}
	if err := os.WriteFile(filepath.Join(root, "proc/self/schedstat"), []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := SchedStat(root); err == nil {
		t.Error("SchedStat accepted a schedstat without numbers")
	}
	// The real file of this process: it has run, so some time on a CPU.
	if cpu, _, err := SchedStat("/"); err != nil || cpu <= 0 {
		t.Errorf("SchedStat of this process = %v, %v; want time on a CPU", cpu, err)
	}
}

// TestFirstFailureStands: a failure cancels the background phases, which
// then end failed too; the node's error stays the first one, the cause.
func TestFirstFailureStands(t *testing.T) {
	root := t.TempDir()
	r := NewRecorder(root, func(string) {}, func() float64 { return 1 })
	bg := r.Begin("sandbox")
	fg := r.Begin("kubelet")
	r.Finish(fg, "", errors.New("GUARANTEE BROKEN: read-only port"))
	r.Finish(bg, "", errors.New("signal: killed (context canceled)"))
	st, err := Read(root)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != "failed" || st.Error != "kubelet: GUARANTEE BROKEN: read-only port" {
		t.Errorf("state %q error %q, want the kubelet's failure", st.State, st.Error)
	}
	if st.Phases[0].Result != "failed" || st.Phases[0].Error != "signal: killed (context canceled)" {
		t.Errorf("the cancelled phase %+v must still show its own end", st.Phases[0])
	}
}
