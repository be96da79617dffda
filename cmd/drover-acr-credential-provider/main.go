// Command drover-acr-credential-provider is a kubelet image credential
// provider plugin (credentialprovider.kubelet.k8s.io/v1) for Alibaba Cloud
// Container Registry: it answers the kubelet's CredentialProviderRequest
// on stdin with a temporary ACR login issued for the instance's RAM role,
// so that private ACR images are pulled without imagePullSecrets and
// without an AccessKey anywhere (agent/acrprovider).
//
// The kubelet runs it from --image-credential-provider-bin-dir with the
// arguments of its CredentialProviderConfig, which drover-agent renders
// from the node file's registries.acr (docs/node-config.md):
//
//	--instance domain=<host[:port]>,id=<cri-…>,region=<region>   (repeated)
//	--api-endpoint <URL or host, {region} for the region>
//	--metadata-url <URL>   (tests; default http://100.100.100.200)
//	--status-file <path>   (default /run/drover/credential-provider.status; "" for none)
//
// drover build compiles it like drover-agent (static, -trimpath, the lock's
// toolchain) into the image. Errors go to stderr, which the kubelet logs,
// and never carry a credential. After each answer for an ACR registry it
// leaves a status in /run (tmpfs) for drover-agent, which turns a failure
// into a Node Event (agent/credstatus): the time, the registry, the
// failure's class and its masked error, never a credential; nothing else
// is written.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/drover-os/drover/agent/acr"
	"github.com/drover-os/drover/agent/acrprovider"
	"github.com/drover-os/drover/agent/credstatus"
	"github.com/drover-os/drover/agent/provider"
)

// deadline bounds the whole run: the kubelet gives a plugin about a minute.
const deadline = 45 * time.Second

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	logf := func(format string, a ...any) {
		fmt.Fprintf(stderr, "drover-acr-credential-provider: "+format+"\n", a...)
	}
	fs := flag.NewFlagSet("drover-acr-credential-provider", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var instances instanceFlags
	fs.Var(&instances, "instance", "an ACR Enterprise instance: domain=<host[:port]>,id=<cri-…>,region=<region> (repeat for more)")
	endpoint := fs.String("api-endpoint", "", "the ACR API endpoint (host or URL, {region} for the registry's region); default cr.<region>.aliyuncs.com")
	metadataURL := fs.String("metadata-url", provider.DefaultBaseURL, "the ECS metadata service")
	statusFile := fs.String("status-file", credstatus.Path, "where to leave the last answer's status for drover-agent (\"\": nowhere)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		logf("unexpected arguments %q: the request comes on stdin", fs.Args())
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()

	req, err := acrprovider.ReadRequest(stdin)
	if err != nil {
		logf("%v", err)
		return 1
	}
	p := &acrprovider.Provider{
		Instances: instances,
		Metadata:  &provider.ECSClient{BaseURL: *metadataURL, Deadline: 20 * time.Second, AttemptTimeout: 5 * time.Second},
		ACR:       &acrprovider.SDK{Endpoint: *endpoint},
		Log:       func(line string) { logf("%s", line) },
	}
	resp, err := p.Handle(ctx, req)
	if err != nil {
		logf("%v", err)
		leaveStatus(*statusFile, credstatus.Status{Time: time.Now(), Registry: acr.ImageHost(req.Image),
			Class: acrprovider.Class(err), Message: err.Error()}, logf)
		return 1
	}
	if len(resp.Auth) > 0 {
		leaveStatus(*statusFile, credstatus.Status{Time: time.Now(), Registry: acr.ImageHost(req.Image)}, logf)
	}
	if err := acrprovider.WriteResponse(stdout, resp); err != nil {
		logf("%v", err)
		return 1
	}
	return 0
}

// leaveStatus replaces path with s (a temporary file renamed over it, so
// the agent never reads half of one). A directory that does not exist
// (no agent on this host) is no error; any other failure is logged and
// does not change the answer.
func leaveStatus(path string, s credstatus.Status, logf func(string, ...any)) {
	if path == "" {
		return
	}
	dir := filepath.Dir(path)
	if _, err := os.Stat(dir); err != nil {
		return
	}
	f, err := os.CreateTemp(dir, ".credential-provider-")
	if err == nil {
		err = credstatus.Encode(f, s)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Chmod(f.Name(), 0o644)
		}
		if err == nil {
			err = os.Rename(f.Name(), path)
		}
		if err != nil {
			os.Remove(f.Name())
		}
	}
	if err != nil {
		logf("leaving the status for drover-agent in %s: %v", path, err)
	}
}

// instanceFlags collects --instance values.
type instanceFlags []acrprovider.Instance

func (f *instanceFlags) String() string { return fmt.Sprint(len(*f)) }

func (f *instanceFlags) Set(v string) error {
	in, err := ParseInstance(v)
	if err != nil {
		return err
	}
	*f = append(*f, in)
	return nil
}

// ParseInstance reads domain=…,id=…,region=… (every key required).
func ParseInstance(v string) (acrprovider.Instance, error) {
	var in acrprovider.Instance
	seen := map[string]bool{}
	for _, kv := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(kv, "=")
		if !ok || seen[k] {
			return in, fmt.Errorf("%q: want domain=<host[:port]>,id=<cri-…>,region=<region>", v)
		}
		seen[k] = true
		switch k {
		case "domain":
			in.Domain = strings.ToLower(val)
		case "id":
			in.ID = val
		case "region":
			in.Region = val
		default:
			return in, fmt.Errorf("%q: unknown key %q; want domain, id and region", v, k)
		}
	}
	for _, msg := range []string{acr.CheckHost(in.Domain), acr.CheckInstanceID(in.ID), acr.CheckRegion(in.Region)} {
		if msg != "" {
			return in, fmt.Errorf("%q: %s", v, msg)
		}
	}
	return in, nil
}
