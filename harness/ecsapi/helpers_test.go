package ecsapi

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	sdkerrors "github.com/aliyun/alibaba-cloud-sdk-go/sdk/errors"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ess"
	"github.com/aliyun/alibabacloud-oss-go-sdk-v2/oss"
	"github.com/aliyun/alibabacloud-oss-go-sdk-v2/oss/credentials"
)

const (
	testKeyID  = "LTAItestkey"
	testSecret = "test-secret"
	testRegion = "cn-test"
)

type env struct {
	srv *Server
	eps Endpoints
	ecs *ecs.Client
	ess *ess.Client
	oss *oss.Client
}

// newEnv starts an emulator and the three official clients pointed at it, the
// way drover's cloud/aliyun package does for an endpoint override.
func newEnv(t *testing.T, cfg Config) *env {
	t.Helper()
	cfg.AccessKeyID, cfg.AccessKeySecret, cfg.Region = testKeyID, testSecret, testRegion
	if testing.Verbose() && cfg.Log == nil {
		cfg.Log = os.Stderr
	}
	srv := New(cfg)
	t.Cleanup(srv.Close)
	eps, err := srv.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return &env{srv: srv, eps: eps,
		ecs: ecsClient(t, eps, testKeyID, testSecret),
		ess: essClient(t, eps),
		oss: ossClient(eps, testKeyID),
	}
}

func ecsClient(t *testing.T, eps Endpoints, id, secret string) *ecs.Client {
	c, err := ecs.NewClientWithAccessKey(testRegion, id, secret)
	if err != nil {
		t.Fatal(err)
	}
	c.Domain = eps.ECS // the SDK's default scheme is HTTP
	return c
}

func essClient(t *testing.T, eps Endpoints) *ess.Client {
	c, err := ess.NewClientWithAccessKey(testRegion, testKeyID, testSecret)
	if err != nil {
		t.Fatal(err)
	}
	c.Domain = eps.ESS
	return c
}

func ossClient(eps Endpoints, id string) *oss.Client {
	return oss.NewClient(oss.LoadDefaultConfig().
		WithCredentialsProvider(credentials.NewStaticCredentialsProvider(id, testSecret)).
		WithRegion(testRegion).
		WithEndpoint(eps.OSS).
		WithDisableSSL(true).
		WithUsePathStyle(true).
		WithRetryMaxAttempts(1))
}

// wantCode fails unless err is the API error code the SDK reports.
func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	var se *sdkerrors.ServerError
	if !errors.As(err, &se) {
		t.Fatalf("want server error %s, got %v", code, err)
	}
	if se.ErrorCode() != code {
		t.Fatalf("want error code %s, got %s (%s)", code, se.ErrorCode(), se.Message())
	}
	if se.RequestId() == "" {
		t.Fatalf("error %s carries no RequestId", code)
	}
}

func wantOSSCode(t *testing.T, err error, code string) {
	t.Helper()
	var se *oss.ServiceError
	if !errors.As(err, &se) {
		t.Fatalf("want OSS error %s, got %v", code, err)
	}
	if se.Code != code {
		t.Fatalf("want OSS error code %s, got %s (%s)", code, se.Code, se.Message)
	}
}

// testLaunchRetry is the LaunchRetry of the tests that watch ESS try a
// failed launch again (TestLaunchRetry checks the default's pace).
const testLaunchRetry = 100 * time.Millisecond

// convergeWait is long enough for the emulator's converge loop (a 50 ms
// tick) to have acted: a group that would launch or remove has started.
const convergeWait = 300 * time.Millisecond

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func put(t *testing.T, e *env, bucket, key, body string) {
	t.Helper()
	_, err := e.oss.PutObject(context.Background(), &oss.PutObjectRequest{
		Bucket: oss.Ptr(bucket), Key: oss.Ptr(key), Body: strings.NewReader(body)})
	if err != nil {
		t.Fatal(err)
	}
}

// fakeLauncher records launches and hands out FakeInstances whose console
// names the instance and its user-data.
type fakeLauncher struct {
	mu    sync.Mutex
	specs []InstanceSpec
	insts map[string]*FakeInstance
	gate  chan struct{} // when set, Launch waits for it
}

func (f *fakeLauncher) Launch(ctx context.Context, spec InstanceSpec) (Instance, error) {
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	b, err := os.ReadFile(spec.ImageObject)
	if err != nil {
		return nil, err
	}
	in := &FakeInstance{Spec: spec}
	in.WriteConsole([]byte("booted " + spec.InstanceID + " from " + string(b) + "\n"))
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.insts == nil {
		f.insts = map[string]*FakeInstance{}
	}
	f.specs = append(f.specs, spec)
	f.insts[spec.InstanceID] = in
	return in, nil
}

func (f *fakeLauncher) instance(id string) *FakeInstance {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.insts[id]
}
