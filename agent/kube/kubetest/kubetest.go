// Package kubetest is a fake Kubernetes API server for tests of CA
// discovery: a TLS server with a certificate from a CA of the test's
// choosing that serves kube-public/cluster-info, plus CAs, kubeconfigs and
// bootstrap-token signatures to fill it with. Only tests import it (it
// pulls in net/http/httptest, which the agent binary must not carry).
package kubetest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a self-signed certificate authority.
type CA struct {
	PEM  []byte
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

var serial atomic.Int64

// NewCA makes a CA called cn.
func NewCA(t testing.TB, cn string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: cn}, IsCA: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &CA{PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), cert: cert, key: key}
}

// serving issues a certificate for 127.0.0.1 and localhost.
func (ca *CA) serving(t testing.TB) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// Server serves cluster-info with a certificate from the CA it was made
// with; Data can be changed at any time.
type Server struct {
	URL  string
	mu   sync.Mutex
	data map[string]string
	gets int
}

// NewServer starts a fake API server whose serving certificate is issued
// by ca; it stops with the test.
func NewServer(t testing.TB, ca *CA) *Server {
	t.Helper()
	s := &Server{}
	h := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/api/v1/namespaces/kube-public/configmaps/cluster-info" {
			http.NotFound(w, r)
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.gets++
		json.NewEncoder(w).Encode(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "cluster-info", "namespace": "kube-public"}, "data": s.data})
	}))
	h.TLS = &tls.Config{Certificates: []tls.Certificate{ca.serving(t)}}
	h.StartTLS()
	t.Cleanup(h.Close)
	s.URL = h.URL
	return s
}

// Set replaces the ConfigMap's data.
func (s *Server) Set(data map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.data = data
}

// Gets counts the cluster-info requests served.
func (s *Server) Gets() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gets
}

// Kubeconfig is cluster-info's kubeconfig naming server, with the
// certificates of bundle as its certificate-authority-data.
func Kubeconfig(server string, bundle ...*CA) string {
	var b []byte
	for _, ca := range bundle {
		b = append(b, ca.PEM...)
	}
	return "apiVersion: v1\nkind: Config\nclusters:\n- name: \"\"\n  cluster:\n    certificate-authority-data: " +
		base64.StdEncoding.EncodeToString(b) + "\n    server: " + server + "\npreferences: {}\nusers: null\n"
}

// Sign gives the detached JWS bootstrapsigner writes for content under
// "jws-kubeconfig-<id>" for token "<id>.<secret>". It is written apart
// from the agent's verifier on purpose, following the Kubernetes signer:
// HS256, header {"alg":"HS256","kid":id}, key the secret zero-padded to
// 32 bytes.
func Sign(content, token string) string {
	id, secret, _ := strings.Cut(token, ".")
	hdr := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","kid":"` + id + `"}`))
	key := make([]byte, max(32, len(secret)))
	copy(key, secret)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(hdr + "." + base64.RawURLEncoding.EncodeToString([]byte(content))))
	return hdr + ".." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// ClusterInfo is the data of a cluster-info signed for each token.
func ClusterInfo(kubeconfig string, tokens ...string) map[string]string {
	d := map[string]string{"kubeconfig": kubeconfig}
	for _, tok := range tokens {
		id, _, _ := strings.Cut(tok, ".")
		d["jws-kubeconfig-"+id] = Sign(kubeconfig, tok)
	}
	return d
}
