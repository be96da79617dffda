package ecsapi

import (
	"strings"
	"testing"

	"github.com/aliyun/alibaba-cloud-sdk-go/services/ess"
)

// zonesOf counts the group's instances by the ZoneId
// DescribeScalingInstances answers.
func zonesOf(t *testing.T, e *env, group string) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, si := range scalingInstances(t, e, group, "") {
		n[si.ZoneId]++
	}
	return n
}

// A group's vSwitches place its instances: BALANCE spreads them evenly over
// the zones, PRIORITY fills the first vSwitch's zone; a zone out of stock
// is skipped, and only when every zone of the group is out does the launch
// fail, naming them.
func TestZonesAndVSwitches(t *testing.T) {
	e, _, ltID, _ := groupEnv(t, &fakeLauncher{}, 0)
	za, zb := testRegion+"-a", testRegion+"-b"
	vsw := []VSwitch{{ID: "vsw-a", ZoneID: za}, {ID: "vsw-b", ZoneID: zb}}
	balance := e.srv.AddScalingGroup(ScalingGroup{Name: "balance", LaunchTemplateID: ltID, LaunchTemplateVersion: "1",
		MinSize: 0, MaxSize: 10, DesiredCapacity: 4, VSwitches: vsw, MultiAZPolicy: "BALANCE"})
	priority := e.srv.AddScalingGroup(ScalingGroup{Name: "priority", LaunchTemplateID: ltID, LaunchTemplateVersion: "1",
		MinSize: 0, MaxSize: 10, DesiredCapacity: 3, VSwitches: vsw})
	eventually(t, "4 + 3 InService instances", func() bool {
		return len(scalingInstances(t, e, balance, InService)) == 4 && len(scalingInstances(t, e, priority, InService)) == 3
	})
	waitIdle(t, e, balance)
	waitIdle(t, e, priority)
	if z := zonesOf(t, e, balance); z[za] != 2 || z[zb] != 2 {
		t.Errorf("BALANCE group's zones: %v, want 2 and 2", z)
	}
	if z := zonesOf(t, e, priority); z[za] != 3 {
		t.Errorf("PRIORITY group's zones: %v, want all 3 in %s (the first vSwitch)", z, za)
	}
	g, _ := describeGroup(t, e, balance)
	if got := strings.Join(g.VSwitchIds.VSwitchId, ","); got != "vsw-a,vsw-b" || g.VSwitchId != "vsw-a" || g.MultiAZPolicy != "BALANCE" {
		t.Errorf("DescribeScalingGroups: VSwitchIds %q, VSwitchId %q, MultiAZPolicy %q", got, g.VSwitchId, g.MultiAZPolicy)
	}

	// Zone a out of stock: both policies launch in zone b, and the
	// activity succeeds.
	e.srv.StockOut(za, true)
	for _, group := range []string{balance, priority} {
		before := zonesOf(t, e, group)
		if a := settled(t, e, scaleOut(t, e, group, 2)); a.StatusCode != "Successful" {
			t.Errorf("scale-out with %s out of stock and %s not: %+v", za, zb, a)
		}
		if z := zonesOf(t, e, group); z[za] != before[za] || z[zb] != before[zb]+2 {
			t.Errorf("zones after a scale-out with %s out of stock: %v (were %v), want both new ones in %s", za, z, before, zb)
		}
	}

	// Every zone out: the launch fails with ECS's NoStock, naming both.
	e.srv.StockOut(zb, true)
	a := settled(t, e, scaleOut(t, e, balance, 1))
	if a.StatusCode != "Failed" || a.ErrorCode != NoStock || !strings.Contains(a.StatusMessage, za) || !strings.Contains(a.StatusMessage, zb) {
		t.Errorf("scale-out with every zone out of stock: %+v", a)
	}
	// ESS keeps retrying the desired capacity; lower it so it stops.
	mg := ess.CreateModifyScalingGroupRequest()
	mg.ScalingGroupId, mg.DesiredCapacity = balance, "6"
	if _, err := e.ess.ModifyScalingGroup(mg); err != nil {
		t.Fatal(err)
	}
	e.srv.StockOut(za, false)
	e.srv.StockOut(zb, false)
	waitIdle(t, e, balance)
}
