package aliyun

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"

	"github.com/drover-os/drover/harness/ecsapi"
)

func emulator(t *testing.T) (*ecsapi.Server, ecsapi.Endpoints) {
	t.Helper()
	s := ecsapi.New(ecsapi.Config{AccessKeyID: "LTAI-test", AccessKeySecret: "secret", Region: "cn-hangzhou"})
	eps, err := s.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, eps
}

// isolate keeps the developer's own credentials (~/.aliyun, a RAM role)
// out of the chain.
func isolate(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("ALIBABA_CLOUD_ECS_METADATA_DISABLED", "true")
	t.Setenv("ALIBABA_CLOUD_PROFILE", "")
	t.Setenv("ALIBABA_CLOUD_CREDENTIALS_FILE", "")
}

func TestRetryThrottlingThroughTheChain(t *testing.T) {
	isolate(t)
	t.Setenv("ALIBABA_CLOUD_ACCESS_KEY_ID", "LTAI-test")
	t.Setenv("ALIBABA_CLOUD_ACCESS_KEY_SECRET", "secret")
	Backoff = func(int) time.Duration { return time.Millisecond }
	s, eps := emulator(t)
	c, err := New(Options{Region: "cn-hangzhou", ECSEndpoint: "http://" + eps.ECS, ESSEndpoint: "http://" + eps.ESS, OSSEndpoint: "http://" + eps.OSS})
	if err != nil {
		t.Fatal(err)
	}
	describe := func() error {
		req := ecs.CreateDescribeImagesRequest()
		_, err := c.ECS.DescribeImages(req)
		return err
	}
	s.ThrottleNext("DescribeImages", 3)
	calls := 0
	if err := Retry(context.Background(), "DescribeImages", func() error { calls++; return describe() }); err != nil {
		t.Fatalf("throttled 3 times: %v", err)
	}
	if calls != 4 {
		t.Errorf("%d calls for 3 throttled answers, want 4", calls)
	}
	s.ThrottleNext("DescribeImages", Retries+1)
	err = Retry(context.Background(), "DescribeImages", describe)
	if !IsCode(err, "Throttling.User") || !strings.HasPrefix(err.Error(), "DescribeImages: ") {
		t.Errorf("throttled past the retries: %v, want a Throttling.User error naming the call", err)
	}
	s.ThrottleNext("DescribeImages", 0)
	// A refusal is not retried.
	calls = 0
	err = Retry(context.Background(), "ModifyLaunchTemplateDefaultVersion", func() error {
		calls++
		req := ecs.CreateModifyLaunchTemplateDefaultVersionRequest()
		req.LaunchTemplateId = "lt-does-not-exist"
		req.DefaultVersionNumber = "2"
		_, err := c.ECS.ModifyLaunchTemplateDefaultVersion(req)
		return err
	})
	if err == nil || Code(err) == "" || calls != 1 {
		t.Errorf("a refused request: %v after %d calls, want the API's error after 1", err, calls)
	}
}

func TestWrongCredentialsAreTheAPIsAnswer(t *testing.T) {
	isolate(t)
	t.Setenv("ALIBABA_CLOUD_ACCESS_KEY_ID", "LTAI-other")
	t.Setenv("ALIBABA_CLOUD_ACCESS_KEY_SECRET", "secret")
	_, eps := emulator(t)
	c, err := New(Options{Region: "cn-hangzhou", ECSEndpoint: "http://" + eps.ECS})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ECS.DescribeImages(ecs.CreateDescribeImagesRequest())
	if !IsCode(err, "InvalidAccessKeyId.NotFound") {
		t.Errorf("unknown key: %v, want InvalidAccessKeyId.NotFound", err)
	}
}

func TestNoCredentials(t *testing.T) {
	isolate(t)
	t.Setenv("ALIBABA_CLOUD_ACCESS_KEY_ID", "")
	t.Setenv("ALIBABA_CLOUD_ACCESS_KEY_SECRET", "")
	_, eps := emulator(t)
	c, err := New(Options{Region: "cn-hangzhou", ECSEndpoint: "http://" + eps.ECS})
	if err != nil {
		t.Fatalf("New needs no credentials (--dry-run, --help): %v", err)
	}
	_, err = c.ECS.DescribeImages(ecs.CreateDescribeImagesRequest())
	if err == nil || !strings.Contains(err.Error(), "ALIBABA_CLOUD_ACCESS_KEY_ID") {
		t.Errorf("no credentials: %v, want the chain's options named", err)
	}
	if _, err := New(Options{}); err == nil {
		t.Error("no region accepted")
	}
}
