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
		{"3 zones of 1, surge 2", []string{"a", "b", "c"}, map[string]int{"a": 1, "b": 1, "c": 1}, 2, 1},
		{"3 zones uneven, surge 3", []string{"a", "b", "c"}, map[string]int{"a": 1, "b": 2, "c": 2}, 3, 1},
		{"12 in 3 zones, surge 5", []string{"a", "b", "c"}, map[string]int{"a": 4, "b": 4, "c": 4}, 5, 1},
		// A vSwitch in zone b added to the group before the rollout:
		// the new instances fill it.
		{"a zone added, surge 1", []string{"a", "b", "c"}, map[string]int{"a": 2, "c": 2}, 1, 1},
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

// oldMember is an old instance in zone whose Node is cordoned (rank 0),
// not Ready (rank 1) or Ready and schedulable (rank 2).
func oldMember(id, zone string, rank int) Member {
	m := Member{Instance: Instance{ID: id, Zone: zone, State: InService}, Node: &Node{Name: "node-" + id, Conditions: []Condition{{Type: "Ready", Status: "True"}}}}
	switch rank {
	case 0:
		m.Node.Unschedulable = true
	case 1:
		m.Node.Conditions[0].Status = "False"
	}
	return m
}

// Old Nodes that serve nothing (cordoned by an interrupted run, or not
// Ready) go first, up to the batch; the rest of the batch by zone, so that
// the zone a not-Ready Node left is not emptied of its old ones at once.
func TestRetireOrderNotServingFirst(t *testing.T) {
	for _, c := range []struct {
		name           string
		replace        []Member // in replaceRank order, as PlanRollout sorts them
		size, k, surge int
		want           string
	}{
		{"a NotReady Node before a Ready one of the zone ESS fills next", []Member{oldMember("i-b1", "b", 1), oldMember("i-a1", "a", 2)}, 2, 1, 2, "i-b1"},
		{"no more than the batch", []Member{oldMember("i-a1", "a", 0), oldMember("i-b1", "b", 0)}, 2, 1, 2, "i-a1"},
		{"then by zone", []Member{oldMember("i-b1", "b", 1), oldMember("i-a1", "a", 2), oldMember("i-b2", "b", 2)}, 3, 2, 3, "i-b1,i-a1"},
	} {
		p := &Plan{Replace: c.replace}
		if got := ids(retireOrder(p, c.size, c.k, c.surge)); got != c.want {
			t.Errorf("%s: retired %s, want %s", c.name, got, c.want)
		}
	}
}

// The done event's spread of the zones, and whether it is uneven (two
// zones more than one apart), which makes the rollout warn.
func TestZoneSpread(t *testing.T) {
	in := func(zones ...string) []Member {
		var ms []Member
		for i, z := range zones {
			ms = append(ms, Member{Instance: Instance{ID: fmt.Sprintf("i-%d", i), Zone: z}})
		}
		return ms
	}
	for _, c := range []struct {
		name   string
		p      Plan
		spread string
		uneven bool
	}{
		{"no instance", Plan{}, "", false},
		{"even", Plan{Current: in("b", "a"), Skipped: in("a", "b")}, "a=2, b=2", false},
		{"one apart", Plan{Current: in("a", "a"), Pending: in("b")}, "a=2, b=1", false},
		{"two apart", Plan{Current: in("a", "a", "a"), Replace: in("b")}, "a=3, b=1", true},
		{"one zone", Plan{Current: in("a", "a", "a")}, "a=3", false},
		{"a zone ESS did not answer", Plan{Current: in("", "a")}, "(no zone)=1, a=1", false},
	} {
		spread, uneven := zoneSpread(&c.p)
		if spread != c.spread || uneven != c.uneven {
			t.Errorf("%s: %q uneven %v, want %q %v", c.name, spread, uneven, c.spread, c.uneven)
		}
	}
}
