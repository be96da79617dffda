package caps

import (
	"slices"
	"testing"
)

func TestMasksAndDropPlan(t *testing.T) {
	if m := Masks(DACReadSearch); m != [2]uint32{1 << 2, 0} {
		t.Errorf("Masks(CAP_DAC_READ_SEARCH) = %#x", m)
	}
	if m := Masks(40); m != [2]uint32{0, 1 << 8} {
		t.Errorf("Masks(40) = %#x", m)
	}
	plan := DropPlan(40, DACReadSearch)
	if len(plan) != 40 || slices.Contains(plan, DACReadSearch) || !slices.Contains(plan, SetPCap) || plan[len(plan)-1] != 40 {
		t.Errorf("DropPlan(40, 2) = %v: want 0..40 without 2 (CAP_SETPCAP dropped too)", plan)
	}
}
