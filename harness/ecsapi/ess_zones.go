package ecsapi

import (
	"fmt"
	"strings"
)

// Zones and vSwitches. A scaling group launches into the vSwitches it
// names (VSwitchIds, in priority order), and an instance's zone is its
// vSwitch's. The group's scaling policy (MultiAZPolicy) decides which one
// a launch takes (Scaling policies, help/en/auto-scaling/user-guide/scaling-policy):
//
//   - PRIORITY (the default): the zone of the highest-priority vSwitch; when
//     ESS cannot create instances there, the zone of the next one;
//   - BALANCE: instances spread evenly across the group's zones; when they
//     end up uneven (the docs name insufficient inventory), RebalanceInstances
//     evens them out (help/en/auto-scaling/developer-reference/
//     api-ess-2022-02-22-rebalanceinstances) — so a launch whose zone is out
//     of stock goes to another zone of the group.
//
// Not documented, and chosen here: which of two BALANCE zones that hold as
// many instances a launch takes (the one whose vSwitch comes first); that a
// launch that fell back to another zone ends its activity Successful;
// COST_OPTIMIZED (spot prices) is placed like PRIORITY.

// VSwitch is one vSwitch of a group, in its zone.
type VSwitch struct{ ID, ZoneID string }

// vswitches are the group's vSwitches in priority order: the configured
// ones, or one in ZoneID.
func (g *group) vswitches() []VSwitch {
	if len(g.VSwitches) > 0 {
		return g.VSwitches
	}
	return []VSwitch{{ID: "vsw-" + strings.TrimPrefix(g.ID, "asg-"), ZoneID: g.ZoneID}}
}

func (g *group) vswitchIDs() []string {
	var ids []string
	for _, v := range g.vswitches() {
		ids = append(ids, v.ID)
	}
	return ids
}

// zoneCount counts the instances of the group that stay (not leaving) by
// zone, the ones being launched included.
func (g *group) zoneCount() map[string]int {
	n := map[string]int{}
	for _, m := range g.members {
		if !m.leaving() {
			n[m.inst.zone]++
		}
	}
	return n
}

// place picks the vSwitch of the next launch of g by its MultiAZPolicy,
// skipping the zones out of stock; ok is false when every zone of the
// group is, and then zones names them. The caller holds s.mu.
func (s *Server) place(g *group) (vs VSwitch, ok bool, zones []string) {
	count := g.zoneCount()
	for _, v := range g.vswitches() {
		if s.noStock[v.ZoneID] {
			if !contains(zones, v.ZoneID) {
				zones = append(zones, v.ZoneID)
			}
			continue
		}
		switch {
		case !ok:
			vs, ok = v, true
		case g.MultiAZPolicy == "BALANCE" && count[v.ZoneID] < count[vs.ZoneID]:
			vs = v
		}
	}
	return vs, ok, zones
}

// errNoStockIn is the launch error when every zone of the group is out of
// stock: ECS's OperationDenied.NoStock (RunInstances' error table,
// help/en/ecs/developer-reference/api-runinstances: "The requested resource
// is sold out in the specified zone; try other types of resources or other
// regions and zones.").
func errNoStockIn(zones []string) *launchError {
	e := errNoStock()
	e.zones = zones
	return e
}

func (e *launchError) zoneList(fallback string) string {
	if len(e.zones) == 0 {
		return fallback
	}
	return strings.Join(e.zones, ", ")
}

// Zones answers the group's instances by zone (for tests that check the
// spread without paging DescribeScalingInstances).
func (s *Server) Zones(groupID string) map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[groupID]
	if g == nil {
		return nil
	}
	return g.zoneCount()
}

// Members answers how many instances the group holds in any lifecycle
// state, the count DescribeScalingInstances would page through (for tests
// that watch the surge at every call without calling the API themselves).
func (s *Server) Members(groupID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g := s.groups[groupID]; g != nil {
		return len(g.members)
	}
	return 0
}

func (v VSwitch) String() string { return fmt.Sprintf("%s (%s)", v.ID, v.ZoneID) }
