package rollout

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/aliyun/alibaba-cloud-sdk-go/sdk/requests"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
	"github.com/aliyun/alibabacloud-oss-go-sdk-v2/oss"
	"github.com/aliyun/alibabacloud-oss-go-sdk-v2/oss/credentials"

	"github.com/drover-os/drover/harness/ecsapi"
)

const (
	emuKey, emuSecret, emuRegion = "LTAIcopytest", "copy-test-secret", "cn-test"
)

// emulated starts the emulator and an ECS client (the official SDK)
// pointed at it.
func emulated(t *testing.T) (*ecsapi.Server, ecsapi.Endpoints, *ecs.Client) {
	t.Helper()
	srv := ecsapi.New(ecsapi.Config{AccessKeyID: emuKey, AccessKeySecret: emuSecret, Region: emuRegion})
	t.Cleanup(srv.Close)
	eps, err := srv.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c, err := ecs.NewClientWithAccessKey(emuRegion, emuKey, emuSecret)
	if err != nil {
		t.Fatal(err)
	}
	c.Domain = eps.ECS
	return srv, eps, c
}

// importedImage is a custom image of the account, as drover publish makes
// one.
func importedImage(t *testing.T, srv *ecsapi.Server, eps ecsapi.Endpoints, c *ecs.Client) string {
	t.Helper()
	srv.CreateBucket("images")
	o := oss.NewClient(oss.LoadDefaultConfig().WithRegion(emuRegion).WithEndpoint(eps.OSS).WithDisableSSL(true).WithUsePathStyle(true).
		WithCredentialsProvider(credentials.NewStaticCredentialsProvider(emuKey, emuSecret)))
	if _, err := o.PutObject(context.Background(), &oss.PutObjectRequest{Bucket: oss.Ptr("images"), Key: oss.Ptr("b.raw"),
		Body: strings.NewReader("image B")}); err != nil {
		t.Fatal(err)
	}
	req := ecs.CreateImportImageRequest()
	req.ImageName, req.Architecture, req.BootMode = "b", "x86_64", "UEFI"
	req.DiskDeviceMapping = &[]ecs.ImportImageDiskDeviceMapping{{OSSBucket: "images", OSSObject: "b.raw", Format: "RAW", DiskImageSize: "1"}}
	resp, err := c.ImportImage(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.ImageId
}

// describedData is version n's LaunchTemplateData as the JSON answer
// carries it.
func describedData(t *testing.T, c *ecs.Client, ltID string, n int64) map[string]any {
	t.Helper()
	req := ecs.CreateDescribeLaunchTemplateVersionsRequest()
	req.LaunchTemplateId, req.LaunchTemplateVersion, req.DetailFlag = ltID, &[]string{formatInt(n)}, requests.NewBoolean(true)
	resp, err := c.DescribeLaunchTemplateVersions(req)
	if err != nil {
		t.Fatal(err)
	}
	d, err := rawTemplateData(resp.GetHttpContentBytes())
	if err != nil || d[n] == nil {
		t.Fatalf("version %d: %v %v", n, d, err)
	}
	return d[n]
}

// The new version holds the group's version's launch data exactly, but
// for the image (and its owner alias, which describes the old image) and
// the user-data: booleans omitted, true or false as they were, data disks,
// NICs with their security groups, two security groups, instance tags, and
// a field the SDK's types do not have.
func TestCreateTemplateVersionCopiesLosslessly(t *testing.T) {
	srv, eps, c := emulated(t)
	sys := srv.AddSystemImage(emuRegion, "aliyun_3_x64")
	custom := importedImage(t, srv, eps, c)
	ct := ecs.CreateCreateLaunchTemplateRequest()
	ct.LaunchTemplateName, ct.ImageId, ct.ImageOwnerAlias, ct.InstanceType = "pool", sys, "system", "ecs.g7.large"
	ct.UserData = base64.StdEncoding.EncodeToString([]byte("old user-data"))
	ct.SecurityGroupIds = &[]string{"sg-a", "sg-b"}
	ct.SystemDiskCategory, ct.SystemDiskSize = "cloud_essd", requests.NewInteger(40)
	ct.SystemDiskDeleteWithInstance = requests.NewBoolean(false)
	ct.DataDisk = &[]ecs.CreateLaunchTemplateDataDisk{
		{Category: "cloud_essd", Size: "100", DeleteWithInstance: "false", Device: "/dev/xvdb", Encrypted: "true"},
		{Category: "cloud_auto", Size: "200", BurstingEnabled: "true"}, // DeleteWithInstance omitted
	}
	ct.NetworkInterface = &[]ecs.CreateLaunchTemplateNetworkInterface{
		{VSwitchId: "vsw-1", SecurityGroupIds: &[]string{"sg-c", "sg-d"}}, // DeleteOnRelease omitted
		{VSwitchId: "vsw-2", SecurityGroupId: "sg-e", DeleteOnRelease: "false"},
	}
	ct.Tag = &[]ecs.CreateLaunchTemplateTag{{Key: "team", Value: "nodes"}, {Key: "cost", Value: ""}}
	ct.HttpTokens, ct.HttpEndpoint, ct.HttpPutResponseHopLimit = "required", "enabled", requests.NewInteger(2)
	ct.SpotPriceLimit = requests.NewFloat(0.25)
	ct.QueryParams["SecurityOptions.TrustedSystemMode"] = "vTPM" // a field this SDK's types lack
	lt, err := c.CreateLaunchTemplate(ct)
	if err != nil {
		t.Fatal(err)
	}

	a := &Aliyun{ECS: c}
	n, err := a.CreateTemplateVersion(context.Background(), lt.LaunchTemplateId, 1, custom, []byte("new user-data"), "drover build=b")
	if err != nil {
		t.Fatal(err)
	}
	was, now := describedData(t, c, lt.LaunchTemplateId, 1), describedData(t, c, lt.LaunchTemplateId, n)
	if now["ImageId"] != custom || now["UserData"] != base64.StdEncoding.EncodeToString([]byte("new user-data")) {
		t.Errorf("new version: image %v, user-data %v", now["ImageId"], now["UserData"])
	}
	if _, ok := now["ImageOwnerAlias"]; ok {
		t.Errorf("new version: ImageOwnerAlias %v beside drover's own image", now["ImageOwnerAlias"])
	}
	for _, k := range []string{"ImageId", "UserData", "ImageOwnerAlias"} {
		delete(was, k)
		delete(now, k)
	}
	if !reflect.DeepEqual(was, now) {
		w, _ := json.MarshalIndent(was, "", " ")
		g, _ := json.MarshalIndent(now, "", " ")
		t.Errorf("the new version's data differs from the old one's beyond the image and user-data:\nold\n%s\nnew\n%s", w, g)
	}
	if disk := now["DataDisks"].(map[string]any)["DataDisk"].([]any)[1].(map[string]any); disk["DeleteWithInstance"] != nil {
		t.Errorf("the second data disk's omitted DeleteWithInstance came back as %v", disk["DeleteWithInstance"])
	}
}

func TestTemplateParams(t *testing.T) {
	decode := func(s string) map[string]any {
		t.Helper()
		d, err := rawTemplateData([]byte(`{"LaunchTemplateVersionSets":{"LaunchTemplateVersionSet":[{"VersionNumber":1,"LaunchTemplateData":` + s + `}]}}`))
		if err != nil {
			t.Fatal(err)
		}
		return d[1]
	}
	for _, c := range []struct {
		name, data string
		want       map[string]string
		err        string
	}{
		{name: "the single security group echoes the list", data: `{"SecurityGroupId":"sg-a","SecurityGroupIds":{"SecurityGroupId":["sg-a","sg-b"]},
			"NetworkInterfaces":{"NetworkInterface":[{"SecurityGroupId":"sg-c","SecurityGroupIds":{"SecurityGroupId":["sg-c"]},"DeleteOnRelease":false,"VSwitchId":""}]}}`,
			want: map[string]string{"SecurityGroupIds.1": "sg-a", "SecurityGroupIds.2": "sg-b",
				"NetworkInterface.1.SecurityGroupIds.1": "sg-c", "NetworkInterface.1.DeleteOnRelease": "false"}},
		{name: "a single security group alone stays", data: `{"SecurityGroupId":"sg-a","SecurityGroupIds":{"SecurityGroupId":[]}}`,
			want: map[string]string{"SecurityGroupId": "sg-a"}},
		{name: "a single security group the list lacks", data: `{"SecurityGroupId":"sg-z","SecurityGroupIds":{"SecurityGroupId":["sg-a"]}}`,
			err: "not among SecurityGroupIds"},
		{name: "self alias, numbers as sent, nested object", data: `{"ImageOwnerAlias":"self","SpotPriceLimit":0.25,"SystemDisk.Size":40,"ImageOptions":{"LoginAsNonRoot":true}}`,
			want: map[string]string{"ImageOwnerAlias": "self", "SpotPriceLimit": "0.25", "SystemDisk.Size": "40", "ImageOptions.LoginAsNonRoot": "true"}},
		{name: "system alias dropped", data: `{"ImageOwnerAlias":"system","ImageId":"m-x","UserData":"eA=="}`, want: map[string]string{}},
		{name: "an unknown list", data: `{"Arns":{"Arn":[{"Rolearn":"x"}]}}`, err: "drover cannot copy it"},
		{name: "a known wrapper holding more", data: `{"DataDisks":{"DataDisk":[],"Extra":1}}`, err: `holds "Extra"`},
	} {
		got, err := templateParams(decode(c.data))
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, %v; want an error %q", c.name, got, err, c.err)
			}
		case err != nil || !reflect.DeepEqual(got, c.want):
			t.Errorf("%s: %v, %v; want %v", c.name, got, err, c.want)
		}
	}
}
