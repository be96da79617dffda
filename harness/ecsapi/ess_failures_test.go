package ecsapi

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/requests"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ess"
)

// scaleOut is ScaleWithAdjustment +n; it returns the activity's ID.
func scaleOut(t *testing.T, e *env, group string, n int) string {
	t.Helper()
	sa := ess.CreateScaleWithAdjustmentRequest()
	sa.ScalingGroupId, sa.AdjustmentType, sa.AdjustmentValue = group, "QuantityChangeInCapacity", requests.NewInteger(n)
	resp, err := e.ess.ScaleWithAdjustment(sa)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ScalingActivityId == "" {
		t.Fatal("ScaleWithAdjustment answered no ScalingActivityId")
	}
	return resp.ScalingActivityId
}

// activity is DescribeScalingActivities of one activity by its ID alone
// (no ScalingGroupId), once it is no longer InProgress.
func settled(t *testing.T, e *env, id string) ess.ScalingActivity {
	t.Helper()
	var a ess.ScalingActivity
	eventually(t, "activity "+id+" to settle", func() bool {
		da := ess.CreateDescribeScalingActivitiesRequest()
		da.ScalingActivityId = &[]string{id}
		resp, err := e.ess.DescribeScalingActivities(da)
		if err != nil {
			t.Fatal(err)
		}
		if l := resp.ScalingActivities.ScalingActivity; len(l) != 1 || l[0].ScalingActivityId != id {
			t.Fatalf("DescribeScalingActivities %s: %+v", id, l)
		} else {
			a = l[0]
		}
		return a.StatusCode != "InProgress"
	})
	return a
}

// A launch ECS refuses fails its scaling activity with ECS's error (zone
// out of stock: Failed; quota used up for one of two: Warning); the desired
// capacity stays, and ESS keeps trying until the cause is gone. An
// adjustment that cannot change the capacity is Rejected.
func TestFailedScalingActivities(t *testing.T) {
	l := &fakeLauncher{}
	e, group, _, _ := groupEnv(t, l, 1)
	eventually(t, "one InService instance", func() bool { return len(scalingInstances(t, e, group, InService)) == 1 })
	waitIdle(t, e, group)

	zone := testRegion + "-a"
	e.srv.StockOut(zone, true)
	a := settled(t, e, scaleOut(t, e, group, 1))
	if a.StatusCode != "Failed" || a.ErrorCode != NoStock || !strings.Contains(a.ErrorMessage, "sold out") ||
		!strings.Contains(a.StatusMessage, NoStock) || !strings.Contains(a.StatusMessage, zone) ||
		a.CreatedCapacity != 0 || len(a.CreatedInstances.CreatedInstance) != 0 {
		t.Fatalf("activity of a scale-out into a zone out of stock: %+v", a)
	}
	if g, _ := describeGroup(t, e, group); g.DesiredCapacity != 2 {
		t.Fatalf("desired capacity %d after the failed scale-out, want 2 (ESS keeps it)", g.DesiredCapacity)
	}
	// ESS tries again on its own, and fails again while the zone is out.
	eventually(t, "a retry that fails too", func() bool {
		da := ess.CreateDescribeScalingActivitiesRequest()
		da.ScalingGroupId, da.StatusCode = group, "Failed"
		resp, err := e.ess.DescribeScalingActivities(da)
		return err == nil && resp.TotalCount >= 2
	})
	e.srv.StockOut(zone, false)
	eventually(t, "two InService instances once the stock is back", func() bool { return len(scalingInstances(t, e, group, InService)) == 2 })
	waitIdle(t, e, group)

	// Room for one more instance in the region, two asked for.
	e.srv.SetInstanceQuota(3)
	a = settled(t, e, scaleOut(t, e, group, 2))
	if a.StatusCode != "Warning" || a.ErrorCode != ElasticQuota || !strings.Contains(a.StatusMessage, ElasticQuota) {
		t.Fatalf("activity of a scale-out past the quota: %+v", a)
	}
	if n := len(scalingInstances(t, e, group, InService)); n != 3 {
		t.Fatalf("%d InService instances, want 3 (one launched, one refused)", n)
	}
	e.srv.SetInstanceQuota(0)
	eventually(t, "MaxSize instances once the quota is raised", func() bool { return len(scalingInstances(t, e, group, InService)) == 4 })
	waitIdle(t, e, group)

	// At MaxSize: nothing to launch, the request is rejected.
	a = settled(t, e, scaleOut(t, e, group, 1))
	if a.StatusCode != "Rejected" || a.StatusMessage != "To execute the specified scaling rule, the total capacity will not change." || !strings.Contains(a.Cause, "MaxSize 4") {
		t.Fatalf("activity of a scale-out at MaxSize: %+v", a)
	}
	if g, _ := describeGroup(t, e, group); g.DesiredCapacity != 4 {
		t.Fatalf("desired capacity %d after a rejected scale-out, want 4", g.DesiredCapacity)
	}
}

// A launch that cannot succeed (the image's disk gone, as in a CI run
// whose emulator lost it) fails its scaling activity with the reason in
// StatusMessage, and ESS does not try again before DefaultLaunchRetry: one
// Failed activity, not a retry storm (a tenth of a second between tries
// once logged thousands of failed launches a minute). The retry itself is
// TestFailedLaunchIsRetried's, with a short LaunchRetry.
func TestLaunchRetry(t *testing.T) {
	e := newEnv(t, Config{Launcher: &fakeLauncher{}}) // the default LaunchRetry
	e.srv.CreateBucket("images")
	put(t, e, "images", "a.raw", "A")
	img, err := e.ecs.ImportImage(importReq("images", "a.raw", "A"))
	if err != nil {
		t.Fatal(err)
	}
	e.srv.mu.Lock()
	disk := e.srv.images[img.ImageId].disk
	e.srv.mu.Unlock()
	if err := os.Remove(disk); err != nil {
		t.Fatal(err)
	}
	ct := ecs.CreateCreateLaunchTemplateRequest()
	ct.LaunchTemplateName, ct.ImageId = "pool", img.ImageId
	lt, err := e.ecs.CreateLaunchTemplate(ct)
	if err != nil {
		t.Fatal(err)
	}
	group := e.srv.AddScalingGroup(ScalingGroup{LaunchTemplateID: lt.LaunchTemplateId, MinSize: 0, MaxSize: 2, DesiredCapacity: 1})
	activities := func() []ess.ScalingActivity {
		da := ess.CreateDescribeScalingActivitiesRequest()
		da.ScalingGroupId = group
		resp, err := e.ess.DescribeScalingActivities(da)
		if err != nil {
			t.Fatal(err)
		}
		return resp.ScalingActivities.ScalingActivity
	}
	eventually(t, "a Failed scaling activity", func() bool {
		l := activities()
		return len(l) > 0 && l[0].StatusCode == "Failed"
	})
	start := time.Now()
	time.Sleep(3 * time.Second)
	l := activities()
	if len(l) != 1 || l[0].StatusCode != "Failed" || !strings.Contains(l[0].StatusMessage, "no such file") {
		t.Fatalf("%s after the first failed launch, activities (newest first) %+v; want the one Failed, saying why (the image's disk is missing)", time.Since(start).Round(time.Second), l)
	}
	if g, _ := describeGroup(t, e, group); g.DesiredCapacity != 1 || len(scalingInstances(t, e, group, "")) != 0 {
		t.Fatalf("desired capacity %d, %d instances; want 1 kept (ESS tries again later) and none", g.DesiredCapacity, len(scalingInstances(t, e, group, "")))
	}
}
