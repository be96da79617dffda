//go:build integration

package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/drover-os/drover/agent/userdata"
	"github.com/drover-os/drover/harness/ecsapi"
)

// zones: a BALANCE group of four in two zones (two vSwitches) rolled one at
// a time. ESS places each new instance; drover's choice of which old one
// goes next keeps the zones even: the removals (RemoveInstances, in the
// order the emulator saw them) take the zones in turn, the group ends two
// and two, and each remove event names the zone ESS answered for it.
func (e *rolloutEnv) zones(t *testing.T) {
	// Zones of their own: StockOut in another scenario must not touch them.
	zx, zy := roRegion+"-x", roRegion+"-y"
	s, old := e.newScenarioWith(t, "zones", ecsapi.ScalingGroup{MinSize: 4, MaxSize: 4, DesiredCapacity: 4, MultiAZPolicy: "BALANCE",
		VSwitches: []ecsapi.VSwitch{{ID: "vsw-zones-x", ZoneID: zx}, {ID: "vsw-zones-y", ZoneID: zy}}}, 4)
	ud, err := userdata.Render(s.spec("a", e.cluster.BootstrapToken()))
	if err != nil {
		t.Fatal(err)
	}
	zoneOf := map[string]string{}
	for _, in := range s.instances(t) {
		zoneOf[in.InstanceId] = in.ZoneId
	}
	if got := s.zoneCount(t); got[zx] != 2 || got[zy] != 2 {
		t.Fatalf("setup: zones %v, want 2 in %s and 2 in %s", got, zx, zy)
	}
	var mu sync.Mutex
	var removed []string
	defer e.srv.AfterCall(func(c ecsapi.Call) {
		if c.Product != "ess" || c.Action != "RemoveInstances" || c.Params.Get("ScalingGroupId") != s.group {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for i := 1; c.Params.Get("InstanceId."+strconv.Itoa(i)) != ""; i++ {
			removed = append(removed, c.Params.Get("InstanceId."+strconv.Itoa(i)))
		}
	})()

	stdout, stderr, code := s.rollout(t, "--image", e.imageB, "--userdata", s.pool, "--ready-timeout", "60s", "--json")
	if code != 0 {
		t.Fatalf("rollout exit %d, want 0\n%s", code, stderr)
	}
	mu.Lock()
	order := make([]string, len(removed))
	for i, id := range removed {
		order[i] = zoneOf[id]
	}
	mu.Unlock()
	if len(order) != 4 || order[0] == order[1] {
		t.Errorf("removals by zone %v: want four, the first two in different zones", order)
	}
	if got := s.zoneCount(t); got[zx] != 2 || got[zy] != 2 {
		t.Errorf("after the rollout: zones %v, want 2 in %s and 2 in %s (removals by zone %v)", got, zx, zy, order)
	}
	now := s.instanceIDs(t)
	for _, id := range old {
		if contains(now, id) {
			t.Errorf("old instance %s is still in the group", id)
		}
	}
	s.serving(t, now, roBuildB, ud)
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var ev struct{ Event, Instance, Message string }
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("--json line %q: %v", line, err)
		}
		if ev.Event == "remove" && !strings.Contains(ev.Message, "zone "+zoneOf[ev.Instance]) {
			t.Errorf("remove event of %s does not name its zone %s: %s", ev.Instance, zoneOf[ev.Instance], ev.Message)
		}
	}
}

// zoneCount is the group's instances by DescribeScalingInstances ZoneId.
func (s *scenario) zoneCount(t *testing.T) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, in := range s.instances(t) {
		n[in.ZoneId]++
	}
	return n
}
