package kube

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// csrAPI answers the certificates.k8s.io/v1 requests of the bootstrap: the
// object as created, then (after pending GETs) with the certificate or a
// condition, as the API server does once the approver and signer acted.
type csrAPI struct {
	mu       sync.Mutex
	objects  map[string]csrObject
	auth     []string
	pending  int    // GETs answered without a certificate
	cond     string // "Denied": the approver's answer instead
	posts    int
	lastBody map[string]any
}

func (a *csrAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.auth = append(a.auth, r.Header.Get("Authorization"))
	const base = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
	switch {
	case r.Method == "POST" && r.URL.Path == base:
		a.posts++
		b, _ := io.ReadAll(r.Body)
		a.lastBody = map[string]any{}
		json.Unmarshal(b, &a.lastBody)
		var o csrObject
		json.Unmarshal(b, &o)
		if _, dup := a.objects[o.Metadata.Name]; dup {
			w.WriteHeader(409)
			io.WriteString(w, `{"kind":"Status","reason":"AlreadyExists"}`)
			return
		}
		o.Metadata.UID = "u1"
		a.objects[o.Metadata.Name] = o
		w.WriteHeader(201)
		json.NewEncoder(w).Encode(o)
	case r.Method == "GET" && strings.HasPrefix(r.URL.Path, base+"/"):
		o, ok := a.objects[strings.TrimPrefix(r.URL.Path, base+"/")]
		if !ok {
			w.WriteHeader(404)
			return
		}
		if a.pending > 0 {
			a.pending--
		} else if a.cond != "" {
			o.Status.Conditions = append(o.Status.Conditions, struct {
				Type    string `json:"type"`
				Reason  string `json:"reason,omitempty"`
				Message string `json:"message,omitempty"`
			}{Type: a.cond, Reason: "AutoDenied", Message: "not a node client certificate"})
		} else {
			o.Status.Certificate = []byte("-----BEGIN CERTIFICATE-----\nissued\n-----END CERTIFICATE-----\n")
		}
		json.NewEncoder(w).Encode(o)
	default:
		w.WriteHeader(405)
	}
}

func csrClient(t *testing.T, a *csrAPI) *Client {
	t.Helper()
	srv := httptest.NewTLSServer(a)
	t.Cleanup(srv.Close)
	c, err := NewWithToken(srv.URL, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), "abcdef.0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The request is the kubelet's: its subject, signer and usages, sent with
// the bootstrap token; the certificate comes once the signer has issued it.
func TestRequestNodeClientCert(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	csrPEM, name, err := NodeClientCSR(key, "izbp1abcz")
	if err != nil {
		t.Fatal(err)
	}
	a := &csrAPI{objects: map[string]csrObject{}, pending: 2}
	cert, err := csrClient(t, a).RequestNodeClientCert(context.Background(), name, csrPEM, time.Millisecond)
	if err != nil || !strings.Contains(string(cert), "issued") {
		t.Fatalf("cert %q, %v", cert, err)
	}
	for _, h := range a.auth {
		if h != "Bearer abcdef.0123456789abcdef" {
			t.Fatalf("Authorization %q, want the bootstrap token", h)
		}
	}
	if len(a.auth) != 4 { // POST, two pending GETs, the issued one
		t.Errorf("%d requests, want 4", len(a.auth))
	}
	spec, _ := a.lastBody["spec"].(map[string]any)
	if spec["signerName"] != "kubernetes.io/kube-apiserver-client-kubelet" || strings.Join(toStrings(spec["usages"]), ",") != "digital signature,client auth" ||
		a.lastBody["kind"] != "CertificateSigningRequest" || a.lastBody["apiVersion"] != "certificates.k8s.io/v1" {
		t.Errorf("request body %v", a.lastBody)
	}
	// The request itself, read by openssl: the kubelet's subject, signed
	// by the node's P-256 key.
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Fatal("openssl is needed to check the request independently (scripts/host-setup.sh installs it)")
	}
	f := filepath.Join(t.TempDir(), "req.pem")
	os.WriteFile(f, csrPEM, 0o600)
	out, err := exec.Command("openssl", "req", "-in", f, "-verify", "-noout", "-subject", "-text").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "O=system:nodes, CN=system:node:izbp1abcz") &&
		!strings.Contains(string(out), "O = system:nodes, CN = system:node:izbp1abcz") || !strings.Contains(string(out), "P-256") {
		t.Errorf("openssl req: %v\n%s", err, out)
	}
	if !strings.HasPrefix(name, "node-csr-") || len(name) > 253 {
		t.Errorf("name %q", name)
	}

	// A rerun with the same key (an interrupted boot) finds its request.
	a.pending = 0
	csr2, name2, _ := NodeClientCSR(key, "izbp1abcz")
	if name2 != name {
		t.Fatalf("same key, names %q and %q", name, name2)
	}
	// The same key signs a new request each time (ECDSA is randomised):
	// the object holds the first, so only that one is ours.
	if _, err := csrClient(t, a).RequestNodeClientCert(context.Background(), name, csrPEM, time.Millisecond); err != nil {
		t.Errorf("rerun with the first request: %v", err)
	}
	if _, err := csrClient(t, a).RequestNodeClientCert(context.Background(), name, csr2, time.Millisecond); err == nil || !strings.Contains(err.Error(), "exists with another request") {
		t.Errorf("rerun with another request: %v, want it refused", err)
	}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if _, n3, _ := NodeClientCSR(other, "izbp1abcz"); n3 == name {
		t.Error("another key, the same name")
	}
	if _, n4, _ := NodeClientCSR(key, "izbp1other"); n4 == name {
		t.Error("another node, the same name")
	}
}

func TestRequestNodeClientCertDenied(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	csrPEM, name, _ := NodeClientCSR(key, "izbp1abcz")
	a := &csrAPI{objects: map[string]csrObject{}, pending: 1, cond: "Denied"}
	_, err := csrClient(t, a).RequestNodeClientCert(context.Background(), name, csrPEM, time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), name+" denied: AutoDenied not a node client certificate") {
		t.Fatalf("err %v, want the denial", err)
	}
	a = &csrAPI{objects: map[string]csrObject{}, pending: 1 << 30}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := csrClient(t, a).RequestNodeClientCert(ctx, name, csrPEM, time.Millisecond); err == nil || !strings.Contains(err.Error(), "to be approved and signed") {
		t.Fatalf("err %v, want the wait named", err)
	}
	if _, _, err := NodeClientCSR(key, ""); err == nil {
		t.Error("no node name accepted")
	}
}

func toStrings(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}
