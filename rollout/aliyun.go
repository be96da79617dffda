package rollout

import (
	"context"
	"encoding/base64"
	"fmt"
	"sort"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/requests"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ess"

	"github.com/drover-os/drover/cloud/aliyun"
	"github.com/drover-os/drover/nodecontract"
)

// Aliyun is Cloud over the ECS and ESS SDK clients; every call goes
// through aliyun.Retry.
type Aliyun struct {
	ECS *ecs.Client
	ESS *ess.Client
	// ActivityWait is the pause before asking again when ESS refuses a
	// change while a scaling activity of the group is in progress.
	ActivityWait time.Duration
}

// NewAliyun wraps the clients aliyun.New built.
func NewAliyun(c *aliyun.Clients) *Aliyun {
	return &Aliyun{ECS: c.ECS, ESS: c.ESS, ActivityWait: 5 * time.Second}
}

// activityTimeout bounds the wait for a group's scaling activity (a
// launch, a removal) to end before a change is accepted.
const activityTimeout = 15 * time.Minute

// change calls fn with aliyun.Retry, and again while ESS refuses it with
// ScalingActivityInProgress: ESS runs one scaling activity per group at a
// time, and the removal a rollout just asked for is one.
func (a *Aliyun) change(ctx context.Context, what string, fn func() error) error {
	deadline := time.Now().Add(activityTimeout)
	for {
		err := aliyun.Retry(ctx, what, fn)
		if !aliyun.IsCode(err, "ScalingActivityInProgress") || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (waiting for the group's scaling activity: %v)", what, ctx.Err(), err)
		case <-time.After(a.ActivityWait):
		}
	}
}

// Group implements Cloud.
func (a *Aliyun) Group(ctx context.Context, id string) (Group, error) {
	req := ess.CreateDescribeScalingGroupsRequest()
	req.ScalingGroupId = &[]string{id}
	var resp *ess.DescribeScalingGroupsResponse
	err := aliyun.Retry(ctx, "DescribeScalingGroups "+id, func() (err error) {
		resp, err = a.ESS.DescribeScalingGroups(req)
		return err
	})
	if err != nil {
		return Group{}, err
	}
	for _, g := range resp.ScalingGroups.ScalingGroup {
		if g.ScalingGroupId == id {
			// DesiredCapacity is answered only by a group that has one; a
			// group that has one and wants 0 instances answers
			// EnableDesiredCapacity (an empty group without it is taken
			// as having none).
			return Group{ID: id, TemplateID: g.LaunchTemplateId, TemplateVersion: g.LaunchTemplateVersion,
				MinSize: g.MinSize, MaxSize: g.MaxSize, DesiredCapacity: g.DesiredCapacity,
				NoDesiredCapacity: !g.EnableDesiredCapacity && g.DesiredCapacity == 0}, nil
		}
	}
	return Group{}, fmt.Errorf("scaling group %s: not found in the region: check --scaling-group and --region", id)
}

// Instances implements Cloud.
func (a *Aliyun) Instances(ctx context.Context, groupID string) ([]Instance, error) {
	var out []Instance
	for page := 1; ; page++ {
		req := ess.CreateDescribeScalingInstancesRequest()
		req.ScalingGroupId = groupID
		req.PageNumber = requests.NewInteger(page)
		req.PageSize = requests.NewInteger(50)
		var resp *ess.DescribeScalingInstancesResponse
		err := aliyun.Retry(ctx, "DescribeScalingInstances "+groupID, func() (err error) {
			resp, err = a.ESS.DescribeScalingInstances(req)
			return err
		})
		if err != nil {
			return nil, err
		}
		for _, i := range resp.ScalingInstances.ScalingInstance {
			out = append(out, Instance{ID: i.InstanceId, State: i.LifecycleState, TemplateID: i.LaunchTemplateId, TemplateVersion: i.LaunchTemplateVersion,
				CreationType: i.CreationType, Zone: i.ZoneId})
		}
		if len(resp.ScalingInstances.ScalingInstance) == 0 || len(out) >= resp.TotalCount {
			return out, nil
		}
	}
}

// TemplateVersions implements Cloud.
func (a *Aliyun) TemplateVersions(ctx context.Context, templateID string) ([]TemplateVersion, error) {
	sets, err := a.versionSets(ctx, templateID, nil)
	if err != nil {
		return nil, err
	}
	out := make([]TemplateVersion, 0, len(sets))
	for _, v := range sets {
		ud, err := base64.StdEncoding.DecodeString(v.LaunchTemplateData.UserData)
		if err != nil {
			ud = []byte(v.LaunchTemplateData.UserData)
		}
		out = append(out, TemplateVersion{TemplateID: v.LaunchTemplateId, Number: v.VersionNumber, Default: v.DefaultVersion,
			Description: v.VersionDescription, ImageID: v.LaunchTemplateData.ImageId, UserData: ud})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Number < out[j].Number })
	return out, nil
}

func (a *Aliyun) versionSets(ctx context.Context, templateID string, versions []string) ([]ecs.LaunchTemplateVersionSet, error) {
	var out []ecs.LaunchTemplateVersionSet
	for page := 1; ; page++ {
		req := ecs.CreateDescribeLaunchTemplateVersionsRequest()
		req.LaunchTemplateId = templateID
		req.DetailFlag = requests.NewBoolean(true)
		req.PageNumber = requests.NewInteger(page)
		req.PageSize = requests.NewInteger(50)
		if len(versions) > 0 {
			req.LaunchTemplateVersion = &versions
		}
		var resp *ecs.DescribeLaunchTemplateVersionsResponse
		err := aliyun.Retry(ctx, "DescribeLaunchTemplateVersions "+templateID, func() (err error) {
			resp, err = a.ECS.DescribeLaunchTemplateVersions(req)
			return err
		})
		if err != nil {
			return nil, err
		}
		got := resp.LaunchTemplateVersionSets.LaunchTemplateVersionSet
		out = append(out, got...)
		if len(got) == 0 || len(out) >= resp.TotalCount {
			return out, nil
		}
	}
}

// CreateTemplateVersion implements Cloud: the new version is base's launch
// data as DescribeLaunchTemplateVersions answered it (template_copy.go:
// nothing dropped, no omitted boolean made explicit) with another ImageId
// and UserData.
func (a *Aliyun) CreateTemplateVersion(ctx context.Context, templateID string, base int64, imageID string, userData []byte, description string) (int64, error) {
	req := ecs.CreateDescribeLaunchTemplateVersionsRequest()
	req.LaunchTemplateId, req.LaunchTemplateVersion, req.DetailFlag = templateID, &[]string{formatInt(base)}, requests.NewBoolean(true)
	var resp *ecs.DescribeLaunchTemplateVersionsResponse
	err := aliyun.Retry(ctx, "DescribeLaunchTemplateVersions "+templateID, func() (err error) {
		resp, err = a.ECS.DescribeLaunchTemplateVersions(req)
		return err
	})
	if err != nil {
		return 0, err
	}
	datas, err := rawTemplateData(resp.GetHttpContentBytes())
	if err != nil {
		return 0, fmt.Errorf("launch template %s version %d: %w", templateID, base, err)
	}
	data, ok := datas[base]
	if !ok || len(datas) != 1 {
		return 0, fmt.Errorf("launch template %s version %d: DescribeLaunchTemplateVersions returned %d versions", templateID, base, len(datas))
	}
	params, err := templateParams(data)
	if err != nil {
		return 0, fmt.Errorf("launch template %s version %d: %w", templateID, base, err)
	}
	create := ecs.CreateCreateLaunchTemplateVersionRequest()
	create.LaunchTemplateId, create.VersionDescription = templateID, description
	create.ImageId, create.UserData = imageID, base64.StdEncoding.EncodeToString(userData)
	for k, v := range params {
		create.QueryParams[k] = v
	}
	var cresp *ecs.CreateLaunchTemplateVersionResponse
	err = aliyun.Retry(ctx, "CreateLaunchTemplateVersion "+templateID, func() (err error) {
		cresp, err = a.ECS.CreateLaunchTemplateVersion(create)
		return err
	})
	if err != nil {
		return 0, err
	}
	return cresp.LaunchTemplateVersionNumber, nil
}

// DeleteTemplateVersions implements Cloud.
func (a *Aliyun) DeleteTemplateVersions(ctx context.Context, templateID string, numbers []int64) error {
	req := ecs.CreateDeleteLaunchTemplateVersionRequest()
	req.LaunchTemplateId = templateID
	del := make([]string, len(numbers))
	for i, n := range numbers {
		del[i] = formatInt(n)
	}
	req.DeleteVersion = &del
	return aliyun.Retry(ctx, "DeleteLaunchTemplateVersion "+templateID, func() error {
		_, err := a.ECS.DeleteLaunchTemplateVersion(req)
		return err
	})
}

// SetTemplateVersion implements Cloud.
func (a *Aliyun) SetTemplateVersion(ctx context.Context, groupID, templateID, version string) error {
	req := ess.CreateModifyScalingGroupRequest()
	req.ScalingGroupId, req.LaunchTemplateId, req.LaunchTemplateVersion = groupID, templateID, version
	return a.change(ctx, "ModifyScalingGroup "+groupID+" LaunchTemplateVersion "+version, func() error {
		_, err := a.ESS.ModifyScalingGroup(req)
		return err
	})
}

// SetMaxSize implements Cloud.
func (a *Aliyun) SetMaxSize(ctx context.Context, groupID string, n int) error {
	req := ess.CreateModifyScalingGroupRequest()
	req.ScalingGroupId, req.MaxSize = groupID, requests.NewInteger(n)
	return a.change(ctx, fmt.Sprintf("ModifyScalingGroup %s MaxSize %d", groupID, n), func() error {
		_, err := a.ESS.ModifyScalingGroup(req)
		return err
	})
}

// SetMinSize implements Cloud.
func (a *Aliyun) SetMinSize(ctx context.Context, groupID string, n int) error {
	req := ess.CreateModifyScalingGroupRequest()
	req.ScalingGroupId, req.MinSize = groupID, requests.NewInteger(n)
	return a.change(ctx, fmt.Sprintf("ModifyScalingGroup %s MinSize %d", groupID, n), func() error {
		_, err := a.ESS.ModifyScalingGroup(req)
		return err
	})
}

// ScaleOut implements Cloud. One client token across retries, so a retried
// call does not scale twice (and answers the first call's activity).
func (a *Aliyun) ScaleOut(ctx context.Context, groupID string, n int) (string, error) {
	req := ess.CreateScaleWithAdjustmentRequest()
	req.ScalingGroupId, req.AdjustmentType, req.AdjustmentValue = groupID, "QuantityChangeInCapacity", requests.NewInteger(n)
	req.ClientToken = aliyun.ClientToken()
	var resp *ess.ScaleWithAdjustmentResponse
	err := a.change(ctx, fmt.Sprintf("ScaleWithAdjustment %s +%d", groupID, n), func() (err error) {
		resp, err = a.ESS.ScaleWithAdjustment(req)
		return err
	})
	if err != nil {
		return "", err
	}
	return resp.ScalingActivityId, nil
}

// SetDesiredCapacity implements Cloud.
func (a *Aliyun) SetDesiredCapacity(ctx context.Context, groupID string, n int) error {
	req := ess.CreateModifyScalingGroupRequest()
	req.ScalingGroupId, req.DesiredCapacity = groupID, requests.NewInteger(n)
	return a.change(ctx, fmt.Sprintf("ModifyScalingGroup %s DesiredCapacity %d", groupID, n), func() error {
		_, err := a.ESS.ModifyScalingGroup(req)
		return err
	})
}

// Remove implements Cloud.
func (a *Aliyun) Remove(ctx context.Context, groupID string, ids []string, decrease bool) error {
	req := ess.CreateRemoveInstancesRequest()
	req.ScalingGroupId, req.InstanceId, req.DecreaseDesiredCapacity = groupID, &ids, requests.NewBoolean(decrease)
	req.ClientToken = aliyun.ClientToken()
	return a.change(ctx, fmt.Sprintf("RemoveInstances %s %v", groupID, ids), func() error {
		_, err := a.ESS.RemoveInstances(req)
		return err
	})
}

// ConsoleOutput implements Cloud.
func (a *Aliyun) ConsoleOutput(ctx context.Context, instanceID string) ([]byte, error) {
	req := ecs.CreateGetInstanceConsoleOutputRequest()
	req.InstanceId = instanceID
	req.RemoveSymbols = requests.NewBoolean(true)
	var resp *ecs.GetInstanceConsoleOutputResponse
	err := aliyun.Retry(ctx, "GetInstanceConsoleOutput "+instanceID, func() (err error) {
		resp, err = a.ECS.GetInstanceConsoleOutput(req)
		return err
	})
	if err != nil {
		return nil, err
	}
	out, err := base64.StdEncoding.DecodeString(resp.ConsoleOutput)
	if err != nil {
		return nil, fmt.Errorf("GetInstanceConsoleOutput %s: the output is not base64: %w", instanceID, err)
	}
	return out, nil
}

// ImageBuildID is the nodecontract.ImageTagBuildID tag of an image ("" when it has
// none).
func (a *Aliyun) ImageBuildID(ctx context.Context, imageID string) (string, error) {
	imgs, err := a.images(ctx, func(r *ecs.DescribeImagesRequest) { r.ImageId = imageID })
	if err != nil {
		return "", err
	}
	if len(imgs) == 0 {
		return "", fmt.Errorf("image %s: not found in the region (DescribeImages): check --image and --region", imageID)
	}
	for _, t := range imgs[0].Tags.Tag {
		if k, v := first(t.TagKey, t.Key), first(t.TagValue, t.Value); k == nodecontract.ImageTagBuildID {
			return v, nil
		}
	}
	return "", nil
}

// ImageByBuildID finds the image drover publish tagged with a build ID.
func (a *Aliyun) ImageByBuildID(ctx context.Context, buildID string) (string, error) {
	imgs, err := a.images(ctx, func(r *ecs.DescribeImagesRequest) {
		r.Tag = &[]ecs.DescribeImagesTag{{Key: nodecontract.ImageTagBuildID, Value: buildID}}
	})
	if err != nil {
		return "", err
	}
	var ids []string
	for _, im := range imgs {
		if im.Status == "" || im.Status == "Available" {
			ids = append(ids, im.ImageId)
		}
	}
	switch len(ids) {
	case 0:
		return "", fmt.Errorf("no available image tagged %s=%s in the region: publish it first (drover publish), or pass --image m-…", nodecontract.ImageTagBuildID, buildID)
	case 1:
		return ids[0], nil
	}
	return "", fmt.Errorf("images %v are all tagged %s=%s: pass the one to roll out as --image m-…", ids, nodecontract.ImageTagBuildID, buildID)
}

func (a *Aliyun) images(ctx context.Context, set func(*ecs.DescribeImagesRequest)) ([]ecs.Image, error) {
	req := ecs.CreateDescribeImagesRequest()
	req.ImageOwnerAlias = "self"
	req.PageSize = requests.NewInteger(100)
	set(req)
	var resp *ecs.DescribeImagesResponse
	err := aliyun.Retry(ctx, "DescribeImages", func() (err error) {
		resp, err = a.ECS.DescribeImages(req)
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp.Images.Image, nil
}

func first(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
