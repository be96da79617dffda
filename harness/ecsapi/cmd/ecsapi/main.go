// Command ecsapi serves the emulated ECS, ESS and OSS APIs on their own,
// for any client — the official SDKs, the aliyun CLI, Terraform — to be
// pointed at:
//
//	go run ./harness/ecsapi/cmd/ecsapi --ecs-listen 127.0.0.1:8001 --bucket images
//
// It prints the three endpoints as one JSON object on stdout and serves
// until interrupted. Instances a scaling group launches need a Launcher
// (QEMU or stand-ins), which the test harness provides; here every launch
// fails, as ECS's does for an image that cannot boot.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/drover-os/drover/harness/ecsapi"
)

func main() {
	var cfg ecsapi.Config
	var buckets string
	flag.StringVar(&cfg.Listen.ECS, "ecs-listen", "", "address (host:port) of the ECS API (default 127.0.0.1 with a free port)")
	flag.StringVar(&cfg.Listen.ESS, "ess-listen", "", "address of the ESS API (default 127.0.0.1 with a free port)")
	flag.StringVar(&cfg.Listen.OSS, "oss-listen", "", "address of OSS, path-style (default 127.0.0.1 with a free port)")
	flag.StringVar(&cfg.AccessKeyID, "access-key-id", "LTAIemulated", "the one AccessKeyId accepted")
	flag.StringVar(&cfg.AccessKeySecret, "access-key-secret", "emulated-secret", "its secret (RPC signatures are verified)")
	flag.StringVar(&cfg.Region, "region", "cn-test", "the region of requests that name none")
	flag.StringVar(&buckets, "bucket", "", "OSS buckets to create, comma-separated (drover makes none)")
	flag.StringVar(&cfg.Dir, "dir", "", "directory of the OSS objects (default a temporary one, removed on exit)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "ecsapi: unexpected arguments %v (see -help)\n", flag.Args())
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := ecsapi.New(cfg)
	defer srv.Close()
	eps, err := srv.Start(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ecsapi:", err)
		os.Exit(1)
	}
	for _, b := range strings.Split(buckets, ",") {
		if b = strings.TrimSpace(b); b != "" {
			srv.CreateBucket(b)
		}
	}
	_ = json.NewEncoder(os.Stdout).Encode(eps)
	<-ctx.Done()
}
