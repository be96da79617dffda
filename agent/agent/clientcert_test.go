package agent

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-os/drover/agent/nodeconfig"
)

// signer plays the API server and the controller manager's approver and
// signer for the agent's client certificate request: it checks what the
// approver checks (the kubelet's subject, a request signed by its key) and
// records what it was asked.
type signer struct {
	mu       sync.Mutex
	calls    []string // "<name> <token>"
	deny     string
	caKey    *ecdsa.PrivateKey
	ca       *x509.Certificate
	kubelet  func() bool // whether kubelet.service had been started when asked
	startedK []bool
}

func newSigner(t *testing.T) *signer {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubernetes"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	return &signer{caKey: key, ca: ca}
}

func (s *signer) request(ctx context.Context, server string, ca []byte, token, name string, csrPEM []byte) ([]byte, error) {
	// The approver takes a while: a kubelet started without waiting for
	// the certificate would be started by the time it answers.
	time.Sleep(200 * time.Millisecond)
	s.mu.Lock()
	s.calls = append(s.calls, name+" "+token)
	if s.kubelet != nil {
		s.startedK = append(s.startedK, s.kubelet())
	}
	s.mu.Unlock()
	if s.deny != "" {
		return nil, errors.New(s.deny)
	}
	b, _ := pem.Decode(csrPEM)
	if b == nil || b.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("no CERTIFICATE REQUEST")
	}
	req, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		return nil, err
	}
	if err := req.CheckSignature(); err != nil {
		return nil, err
	}
	if req.Subject.CommonName != "system:node:izbp1abcz" || strings.Join(req.Subject.Organization, ",") != "system:nodes" {
		return nil, errors.New("denied: subject " + req.Subject.String())
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: req.Subject, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.ca, req.PublicKey, s.caKey)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// The first boot: the agent requests the certificate with the bootstrap
// token before the kubelet starts, keeps it where the kubelet's store does
// and writes the kubelet's kubeconfig; the request's key is gone after.
func TestBootstrapBeforeKubelet(t *testing.T) {
	r := newRig(t, userData(t, "hello"))
	s := newSigner(t)
	s.kubelet = func() bool { return r.sd.Called("start kubelet.service") }
	a := r.agent()
	a.env.RequestClientCert = s.request
	if err := a.Run(context.Background()); err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(r.log, "\n"))
	}
	if len(s.calls) != 1 || !strings.HasPrefix(s.calls[0], "node-csr-") || !strings.HasSuffix(s.calls[0], " abcdef.0123456789abcdef") {
		t.Fatalf("requests %q, want one node-csr-… with the bootstrap token", s.calls)
	}
	if s.startedK[0] {
		t.Error("kubelet.service was started before the client certificate was issued")
	}
	cur := filepath.Join(r.root, KubeletCert)
	target, err := os.Readlink(cur)
	if err != nil || !strings.HasPrefix(target, "kubelet-client-") || !strings.HasSuffix(target, ".pem") || strings.Contains(target, "current") {
		t.Fatalf("%s: link %q, %v; want a link to kubelet-client-<time>.pem", KubeletCert, target, err)
	}
	fi, err := os.Stat(cur)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v, mode %v; want 0600", KubeletCert, err, fi.Mode())
	}
	if err := clientCertErr(cur, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(r.root, bootstrapKey)); !os.IsNotExist(err) {
		t.Errorf("%s left after the certificate came: %v", bootstrapKey, err)
	}
	kc, err := os.ReadFile(filepath.Join(r.root, nodeconfig.KubeconfigPath))
	if err != nil || !strings.Contains(string(kc), "client-certificate: "+KubeletCert) || !strings.Contains(string(kc), "client-key: "+KubeletCert) ||
		!strings.Contains(string(kc), "server: https://10.0.2.2:6443") || strings.Contains(string(kc), "token") {
		t.Fatalf("kubeconfig %v:\n%s", err, kc)
	}
	// The certificate the kubelet will use is the one signed for the
	// request, checked by openssl against the signer's CA.
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Fatal("openssl is needed to check the certificate independently (scripts/host-setup.sh installs it)")
	}
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.ca.Raw}), 0o644)
	if out, err := exec.Command("openssl", "verify", "-CAfile", caFile, "-purpose", "sslclient", cur).CombinedOutput(); err != nil {
		t.Errorf("openssl verify: %v\n%s", err, out)
	}
	if out, err := exec.Command("openssl", "pkey", "-in", cur, "-noout", "-text").CombinedOutput(); err != nil || !strings.Contains(string(out), "P-256") {
		t.Errorf("openssl pkey of the pair: %v\n%s", err, out)
	}

	// A reboot: the certificate is valid, nothing is asked.
	r.sd.Calls = nil
	if got, err := r.agent().clientCertificateWith(s.request); err != nil || !strings.Contains(got, "kept") {
		t.Errorf("reboot: %q, %v; want the certificate kept", got, err)
	}
	if len(s.calls) != 1 {
		t.Errorf("reboot asked again: %q", s.calls)
	}
}

// A denied request fails the join, naming the request, before the kubelet
// starts; the key stays for a rerun to ask with again.
func TestBootstrapDenied(t *testing.T) {
	r := newRig(t, userData(t, "hello"))
	s := newSigner(t)
	s.deny = "CertificateSigningRequest node-csr-x denied: AutoDenied not allowed"
	a := r.agent()
	a.env.RequestClientCert = s.request
	err := a.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "node-csr-x denied") || !strings.Contains(err.Error(), "CSR approver") {
		t.Fatalf("err %v, want the denial and a hint", err)
	}
	if r.sd.Called("start kubelet.service") {
		t.Error("kubelet.service started without a client certificate")
	}
	key1, err := os.ReadFile(filepath.Join(r.root, bootstrapKey))
	if err != nil {
		t.Fatal(err)
	}
	s.deny = ""
	a = r.agent()
	if _, err := a.clientCertificateWith(s.request); err != nil {
		t.Fatal(err)
	}
	if s.calls[0] != s.calls[1] {
		t.Errorf("rerun asked %q, first %q: want the same request (same key) again", s.calls[1], s.calls[0])
	}
	if len(key1) == 0 {
		t.Error("no bootstrap key kept")
	}
}

// clientCertificateWith runs the phase alone on a configured rig.
func (a *Agent) clientCertificateWith(req func(context.Context, string, []byte, string, string, []byte) ([]byte, error)) (string, error) {
	a.env.RequestClientCert = req
	if a.node == nil {
		if _, err := a.config(context.Background()); err != nil {
			return "", err
		}
		if _, err := a.apply(context.Background()); err != nil {
			return "", err
		}
	}
	a.nodeName = "izbp1abcz"
	return a.clientCertificate(context.Background())
}
