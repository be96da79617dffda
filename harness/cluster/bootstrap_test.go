package cluster

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestNewBootstrapToken(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		tok, err := NewBootstrapToken()
		if err != nil {
			t.Fatal(err)
		}
		if !tokenRE.MatchString(tok) {
			t.Fatalf("token %q does not match %s", tok, tokenRE)
		}
		if seen[tok] {
			t.Fatalf("token %q generated twice", tok)
		}
		seen[tok] = true
	}
}

func TestSplitToken(t *testing.T) {
	id, secret, err := splitToken("abc123.0123456789abcdef")
	if err != nil || id != "abc123" || secret != "0123456789abcdef" {
		t.Errorf("split = %q %q %v", id, secret, err)
	}
	for _, bad := range []string{"", "abc123", "ABC123.0123456789abcdef", "abc12.0123456789abcdef",
		"abc123.0123456789abcde", "abc123-0123456789abcdef", "abc123.0123456789abcdef\n"} {
		if _, _, err := splitToken(bad); err == nil {
			t.Errorf("splitToken(%q) accepted", bad)
		}
	}
}

func TestBootstrapObjects(t *testing.T) {
	exp := time.Date(2026, 5, 2, 12, 0, 0, 0, time.FixedZone("x", 3600))
	objs, err := bootstrapObjects("abc123.0123456789abcdef", exp, []byte("kubeconfig-text"))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]object{}
	for _, o := range objs {
		byName[o.name] = o
		if _, err := json.Marshal(o.body); err != nil {
			t.Errorf("%s: %v", o, err)
		}
	}
	sec := byName["bootstrap-token-abc123"]
	if sec.collection != "/api/v1/namespaces/kube-system/secrets" || sec.body["type"] != "bootstrap.kubernetes.io/token" {
		t.Errorf("secret = %+v", sec)
	}
	data := sec.body["stringData"].(map[string]string)
	want := map[string]string{
		"token-id": "abc123", "token-secret": "0123456789abcdef", "expiration": "2026-05-02T11:00:00Z",
		"usage-bootstrap-authentication": "true", "usage-bootstrap-signing": "true",
		"auth-extra-groups": "system:bootstrappers:drover",
	}
	for k, v := range want {
		if data[k] != v {
			t.Errorf("secret %s = %q, want %q", k, data[k], v)
		}
	}
	for name, rg := range map[string][2]string{
		"drover:kubelet-bootstrap":                     {"system:node-bootstrapper", "system:bootstrappers"},
		"drover:node-autoapprove-bootstrap":            {"system:certificates.k8s.io:certificatesigningrequests:nodeclient", "system:bootstrappers"},
		"drover:node-autoapprove-certificate-rotation": {"system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"},
	} {
		o, ok := byName[name]
		if !ok {
			t.Errorf("no binding %s", name)
			continue
		}
		js, _ := json.Marshal(o.body)
		if !strings.Contains(string(js), `"name":"`+rg[0]+`"`) || !strings.Contains(string(js), `"kind":"Group","name":"`+rg[1]+`"`) {
			t.Errorf("binding %s = %s", name, js)
		}
	}
	cm := byName["cluster-info"]
	if cm.collection != "/api/v1/namespaces/kube-public/configmaps" || cm.body["data"].(map[string]string)["kubeconfig"] != "kubeconfig-text" {
		t.Errorf("cluster-info = %+v", cm)
	}
	if _, err := bootstrapObjects("bad", exp, nil); err == nil {
		t.Error("a malformed token was accepted")
	}
}
