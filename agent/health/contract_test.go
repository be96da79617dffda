package health

import (
	"slices"
	"testing"

	"github.com/drover-os/drover/nodecontract"
)

// Every condition the agent can set True is one drover rollout --repair
// reads: a condition missing from nodecontract.UnhealthyConditions would
// be set on a broken node that repair then never replaces.
func TestConditionsAreTheContracts(t *testing.T) {
	owned := []string{NICLinkDown}
	for _, r := range rules {
		if r.condition != "" {
			owned = append(owned, r.condition)
		}
	}
	for _, c := range RestartConditions {
		owned = append(owned, c)
	}
	for _, c := range owned {
		if !slices.Contains(nodecontract.UnhealthyConditions(), c) {
			t.Errorf("condition %s is not in nodecontract.UnhealthyConditions %v", c, nodecontract.UnhealthyConditions())
		}
	}
}
