package rollout

import (
	"context"
	"fmt"
	"sort"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/requests"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ess"

	"github.com/drover-os/drover/cloud/aliyun"
)

// GroupTags implements Cloud.
func (a *Aliyun) GroupTags(ctx context.Context, groupID string) (map[string]string, error) {
	out := map[string]string{}
	token := ""
	for {
		req := ess.CreateListTagResourcesRequest()
		req.ResourceType, req.ResourceId, req.NextToken = "scalinggroup", &[]string{groupID}, token
		var resp *ess.ListTagResourcesResponse
		err := aliyun.Retry(ctx, "ListTagResources scalinggroup "+groupID, func() (err error) {
			resp, err = a.ESS.ListTagResources(req)
			return err
		})
		if err != nil {
			return nil, err
		}
		for _, t := range resp.TagResources.TagResource {
			if t.ResourceId == groupID {
				out[t.TagKey] = t.TagValue
			}
		}
		if token = resp.NextToken; token == "" {
			return out, nil
		}
	}
}

// SetGroupTags implements Cloud.
func (a *Aliyun) SetGroupTags(ctx context.Context, groupID string, tags map[string]string) error {
	req := ess.CreateTagResourcesRequest()
	req.ResourceType, req.ResourceId = "scalinggroup", &[]string{groupID}
	var ts []ess.TagResourcesTag
	for k, v := range tags {
		ts = append(ts, ess.TagResourcesTag{Key: k, Value: v})
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Key < ts[j].Key })
	req.Tag = &ts
	return aliyun.Retry(ctx, "TagResources scalinggroup "+groupID, func() error {
		_, err := a.ESS.TagResources(req)
		return err
	})
}

// RemoveGroupTags implements Cloud.
func (a *Aliyun) RemoveGroupTags(ctx context.Context, groupID string, keys []string) error {
	req := ess.CreateUntagResourcesRequest()
	req.ResourceType, req.ResourceId, req.TagKey = "scalinggroup", &[]string{groupID}, &keys
	return aliyun.Retry(ctx, fmt.Sprintf("UntagResources scalinggroup %s %v", groupID, keys), func() error {
		_, err := a.ESS.UntagResources(req)
		return err
	})
}

// LastActivity implements Cloud.
func (a *Aliyun) LastActivity(ctx context.Context, groupID string) (Activity, bool, error) {
	req := ess.CreateDescribeScalingActivitiesRequest()
	req.ScalingGroupId, req.PageSize = groupID, requests.NewInteger(1)
	var resp *ess.DescribeScalingActivitiesResponse
	err := aliyun.Retry(ctx, "DescribeScalingActivities "+groupID, func() (err error) {
		resp, err = a.ESS.DescribeScalingActivities(req)
		return err
	})
	if err != nil || len(resp.ScalingActivities.ScalingActivity) == 0 {
		return Activity{}, false, err
	}
	return activityOf(resp.ScalingActivities.ScalingActivity[0]), true, nil
}

// Activity implements Cloud.
func (a *Aliyun) Activity(ctx context.Context, groupID, id string) (Activity, bool, error) {
	req := ess.CreateDescribeScalingActivitiesRequest()
	req.ScalingGroupId, req.ScalingActivityId = groupID, &[]string{id}
	var resp *ess.DescribeScalingActivitiesResponse
	err := aliyun.Retry(ctx, "DescribeScalingActivities "+groupID+" "+id, func() (err error) {
		resp, err = a.ESS.DescribeScalingActivities(req)
		return err
	})
	if err != nil {
		return Activity{}, false, err
	}
	for _, x := range resp.ScalingActivities.ScalingActivity {
		if x.ScalingActivityId == id {
			return activityOf(x), true, nil
		}
	}
	return Activity{}, false, nil
}

func activityOf(x ess.ScalingActivity) Activity {
	return Activity{ID: x.ScalingActivityId, Description: x.Description, Cause: x.Cause, StatusCode: x.StatusCode,
		StatusMessage: x.StatusMessage, ErrorCode: x.ErrorCode, ErrorMessage: x.ErrorMessage}
}
