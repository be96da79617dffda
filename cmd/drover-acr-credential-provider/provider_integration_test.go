//go:build integration

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-os/drover/agent/credstatus"
	"github.com/drover-os/drover/harness/acrapi"
	"github.com/drover-os/drover/harness/ecsmeta"
	"github.com/drover-os/drover/harness/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	credv1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1"
)

// TestProviderAgainstTheEmulators runs the built provider as the kubelet
// does (a request on stdin, the answer on stdout) against the metadata
// emulator in hardened mode with a RAM role, the emulated ACR API and the
// harness registry with a private repository: the login it returns pulls
// the private image, which an anonymous pull cannot; with the role
// detached it fails, saying so; no credential reaches its output.
func TestProviderAgainstTheEmulators(t *testing.T) {
	ctx := context.Background()
	bin := filepath.Join(t.TempDir(), "drover-acr-credential-provider")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	inst := ecsmeta.DefaultInstance()
	inst.RAMRole = "drover-node"
	meta := ecsmeta.New(inst, ecsmeta.Options{TokenEndpoint: true, TokenRequired: true})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go meta.Serve(ln)
	defer meta.Close()

	api := acrapi.New(meta, nil)
	api.AddInstance(acrapi.Instance{ID: "cri-harness1", Name: "harness", Region: "cn-hangzhou"})
	apiSrv := httptest.NewServer(api)
	defer apiSrv.Close()

	var regLog lockedBuffer
	reg, err := registry.Start(ctx, "127.0.0.1:0", &regLog)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	reg.RequireToken("private/", func(user, pass string) (string, bool) {
		l, ok := api.Check(user, pass)
		return "role " + l.Role + " (instance " + l.InstanceID + ")", ok
	})
	img, err := random.Image(1024, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := registry.Push(ctx, reg, "private/app", "v1", img); err != nil {
		t.Fatal(err)
	}

	status := filepath.Join(t.TempDir(), "credential-provider.status")
	run := func() (credv1.CredentialProviderResponse, string, int) {
		cmd := exec.Command(bin, "--metadata-url", "http://"+ln.Addr().String(), "--api-endpoint", apiSrv.URL, "--status-file", status,
			"--instance", "domain="+reg.Addr()+",id=cri-harness1,region=cn-hangzhou")
		cmd.Stdin = strings.NewReader(`{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","image":"` + reg.Addr() + `/private/app:v1"}`)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		left, _ := os.ReadFile(status)
		for _, c := range meta.IssuedCredentials() {
			for _, secret := range []string{c.AccessKeySecret, c.SecurityToken} {
				if strings.Contains(stdout.String()+stderr.String(), secret) {
					t.Errorf("the provider's output holds the role's secret or token:\n%s\n%s", stdout.String(), stderr.String())
				}
				if strings.Contains(string(left), secret) {
					t.Errorf("the provider's status holds the role's secret or token: %s", left)
				}
			}
		}
		for _, l := range api.Logins() {
			if strings.Contains(string(left), l.Password) {
				t.Errorf("the provider's status holds an issued password: %s", left)
			}
		}
		var resp credv1.CredentialProviderResponse
		if code == 0 {
			if err := json.Unmarshal(stdout.Bytes(), &resp); err != nil {
				t.Fatalf("stdout is not a response: %v\n%s", err, stdout.String())
			}
		} else if stdout.Len() != 0 {
			t.Errorf("a failed run wrote to stdout: %s", stdout.String())
		}
		return resp, stderr.String(), code
	}

	resp, stderr, code := run()
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if data, err := os.ReadFile(status); err != nil {
		t.Errorf("no status after a success: %v", err)
	} else if st, err := credstatus.Parse(data); err != nil || st.Class != "" || st.Message != "" || st.Registry != reg.Addr() {
		t.Errorf("status after a success: %+v, %v", st, err)
	}
	login, ok := resp.Auth[reg.Addr()]
	if resp.APIVersion != "credentialprovider.kubelet.k8s.io/v1" || resp.Kind != "CredentialProviderResponse" ||
		resp.CacheKeyType != credv1.RegistryPluginCacheKeyType || len(resp.Auth) != 1 || !ok {
		t.Fatalf("response %+v", resp)
	}
	// The login lasts as long as the role's credentials (an hour here),
	// cached until five minutes before.
	if d := resp.CacheDuration; d == nil || d.Duration > 55*time.Minute || d.Duration < 50*time.Minute {
		t.Errorf("cacheDuration %v, want just under 55m", d)
	}
	if strings.Contains(stderr, login.Password) {
		t.Errorf("stderr holds the issued password: %s", stderr)
	}
	// The metadata was read in hardened mode: a token first, every GET with it.
	reqs := meta.Requests()
	if len(reqs) == 0 || reqs[0].Method != "PUT" || reqs[0].Path != ecsmeta.TokenPath {
		t.Errorf("first metadata request %+v, want the token PUT", reqs)
	}
	for _, r := range reqs[1:] {
		if !r.Token || r.Status != 200 {
			t.Errorf("metadata request %+v", r)
		}
	}
	if calls := api.Calls(); len(calls) != 1 || calls[0] != (acrapi.Call{Action: "GetAuthorizationToken", Role: "drover-node", InstanceID: "cri-harness1"}) {
		t.Errorf("ACR calls %+v", calls)
	}

	// The registry: anonymous refused, the issued login pulls, and its log
	// names the role the login was issued for.
	base := "http://" + reg.Addr()
	if _, err := registry.FetchManifest(ctx, base, "private/app", "v1", "", ""); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("anonymous pull: %v, want 401", err)
	}
	m, err := registry.FetchManifest(ctx, base, "private/app", "v1", login.Username, login.Password)
	if want, _ := img.RawManifest(); err != nil || !bytes.Equal(m, want) {
		t.Errorf("pull with the provider's login: %v", err)
	}
	if !strings.Contains(regLog.String(), "GET /v2/private/app/manifests/v1 for role drover-node (instance cri-harness1)") {
		t.Errorf("registry log:\n%s", regLog.String())
	}

	// The role may not call ACR: the error names the role and the action
	// (and, as every error, no credential: run checks).
	api.Deny("drover-node", true)
	_, stderr, code = run()
	if code != 1 || !strings.Contains(stderr, "access denied: Forbidden.RAM (HTTP 403)") ||
		!strings.Contains(stderr, `grant the instance's RAM role "drover-node" the actions cr:GetAuthorizationToken`) {
		t.Errorf("role denied: exit %d, stderr %q", code, stderr)
	}
	api.Deny("drover-node", false)

	// The role detached: a clear error for the kubelet's log, no answer.
	meta.DetachRAMRole()
	_, stderr, code = run()
	if code != 1 || !strings.Contains(stderr, "credentials for "+reg.Addr()+": the instance has no RAM role attached") ||
		!strings.Contains(stderr, "attach a RAM role") {
		t.Errorf("role detached: exit %d, stderr %q", code, stderr)
	}
	if calls := api.Calls(); len(calls) != 2 {
		t.Errorf("ACR asked without a role: %+v", calls)
	}
	// What the agent reads: the class and the registry, for a Node Event.
	data, err := os.ReadFile(status)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := credstatus.Parse(data); err != nil || st.Class != credstatus.NoRAMRole || st.Registry != reg.Addr() {
		t.Errorf("status after the detach: %+v, %v", st, err)
	}
}

// lockedBuffer is a log the registry's goroutines write while the test
// reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
