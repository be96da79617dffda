package rollout

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// simulateBalance rolls a group of olds[z] old instances per zone with
// surge new ones at a time, ESS placing each launch BALANCE-style in the
// zone with the fewest instances (ties: the first zone, or the last with
// lastOnTie), retiring as retireOrder says, up to maxUnavailable a round.
// It returns the zones' final counts and the zones of the retirements.
func simulateBalance(zones []string, olds map[string]int, surge, maxUnavailable int, lastOnTie bool) (map[string]int, []string) {
	p := &Plan{}
	size, n := 0, 0
	for _, z := range zones {
		for range olds[z] {
			n++
			p.Replace = append(p.Replace, Member{Instance: Instance{ID: fmt.Sprintf("i-old%03d", n), Zone: z, State: InService},
				Node: &Node{Conditions: []Condition{{Type: "Ready", Status: "True"}}}})
			size++
		}
	}
	var order []string
	count := func() map[string]int {
		c := map[string]int{}
		for _, l := range [][]Member{p.Current, p.Replace} {
			for _, m := range l {
				c[m.Instance.Zone]++
			}
		}
		return c
	}
	for len(p.Replace) > 0 {
		for range min(surge, len(p.Replace)) - (len(p.Current) + len(p.Replace) - size) {
			c := count()
			best := zones[0]
			for _, z := range zones {
				if c[z] < c[best] || (lastOnTie && c[z] == c[best]) {
					best = z
				}
			}
			n++
			p.Current = append(p.Current, Member{Instance: Instance{ID: fmt.Sprintf("i-new%03d", n), Zone: best, State: InService}})
		}
		for len(p.Current)+len(p.Replace) > size && len(p.Replace) > 0 {
			batch := retireOrder(p, size, min(maxUnavailable, len(p.Current)+len(p.Replace)-size), surge)
			for _, m := range batch {
				order = append(order, m.Instance.Zone)
				p.Replace = slices.DeleteFunc(p.Replace, func(x Member) bool { return x.Instance.ID == m.Instance.ID })
			}
		}
	}
	return count(), order
}

// The retirement order keeps a BALANCE group balanced whatever ESS does
// with a tie between two zones, and takes the zones in turn.
func TestRetireOrderBalancesZones(t *testing.T) {
	for _, c := range []struct {
		name                  string
		zones                 []string
		olds                  map[string]int
		surge, maxUnavailable int
	}{
		{"2 zones, surge 1", []string{"a", "b"}, map[string]int{"a": 2, "b": 2}, 1, 1},
		{"3 zones, surge 1", []string{"a", "b", "c"}, map[string]int{"a": 2, "b": 2, "c": 2}, 1, 1},
		{"3 zones uneven, surge 2", []string{"a", "b", "c"}, map[string]int{"a": 3, "b": 3, "c": 2}, 2, 1},
		{"50 in 2 zones, surge 10", []string{"a", "b"}, map[string]int{"a": 25, "b": 25}, 10, 1},
		{"50 in 3 zones, surge 10, 3 at a time", []string{"a", "b", "c"}, map[string]int{"a": 17, "b": 17, "c": 16}, 10, 3},
	} {
		for _, last := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, ties to the last zone %v", c.name, last), func(t *testing.T) {
				got, order := simulateBalance(c.zones, c.olds, c.surge, c.maxUnavailable, last)
				lo, hi := got[c.zones[0]], got[c.zones[0]]
				for _, z := range c.zones {
					lo, hi = min(lo, got[z]), max(hi, got[z])
				}
				if hi-lo > 1 {
					t.Errorf("final zones %v (retired in order %s), want within one of each other", got, strings.Join(order, ""))
				}
				// No zone loses its old instances all at once: the
				// first len(zones) removals touch every zone with olds.
				if first := order[:len(c.zones)]; len(c.zones) > 1 && slices.Equal(first, slices.Repeat(first[:1], len(first))) {
					t.Errorf("the first %d removals are all from zone %s: %s", len(first), first[0], strings.Join(order, ""))
				}
			})
		}
	}
}
