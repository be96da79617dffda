package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/agent/acrprovider"
	"github.com/drover-os/drover/agent/credstatus"
)

func TestParseInstance(t *testing.T) {
	in, err := ParseInstance("domain=Images.Example.com,id=cri-abc123,region=cn-shanghai")
	if err != nil || in != (acrprovider.Instance{Domain: "images.example.com", ID: "cri-abc123", Region: "cn-shanghai"}) {
		t.Errorf("ParseInstance = %+v, %v", in, err)
	}
	for v, say := range map[string]string{
		"domain=a.example.com,id=cri-abc123":                         "is not an Alibaba Cloud region ID",
		"domain=a.example.com,id=abc,region=cn-shanghai":             "is not an ACR Enterprise instance ID",
		"domain=https://a.example.com,id=cri-abc,region=cn-shanghai": "is not a registry host",
		"domain=a.example.com,id=cri-abc,region=cn-shanghai,x=1":     `unknown key "x"`,
		"domain=a.example.com,domain=b.example.com,id=cri-abc":       "want domain=",
		"a.example.com": "want domain=",
	} {
		if _, err := ParseInstance(v); err == nil || !strings.Contains(err.Error(), say) {
			t.Errorf("ParseInstance(%q) = %v, want an error saying %q", v, err, say)
		}
	}
}

func TestRunRefusesWhatIsNotARequest(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), nil, strings.NewReader(`{"apiVersion":"credentialprovider.kubelet.k8s.io/v1alpha1","kind":"CredentialProviderRequest","image":"a/b"}`), &out, &errOut)
	if code != 1 || out.Len() != 0 || !strings.Contains(errOut.String(), "set apiVersion: credentialprovider.kubelet.k8s.io/v1") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
	out.Reset()
	errOut.Reset()
	if code := run(context.Background(), []string{"--instance", "nonsense"}, strings.NewReader(""), &out, &errOut); code != 2 ||
		!strings.Contains(errOut.String(), "want domain=") {
		t.Errorf("bad --instance: exit %d, stderr %q", code, errOut.String())
	}
}

// TestRunLeavesStatus: a failed answer for an ACR registry leaves its
// class, registry and masked error for the agent; an image the provider
// does not serve leaves nothing.
func TestRunLeavesStatus(t *testing.T) {
	// A metadata service in hardened mode with no RAM role.
	md := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			io.WriteString(w, "token")
			return
		}
		http.NotFound(w, r)
	}))
	defer md.Close()
	status := filepath.Join(t.TempDir(), "credential-provider.status")
	args := []string{"--metadata-url", md.URL, "--status-file", status, "--instance", "domain=100.64.0.2:5000,id=cri-smoke,region=cn-hangzhou"}
	req := func(image string) io.Reader {
		return strings.NewReader(`{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","image":"` + image + `"}`)
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), args, req("docker.io/library/busybox"), &out, &errOut); code != 0 {
		t.Fatalf("unknown host: exit %d: %s", code, errOut.String())
	}
	if _, err := os.Stat(status); !os.IsNotExist(err) {
		t.Errorf("a status for an image the provider does not serve: %v", err)
	}
	before := time.Now().Add(-time.Second)
	if code := run(context.Background(), args, req("100.64.0.2:5000/private/hello:v1"), &out, &errOut); code != 1 {
		t.Fatalf("no role: exit %d: %s", code, errOut.String())
	}
	data, err := os.ReadFile(status)
	if err != nil {
		t.Fatal(err)
	}
	st, err := credstatus.Parse(data)
	if err != nil || st.Class != credstatus.NoRAMRole || st.Registry != "100.64.0.2:5000" || st.Time.Before(before) ||
		!strings.Contains(st.Message, "the instance has no RAM role attached") {
		t.Errorf("status %+v, %v", st, err)
	}
	if fi, err := os.Stat(status); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("status file mode: %v %v", fi, err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(status)); len(ents) != 1 {
		t.Errorf("left behind: %v", ents)
	}
}
