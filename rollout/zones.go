package rollout

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Zones. ESS places the instances a scale-out launches, not drover: a group
// whose scaling policy is BALANCE spreads them evenly over the zones of its
// vSwitches — each launch into the zone that holds the fewest instances —
// and one whose policy is PRIORITY fills the first vSwitch's zone
// (help/en/auto-scaling/user-guide/scaling-policy). What drover chooses is
// which old instance goes next, and that decides where ESS's next launch
// lands: after a removal the zone left with the fewest instances is the one
// BALANCE fills.
//
// So retireOrder picks, for each removal, the old instance whose zone makes
// the zone with the fewest instances afterwards one that still needs new
// instances the most (its share of the size minus the new and skipped
// instances it holds). Which of two zones that hold as many instances ESS
// takes is not documented, so a tie counts as the worse of the two. Then it
// keeps the zones' counts as even as possible, then takes the zone with the
// most old instances left. The result: the old instances of every zone go in
// turn, no zone loses its old Nodes all at once, and a BALANCE group ends as
// evenly spread as it started (events name each instance's zone; the done
// event the spread). A zone out of stock (ESS launches elsewhere) or a
// PRIORITY group can end uneven: rollout says so in a warning, and
// RebalanceInstances evens a BALANCE group out.

// retireOrder picks up to k old instances of p to retire now, from a group
// that returns to size instances and launches up to surge at a time. Cordoned old Nodes (an interrupted run
// was draining them) and Nodes not Ready go first, as replaceRank orders
// them; the rest by zone as above.
func retireOrder(p *Plan, size, k, surge int) []Member {
	count, needs := map[string]int{}, map[string]int{}
	for _, l := range [][]Member{p.Current, p.Pending, p.Skipped} {
		for _, m := range l {
			count[m.Instance.Zone]++
			needs[m.Instance.Zone]-- // instances that stay
		}
	}
	left := map[string][]Member{}
	var out []Member
	for _, m := range p.Replace { // in replaceRank order
		count[m.Instance.Zone]++
		if replaceRank(m) < 2 && len(out) < k {
			out = append(out, m)
			count[m.Instance.Zone]--
			continue
		}
		left[m.Instance.Zone] = append(left[m.Instance.Zone], m)
	}
	zones := slices.Sorted(maps.Keys(count))
	// needs: the zone's even share of size, less what it keeps (times the
	// number of zones, to stay in integers).
	for _, z := range zones {
		needs[z] = size + needs[z]*len(zones)
	}
	for len(out) < k {
		// Zone "" is an instance whose zone ESS did not answer.
		found, best, bestScore, bestSpread := false, "", 0, 0
		for _, z := range zones {
			if len(left[z]) == 0 {
				continue
			}
			count[z]--
			score := launchesNeed(count, needs, zones, min(surge, oldsLeft(left)-1))
			spread := spreadOf(count, zones)
			count[z]++
			better := !found || score > bestScore ||
				(score == bestScore && (spread < bestSpread || (spread == bestSpread && len(left[z]) > len(left[best]))))
			if better {
				found, best, bestScore, bestSpread = true, z, score, spread
			}
		}
		if !found {
			break
		}
		out = append(out, left[best][0])
		left[best] = left[best][1:]
		count[best]--
	}
	return out
}

// launchesNeed is how much the zones ESS's next n BALANCE launches go to
// need an instance, the least of them: each launch goes to a zone holding
// the fewest instances, and among those to the least needy one (ESS's
// choice between them is not documented: the worst is assumed).
func launchesNeed(count, needs map[string]int, zones []string, n int) int {
	c, nd := maps.Clone(count), maps.Clone(needs)
	worst := 0
	for i := range max(n, 1) {
		low := c[zones[0]]
		for _, z := range zones {
			low = min(low, c[z])
		}
		found, at := false, ""
		for _, z := range zones {
			if c[z] == low && (!found || nd[z] < nd[at]) {
				found, at = true, z
			}
		}
		if i == 0 || nd[at] < worst {
			worst = nd[at]
		}
		c[at]++
		nd[at] -= len(zones)
	}
	return worst
}

func oldsLeft(left map[string][]Member) int {
	n := 0
	for _, l := range left {
		n += len(l)
	}
	return n
}

func spreadOf(count map[string]int, zones []string) int {
	lo, hi := count[zones[0]], count[zones[0]]
	for _, z := range zones {
		lo, hi = min(lo, count[z]), max(hi, count[z])
	}
	return hi - lo
}

// zoneSpread is "zone=n, …" of the instances a plan counts (sorted by
// zone), and whether it is uneven: two zones differ by more than one.
func zoneSpread(p *Plan) (string, bool) {
	count := map[string]int{}
	for _, l := range [][]Member{p.Current, p.Pending, p.Replace, p.Skipped} {
		for _, m := range l {
			count[m.Instance.Zone]++
		}
	}
	zones := slices.SortedFunc(maps.Keys(count), func(a, b string) int { return cmp.Compare(a, b) })
	if len(zones) == 0 {
		return "", false
	}
	parts := make([]string, len(zones))
	for i, z := range zones {
		parts[i] = fmt.Sprintf("%s=%d", cmp.Or(z, "(no zone)"), count[z])
	}
	return strings.Join(parts, ", "), spreadOf(count, zones) > 1
}
