package aliyun

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	sdkerrors "github.com/aliyun/alibaba-cloud-sdk-go/sdk/errors"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
	"github.com/aliyun/alibabacloud-oss-go-sdk-v2/oss"

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
	fast := Policy()
	fast.Base, fast.Max = time.Millisecond, time.Millisecond
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
	if err := RetryWith(context.Background(), fast, "DescribeImages", func() error { calls++; return describe() }); err != nil {
		t.Fatalf("throttled 3 times: %v", err)
	}
	if calls != 4 {
		t.Errorf("%d calls for 3 throttled answers, want 4", calls)
	}
	s.ThrottleNext("DescribeImages", fast.Retries+1)
	calls = 0
	err = RetryWith(context.Background(), fast, "DescribeImages", func() error { calls++; return describe() })
	if !IsCode(err, "Throttling.User") || !strings.HasPrefix(err.Error(), "DescribeImages: ") {
		t.Errorf("throttled past the retries: %v, want a Throttling.User error naming the call", err)
	}
	if calls != fast.Retries+1 {
		t.Errorf("%d calls when every answer is throttled, want %d", calls, fast.Retries+1)
	}
	s.ThrottleNext("DescribeImages", 0)
	// A refusal is not retried.
	calls = 0
	err = RetryWith(context.Background(), fast, "ModifyLaunchTemplateDefaultVersion", func() error {
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

// The policy's rhythm: 8 retries, 1 s doubling to 30 s, no jitter (the
// random part is ignored).
func TestPolicy(t *testing.T) {
	p := Policy()
	var got []time.Duration
	for n := range p.Retries {
		got = append(got, p.Wait(n, 0, 0.99))
	}
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30, 30}
	for i := range want {
		want[i] *= time.Second
	}
	if !slices.Equal(got, want) {
		t.Errorf("waits %v, want %v", got, want)
	}
}

// A cancelled context ends the wait at once, and the error says both
// that the run was interrupted and what the call last answered.
func TestRetryCancelledDuringBackoff(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	throttled := sdkerrors.NewServerError(400, `{"Code":"Throttling.User","Message":"slow down"}`, "")
	start, calls := time.Now(), 0
	err := Retry(ctx, "DescribeImages", func() error {
		if calls++; calls == 1 {
			time.AfterFunc(50*time.Millisecond, cancel)
		}
		return throttled
	})
	if !errors.Is(err, context.Canceled) || !IsCode(err, "Throttling.User") || !strings.HasPrefix(err.Error(), "DescribeImages: ") {
		t.Errorf("cancelled during the backoff: %v, want context.Canceled and the Throttling.User answer, naming the call", err)
	}
	if calls != 1 || time.Since(start) > 900*time.Millisecond {
		t.Errorf("%d calls in %s: the 1 s wait was not cut short", calls, time.Since(start))
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

// The retry policy's table: the throttling family and the services' own
// passing failures are tried again, an answer that refuses the request
// (or an error that is no API's answer) is not. OSS answers count too.
func TestTransientCodes(t *testing.T) {
	ecsErr := func(code string) error {
		return sdkerrors.NewServerError(400, `{"Code":"`+code+`","Message":"m"}`, "")
	}
	p := Policy()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{ecsErr("Throttling"), true},
		{ecsErr("Throttling.User"), true},
		{ecsErr("Throttling.Api"), true},
		{ecsErr("ServiceUnavailable"), true},
		{ecsErr("InternalError"), true},
		{ecsErr("UnknownError"), true},
		{ecsErr("OperationConflict"), true},
		{ecsErr("IncorrectInstanceStatus.Initializing"), true},
		{&oss.ServiceError{StatusCode: 500, Code: "InternalError"}, true},
		{fmt.Errorf("DescribeImages: %w", ecsErr("Throttling.User")), true},
		{ecsErr("IncorrectInstanceStatus"), false},
		{ecsErr("InvalidParameter"), false},
		{ecsErr("Forbidden.RAM"), false},
		{ecsErr("InvalidImageName.Duplicated"), false},
		{ecsErr("Request.Throttling"), false},
		{&oss.ServiceError{StatusCode: 404, Code: "NoSuchKey"}, false},
		{errors.New("dial tcp: connection refused"), false},
	} {
		if ok, after := p.Retryable(tc.err); ok != tc.want || after != 0 {
			t.Errorf("%v: retried %v (wait %v), want %v", tc.err, ok, after, tc.want)
		}
	}
}

// A private OSS endpoint (the emulator, an internal or VPC endpoint given
// as host:port) has no bucket subdomains: requests name the bucket in the
// path. An OSS error's code is what Code and IsCode read.
func TestOSSPrivateEndpoint(t *testing.T) {
	isolate(t)
	t.Setenv("ALIBABA_CLOUD_ACCESS_KEY_ID", "LTAI-test")
	t.Setenv("ALIBABA_CLOUD_ACCESS_KEY_SECRET", "secret")
	s, eps := emulator(t)
	s.CreateBucket("drover-images")
	// By name: the OSS SDK itself keeps the path style for an IP address.
	_, port, _ := net.SplitHostPort(eps.OSS)
	c, err := New(Options{Region: "cn-hangzhou", OSSEndpoint: "http://localhost:" + port})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.OSS.PutObject(ctx, &oss.PutObjectRequest{Bucket: oss.Ptr("drover-images"), Key: oss.Ptr("a/b.raw"),
		Body: strings.NewReader("image")}); err != nil {
		t.Fatalf("PutObject through localhost:%s: %v", port, err)
	}
	if _, err := c.OSS.HeadObject(ctx, &oss.HeadObjectRequest{Bucket: oss.Ptr("drover-images"), Key: oss.Ptr("a/b.raw")}); err != nil {
		t.Errorf("HeadObject of the object put: %v", err)
	}
	_, err = c.OSS.GetObject(ctx, &oss.GetObjectRequest{Bucket: oss.Ptr("drover-images"), Key: oss.Ptr("missing")})
	if Code(err) != "NoSuchKey" || !IsCode(fmt.Errorf("get: %w", err), "NoSuchBucket", "NoSuchKey") || IsCode(err, "NoSuchBucket") {
		t.Errorf("a missing object: Code %q of %v, want NoSuchKey", Code(err), err)
	}
	if IsCode(errors.New("no answer"), "") || Code(errors.New("no answer")) != "" {
		t.Error("an error that is no API's answer has a code")
	}
}

// ECS and ESS answers are waited for up to a minute: without a configured
// timeout the SDK gives a call 10 s to answer (its defaultReadTimeout),
// which a slow DescribeImages page or a busy region exceeds, and a
// timeout is no API answer, so the command would fail. The endpoint
// flags' schemes: http:// is plain HTTP, host:port HTTPS.
func TestRPCTimeout(t *testing.T) {
	c, err := New(Options{Region: "cn-hangzhou", ECSEndpoint: "http://127.0.0.1:1", ESSEndpoint: "127.0.0.1:2"})
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string]time.Duration{"ECS": c.ECS.GetConfig().Timeout, "ESS": c.ESS.GetConfig().Timeout} {
		if got != time.Minute {
			t.Errorf("%s client's timeout %v, want 1m", name, got)
		}
	}
	if c.ECS.Domain != "127.0.0.1:1" || c.ECS.GetConfig().Scheme != "HTTP" || c.ESS.Domain != "127.0.0.1:2" || c.ESS.GetConfig().Scheme != "HTTPS" {
		t.Errorf("endpoints: ECS %s %s, ESS %s %s; want http://127.0.0.1:1 and HTTPS to 127.0.0.1:2",
			c.ECS.GetConfig().Scheme, c.ECS.Domain, c.ESS.GetConfig().Scheme, c.ESS.Domain)
	}
}
