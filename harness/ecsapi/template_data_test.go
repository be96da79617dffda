package ecsapi

import (
	"encoding/base64"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/requests"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
)

// rawTemplateData is version n's LaunchTemplateData as the JSON answer
// carries it (the SDK's struct would turn an absent boolean into false).
func rawTemplateData(t *testing.T, e *env, ltID string, n string) map[string]any {
	t.Helper()
	dv := ecs.CreateDescribeLaunchTemplateVersionsRequest()
	dv.LaunchTemplateId, dv.LaunchTemplateVersion, dv.DetailFlag = ltID, &[]string{n}, requests.NewBoolean(true)
	resp, err := e.ecs.DescribeLaunchTemplateVersions(dv)
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		LaunchTemplateVersionSets struct {
			LaunchTemplateVersionSet []struct{ LaunchTemplateData map[string]any }
		}
	}
	if err := json.Unmarshal(resp.GetHttpContentBytes(), &raw); err != nil {
		t.Fatal(err)
	}
	sets := raw.LaunchTemplateVersionSets.LaunchTemplateVersionSet
	if len(sets) != 1 {
		t.Fatalf("version %s: %d sets", n, len(sets))
	}
	return sets[0].LaunchTemplateData
}

// A version keeps every field it was created with: booleans omitted, true
// or false as sent, disks, NICs with their security groups, instance tags,
// and a parameter the SDK's types lack.
func TestLaunchTemplateDataKeepsEveryField(t *testing.T) {
	e := newEnv(t, Config{})
	sys := e.srv.AddSystemImage(testRegion, "aliyun_3_x64")
	ct := ecs.CreateCreateLaunchTemplateRequest()
	ct.LaunchTemplateName, ct.ImageId, ct.ImageOwnerAlias, ct.InstanceType = "pool", sys, "system", "ecs.g7.large"
	ct.UserData = base64.StdEncoding.EncodeToString([]byte("v1"))
	ct.SecurityGroupIds = &[]string{"sg-a", "sg-b"}
	ct.SystemDiskCategory, ct.SystemDiskSize = "cloud_essd", requests.NewInteger(40)
	ct.DataDisk = &[]ecs.CreateLaunchTemplateDataDisk{
		{Category: "cloud_essd", Size: "100", DeleteWithInstance: "false", Device: "/dev/xvdb"},
		{Category: "cloud_auto", Size: "200"}, // DeleteWithInstance omitted
	}
	ct.NetworkInterface = &[]ecs.CreateLaunchTemplateNetworkInterface{
		{VSwitchId: "vsw-1", SecurityGroupIds: &[]string{"sg-c", "sg-d"}}, // DeleteOnRelease omitted
		{VSwitchId: "vsw-2", SecurityGroupId: "sg-e", DeleteOnRelease: "true"},
	}
	ct.Tag = &[]ecs.CreateLaunchTemplateTag{{Key: "team", Value: "nodes"}}
	ct.HttpTokens, ct.HttpEndpoint = "required", "enabled"
	ct.QueryParams["SecurityOptions.TrustedSystemMode"] = "vTPM" // not in this SDK's types
	lt, err := e.ecs.CreateLaunchTemplate(ct)
	if err != nil {
		t.Fatal(err)
	}
	got := rawTemplateData(t, e, lt.LaunchTemplateId, "1")
	want := map[string]any{
		"ImageId": sys, "ImageOwnerAlias": "system", "InstanceType": "ecs.g7.large", "UserData": ct.UserData,
		"SecurityGroupIds":    map[string]any{"SecurityGroupId": []any{"sg-a", "sg-b"}},
		"SystemDisk.Category": "cloud_essd", "SystemDisk.Size": float64(40),
		"DataDisks": map[string]any{"DataDisk": []any{
			map[string]any{"Category": "cloud_essd", "Size": float64(100), "DeleteWithInstance": false, "Device": "/dev/xvdb"},
			map[string]any{"Category": "cloud_auto", "Size": float64(200)},
		}},
		"NetworkInterfaces": map[string]any{"NetworkInterface": []any{
			map[string]any{"VSwitchId": "vsw-1", "SecurityGroupIds": map[string]any{"SecurityGroupId": []any{"sg-c", "sg-d"}}},
			map[string]any{"VSwitchId": "vsw-2", "SecurityGroupId": "sg-e", "DeleteOnRelease": true},
		}},
		"Tags":       map[string]any{"InstanceTag": []any{map[string]any{"Key": "team", "Value": "nodes"}}},
		"HttpTokens": "required", "HttpEndpoint": "enabled",
		"SecurityOptions.TrustedSystemMode": "vTPM",
	}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", " ")
		w, _ := json.MarshalIndent(want, "", " ")
		t.Fatalf("LaunchTemplateData\n%s\nwant\n%s", g, w)
	}

	// What CreateLaunchTemplateVersion documents as refused.
	cv := ecs.CreateCreateLaunchTemplateVersionRequest()
	cv.LaunchTemplateId, cv.ImageId, cv.SecurityGroupId, cv.SecurityGroupIds = lt.LaunchTemplateId, sys, "sg-a", &[]string{"sg-a"}
	_, err = e.ecs.CreateLaunchTemplateVersion(cv)
	wantCode(t, err, "InvalidParameter.Conflict")
	cv = ecs.CreateCreateLaunchTemplateVersionRequest()
	cv.LaunchTemplateId, cv.ImageId = lt.LaunchTemplateId, sys
	cv.NetworkInterface = &[]ecs.CreateLaunchTemplateVersionNetworkInterface{{SecurityGroupId: "sg-a", SecurityGroupIds: &[]string{"sg-b"}}}
	_, err = e.ecs.CreateLaunchTemplateVersion(cv)
	wantCode(t, err, "InvalidParameter.Conflict")
	cv = ecs.CreateCreateLaunchTemplateVersionRequest()
	cv.LaunchTemplateId, cv.ImageId, cv.SystemDiskDeleteWithInstance = lt.LaunchTemplateId, sys, requests.Boolean("yes")
	_, err = e.ecs.CreateLaunchTemplateVersion(cv)
	wantCode(t, err, "InvalidParameter")

	// A custom image named with the system alias is not found.
	e.srv.CreateBucket("images")
	put(t, e, "images", "a.raw", "A")
	img, err := e.ecs.ImportImage(importReq("images", "a.raw", "A"))
	if err != nil {
		t.Fatal(err)
	}
	cv = ecs.CreateCreateLaunchTemplateVersionRequest()
	cv.LaunchTemplateId, cv.ImageId, cv.ImageOwnerAlias = lt.LaunchTemplateId, img.ImageId, "system"
	_, err = e.ecs.CreateLaunchTemplateVersion(cv)
	wantCode(t, err, "InvalidImageId.NotFound")
	cv.ImageOwnerAlias = "self"
	if _, err := e.ecs.CreateLaunchTemplateVersion(cv); err != nil {
		t.Fatal(err)
	}
}
