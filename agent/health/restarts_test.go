package health

import (
	"strings"
	"testing"
	"time"
)

func TestRestartsTurnTheConditionOnAndOff(t *testing.T) {
	r := &Restarts{Unit: "containerd.service"}
	if f := r.Initial(); f.Condition != "FrequentContainerdRestart" || f.Status != "False" || f.Reason != "NoFrequentContainerdRestart" {
		t.Fatalf("initial %+v", f)
	}
	t0 := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	// Restarts before the agent watched are the baseline.
	if _, ok := r.Observe(t0, 7); ok {
		t.Fatal("the first reading changed the condition")
	}
	// Four more: below the threshold.
	for i := uint32(1); i <= 4; i++ {
		if f, ok := r.Observe(t0.Add(time.Duration(i)*time.Minute), 7+i); ok {
			t.Fatalf("restart %d: %+v", i, f)
		}
	}
	f, ok := r.Observe(t0.Add(5*time.Minute), 12)
	if !ok || f.Status != "True" || f.Event != "FrequentContainerdRestart" || f.Condition != "FrequentContainerdRestart" ||
		!strings.Contains(f.Evidence, "containerd.service restarted 5 times in the last 20m0s (NRestarts=12 since boot)") {
		t.Fatalf("fifth restart: %v %+v", ok, f)
	}
	// Still five within the window: no news.
	if f, ok := r.Observe(t0.Add(10*time.Minute), 12); ok {
		t.Fatalf("no restart: %+v", f)
	}
	// The first restart leaves the window: four left, False again.
	f, ok = r.Observe(t0.Add(21*time.Minute), 12)
	if !ok || f.Status != "False" || f.Event != "" || !strings.Contains(f.Evidence, "4 times") {
		t.Fatalf("window passed: %v %+v", ok, f)
	}
}

func TestRestartsCountSeveralBetweenReadings(t *testing.T) {
	r := &Restarts{Unit: "kubelet.service"}
	t0 := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	r.Observe(t0, 0)
	if f, ok := r.Observe(t0.Add(15*time.Second), 0); ok {
		t.Fatalf("no restart yet: %+v", f)
	}
	f, ok := r.Observe(t0.Add(30*time.Second), 5)
	if !ok || f.Condition != "FrequentKubeletRestart" || f.Status != "True" {
		t.Fatalf("five restarts in one reading: %v %+v", ok, f)
	}
}
