package conformance

import (
	"regexp"
	"strings"
	"testing"
)

// TestResolveSubset: each part resolves to the one [NodeConformance] spec
// it names; none, several, one the plan skips, or only a spec without the
// tag is an error
// naming the part; the focus selects those specs and no other.
func TestResolveSubset(t *testing.T) {
	all := []string{
		"[sig-storage] ConfigMap should be consumable from pods in volume [NodeConformance] [Conformance]",
		"[sig-storage] ConfigMap should be consumable from pods in volume with mappings [NodeConformance] [Conformance]",
		"[sig-node] Pods should get a host IP [NodeConformance] [Conformance]",
		"[sig-node] Pods should be slow [Slow]",
		"[sig-node] Container Runtime blackbox test should not be able to pull image from invalid registry [NodeConformance] [Serial]",
	}
	got, err := ResolveSubset(all, []string{"Pods should get a host IP", "in volume with mappings"})
	if err != nil || len(got) != 2 || got[0] != all[2] || got[1] != all[1] {
		t.Fatalf("ResolveSubset = %q, %v", got, err)
	}
	focus := regexp.MustCompile(FocusOn(got))
	for i, name := range all {
		if want := i == 1 || i == 2; focus.MatchString(name) != want {
			t.Errorf("focus %s matches %q: %v, want %v", focus, name, !want, want)
		}
	}
	for _, bad := range []string{"in volume", "no such spec", "Pods should be slow", "invalid registry"} {
		if _, err := ResolveSubset(all, []string{bad}); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("part %q: %v", bad, err)
		}
	}
}

// TestJudgeSubset: every named spec must have passed; a failed, skipped or
// missing one is named with its reason.
func TestJudgeSubset(t *testing.T) {
	res := &Result{Specs: []Outcome{{Name: "a", State: "passed"}, {Name: "b", State: "failed", Reason: "timed out"}, {Name: "c", State: "skipped", Reason: "outside"}}}
	if _, err := JudgeSubset(res, []string{"a"}); err != nil {
		t.Errorf("all passed: %v", err)
	}
	_, err := JudgeSubset(res, []string{"a", "b", "c", "d"})
	if err == nil || !strings.Contains(err.Error(), "b: failed (timed out)") || !strings.Contains(err.Error(), "c: skipped") ||
		!strings.Contains(err.Error(), "d: not in") || strings.Contains(err.Error(), "a:") {
		t.Errorf("JudgeSubset = %v", err)
	}
}
