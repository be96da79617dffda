package status

import (
	"errors"
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
