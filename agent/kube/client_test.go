package kube

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// request is what the fake API server saw.
type request struct {
	Method, Path, ContentType, Accept, ClientCN string
	Body                                        []byte
}

// fakeAPI is an API server that records each request and answers with
// status and body.
type fakeAPI struct {
	mu     sync.Mutex
	seen   []request
	status int
	body   string
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	req := request{Method: r.Method, Path: r.URL.EscapedPath(), ContentType: r.Header.Get("Content-Type"), Accept: r.Header.Get("Accept"), Body: b}
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		req.ClientCN = r.TLS.PeerCertificates[0].Subject.CommonName
	}
	f.mu.Lock()
	f.seen = append(f.seen, req)
	status, body := f.status, f.body
	f.mu.Unlock()
	w.WriteHeader(status)
	io.WriteString(w, body)
}

func (f *fakeAPI) last(t *testing.T) request {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.seen) != 1 {
		t.Fatalf("the API server saw %d requests, want 1: %+v", len(f.seen), f.seen)
	}
	r := f.seen[0]
	f.seen = nil
	return r
}

// pki is a cluster CA and a kubelet client certificate signed by it, as
// PEM files, like the kubelet's kubelet-client-current.pem (cert and key
// in one file).
type pki struct {
	caPEM    []byte
	pool     *x509.CertPool
	clientPE string // cert + key
}

func newPKI(t *testing.T, node string) *pki {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubernetes"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	cliKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	cliTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	cliDER, err := x509.CreateCertificate(rand.Reader, cliTmpl, ca, &cliKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(cliKey)
	p := &pki{caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	p.clientPE = filepath.Join(t.TempDir(), "kubelet-client-current.pem")
	both := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cliDER}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})...)
	if err := os.WriteFile(p.clientPE, both, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// apiServer is a TLS API server that requires a client certificate from
// the cluster CA, as the real one does for a kubelet.
func apiServer(t *testing.T, p *pki, f *fakeAPI) (*httptest.Server, []byte) {
	t.Helper()
	srv := httptest.NewUnstartedServer(f)
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: p.pool}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	serverCA := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return srv, serverCA
}

func client(t *testing.T, f *fakeAPI) *Client {
	t.Helper()
	p := newPKI(t, "n1")
	srv, serverCA := apiServer(t, p, f)
	c, err := New(srv.URL+"/", serverCA, p.clientPE, p.clientPE)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestGetNode: GET /api/v1/nodes/<name> with the kubelet's certificate, the
// Node decoded, and Ready read from its conditions.
func TestGetNode(t *testing.T) {
	f := &fakeAPI{status: 200, body: `{"metadata":{"name":"n1","uid":"u-1","labels":{"a":"b"}},"spec":{"providerID":"cn-hangzhou.i-1"},
		"status":{"conditions":[{"type":"MemoryPressure","status":"False"},{"type":"Ready","status":"True","reason":"KubeletReady","message":"kubelet is posting ready status","lastHeartbeatTime":"2026-12-01T10:00:05Z"}]}}`}
	c := client(t, f)
	n, err := c.GetNode(context.Background(), "n1")
	if err != nil {
		t.Fatal(err)
	}
	r := f.last(t)
	if r.Method != "GET" || r.Path != "/api/v1/nodes/n1" || r.Accept != "application/json" || len(r.Body) != 0 || r.ClientCN != "system:node:n1" {
		t.Errorf("request %+v", r)
	}
	if n.Metadata.Name != "n1" || n.Metadata.UID != "u-1" || n.Metadata.Labels["a"] != "b" || n.Spec.ProviderID != "cn-hangzhou.i-1" {
		t.Errorf("node %+v", n)
	}
	kubeletStart := time.Date(2026, 12, 1, 10, 0, 5, 600e6, time.UTC) // the heartbeat has whole seconds
	if ok, why := n.ReadySince(kubeletStart); !ok || why != "KubeletReady: kubelet is posting ready status" {
		t.Errorf("ReadySince(the kubelet's start) = %v, %q", ok, why)
	}
	// Posted before this boot's kubelet started: the Node's leftover from
	// before a reboot.
	if ok, why := n.ReadySince(kubeletStart.Add(2 * time.Second)); ok || !strings.Contains(why, "before this boot's kubelet started") {
		t.Errorf("ReadySince(after the heartbeat) = %v, %q", ok, why)
	}

	// A name is one path segment, escaped.
	if _, err := c.GetNode(context.Background(), "a/b"); err != nil {
		t.Fatal(err)
	}
	if r := f.last(t); r.Path != "/api/v1/nodes/a%2Fb" {
		t.Errorf("path %s", r.Path)
	}
}

// TestSetCondition: a strategic-merge PATCH of the Node's status with the
// one condition, stamped now, so the kubelet's own conditions stay.
func TestSetCondition(t *testing.T) {
	f := &fakeAPI{status: 200, body: "{}"}
	c := client(t, f)
	before := time.Now().Add(-time.Second)
	err := c.SetCondition(context.Background(), "n1", Condition{Type: "DroverConfigDrift", Status: "True", Reason: "UserDataChanged", Message: "the user-data changed"})
	if err != nil {
		t.Fatal(err)
	}
	r := f.last(t)
	if r.Method != "PATCH" || r.Path != "/api/v1/nodes/n1/status" || r.ContentType != "application/strategic-merge-patch+json" || r.ClientCN != "system:node:n1" {
		t.Errorf("request %+v", r)
	}
	var body struct {
		Status struct {
			Conditions []map[string]string `json:"conditions"`
		} `json:"status"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("body %s: %v", r.Body, err)
	}
	var top map[string]json.RawMessage
	json.Unmarshal(r.Body, &top)
	if len(top) != 1 || len(body.Status.Conditions) != 1 {
		t.Fatalf("the patch touches more than status.conditions[DroverConfigDrift]: %s", r.Body)
	}
	cond := body.Status.Conditions[0]
	if cond["type"] != "DroverConfigDrift" || cond["status"] != "True" || cond["reason"] != "UserDataChanged" || cond["message"] != "the user-data changed" {
		t.Errorf("condition %v", cond)
	}
	for _, k := range []string{"lastTransitionTime", "lastHeartbeatTime"} {
		ts, err := time.Parse(time.RFC3339, cond[k])
		if err != nil || ts.Before(before.Truncate(time.Second)) || ts.After(time.Now().Add(time.Second)) {
			t.Errorf("%s %q is not now (%v)", k, cond[k], err)
		}
	}
}

// TestEvent: a Warning Event about the Node, POSTed to the default
// namespace, involving the Node by name and UID.
func TestEvent(t *testing.T) {
	f := &fakeAPI{status: 201, body: "{}"}
	c := client(t, f)
	if err := c.Event(context.Background(), "n1", "u-1", "ConfigDrift", "the user-data changed since first boot"); err != nil {
		t.Fatal(err)
	}
	r := f.last(t)
	if r.Method != "POST" || r.Path != "/api/v1/namespaces/default/events" || r.ContentType != "application/json" || r.ClientCN != "system:node:n1" {
		t.Errorf("request %+v", r)
	}
	var ev struct {
		APIVersion, Kind, Reason, Message, Type string
		Count                                   int
		FirstTimestamp, LastTimestamp           string
		Metadata                                struct{ GenerateName, Namespace string }
		InvolvedObject                          struct{ Kind, Name, UID string }
		Source                                  struct{ Component, Host string }
	}
	if err := json.Unmarshal(r.Body, &ev); err != nil {
		t.Fatalf("body %s: %v", r.Body, err)
	}
	if ev.APIVersion != "v1" || ev.Kind != "Event" || ev.Type != "Warning" || ev.Reason != "ConfigDrift" || ev.Message != "the user-data changed since first boot" || ev.Count != 1 {
		t.Errorf("event %+v", ev)
	}
	if ev.Metadata.Namespace != "default" || ev.Metadata.GenerateName != "n1.drover-" {
		t.Errorf("metadata %+v", ev.Metadata)
	}
	if ev.InvolvedObject.Kind != "Node" || ev.InvolvedObject.Name != "n1" || ev.InvolvedObject.UID != "u-1" {
		t.Errorf("involvedObject %+v", ev.InvolvedObject)
	}
	if ev.Source.Component != "drover-agent" || ev.Source.Host != "n1" {
		t.Errorf("source %+v", ev.Source)
	}
	if _, err := time.Parse(time.RFC3339, ev.FirstTimestamp); err != nil || ev.FirstTimestamp != ev.LastTimestamp {
		t.Errorf("timestamps %q %q", ev.FirstTimestamp, ev.LastTimestamp)
	}
}

// TestAPIErrors: a refusal names the request and carries the server's
// status and answer; a bad answer body says it could not be decoded.
func TestAPIErrors(t *testing.T) {
	f := &fakeAPI{status: 403, body: `{"kind":"Status","message":"nodes \"n1\" is forbidden"}` + "\n"}
	c := client(t, f)
	err := c.SetCondition(context.Background(), "n1", Condition{Type: "X", Status: "True"})
	if err == nil || err.Error() != `PATCH /api/v1/nodes/n1/status: 403 Forbidden: {"kind":"Status","message":"nodes \"n1\" is forbidden"}` {
		t.Errorf("403: %v", err)
	}
	f.last(t)
	f.status, f.body = 200, "not json"
	if _, err := c.GetNode(context.Background(), "n1"); err == nil || !strings.HasPrefix(err.Error(), "GET /api/v1/nodes/n1: decoding: ") {
		t.Errorf("bad body: %v", err)
	}
}

// TestNewTrustsOnlyTheClusterCA: a server whose certificate the pinned CA
// did not sign is refused, and so is a client without a usable key pair.
func TestNewTrustsOnlyTheClusterCA(t *testing.T) {
	f := &fakeAPI{status: 200, body: "{}"}
	p := newPKI(t, "n1")
	srv, _ := apiServer(t, p, f)
	c, err := New(srv.URL, p.caPEM, p.clientPE, p.clientPE) // the cluster CA did not sign httptest's server cert
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetNode(context.Background(), "n1"); err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Errorf("untrusted server: %v", err)
	}
	if _, err := New(srv.URL, []byte("no pem"), p.clientPE, p.clientPE); err == nil || err.Error() != "cluster CA: no certificate in PEM" {
		t.Errorf("bad CA: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "none.pem")
	if _, err := New(srv.URL, p.caPEM, missing, missing); err == nil || !strings.Contains(err.Error(), "loading kubelet client certificate "+missing) {
		t.Errorf("missing client cert: %v", err)
	}
}

// TestHealthz: 200 is healthy; anything else is an error with the status
// and the answer.
func TestHealthz(t *testing.T) {
	var status atomic.Int32
	status.Store(200)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(int(status.Load()))
		io.WriteString(w, "[-]syncloop failed\n")
	}))
	defer srv.Close()
	if err := Healthz(context.Background(), srv.URL+"/healthz"); err != nil {
		t.Errorf("healthy: %v", err)
	}
	status.Store(500)
	if err := Healthz(context.Background(), srv.URL+"/healthz"); err == nil || err.Error() != srv.URL+"/healthz: 500 Internal Server Error [-]syncloop failed" {
		t.Errorf("unhealthy: %v", err)
	}
}
