package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/aliyun/alibaba-cloud-sdk-go/services/ecs"
	"github.com/aliyun/alibaba-cloud-sdk-go/services/ess"
	"github.com/aliyun/alibabacloud-oss-go-sdk-v2/oss"
	"github.com/aliyun/alibabacloud-oss-go-sdk-v2/oss/credentials"

	"github.com/drover-os/drover/harness/ecsapi"
)

// The emulator runs on its own: the command listens where it is told,
// prints its endpoints, and the official SDKs (ECS, ESS, OSS) work against
// it with its credentials; a wrong secret is refused as ECS refuses it.
func TestRunsOnItsOwn(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "ecsapi")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0") // a free port to ask for
	if err != nil {
		t.Fatal(err)
	}
	ecsAddr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "--ecs-listen", ecsAddr, "--bucket", "images", "--access-key-id", "LTAIown", "--access-key-secret", "own-secret", "--region", "cn-own")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var eps ecsapi.Endpoints
	if err := json.Unmarshal([]byte(line), &eps); err != nil || eps.ECS != ecsAddr || eps.ESS == "" || eps.OSS == "" {
		t.Fatalf("endpoints %q (%v), want ECS on %s", line, err, ecsAddr)
	}

	ec, err := ecs.NewClientWithAccessKey("cn-own", "LTAIown", "own-secret")
	if err != nil {
		t.Fatal(err)
	}
	ec.Domain = eps.ECS
	if _, err := ec.DescribeImages(ecs.CreateDescribeImagesRequest()); err != nil {
		t.Errorf("ECS DescribeImages: %v", err)
	}
	sc, err := ess.NewClientWithAccessKey("cn-own", "LTAIown", "own-secret")
	if err != nil {
		t.Fatal(err)
	}
	sc.Domain = eps.ESS
	if _, err := sc.DescribeScalingGroups(ess.CreateDescribeScalingGroupsRequest()); err != nil {
		t.Errorf("ESS DescribeScalingGroups: %v", err)
	}
	o := oss.NewClient(oss.LoadDefaultConfig().WithRegion("cn-own").WithEndpoint(eps.OSS).WithDisableSSL(true).WithUsePathStyle(true).
		WithCredentialsProvider(credentials.NewStaticCredentialsProvider("LTAIown", "own-secret")))
	if _, err := o.PutObject(context.Background(), &oss.PutObjectRequest{Bucket: oss.Ptr("images"), Key: oss.Ptr("k"), Body: strings.NewReader("x")}); err != nil {
		t.Errorf("OSS PutObject into the --bucket: %v", err)
	}
	bad, err := ecs.NewClientWithAccessKey("cn-own", "LTAIown", "wrong-secret")
	if err != nil {
		t.Fatal(err)
	}
	bad.Domain = eps.ECS
	if _, err := bad.DescribeImages(ecs.CreateDescribeImagesRequest()); err == nil || !strings.Contains(err.Error(), "SignatureDoesNotMatch") {
		t.Errorf("a wrong secret: %v, want SignatureDoesNotMatch", err)
	}
}
