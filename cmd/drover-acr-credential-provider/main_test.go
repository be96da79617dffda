package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/drover-os/drover/agent/acrprovider"
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
