package agent

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServingCertAsTheKubeletWould: the pair loads as the kubelet loads it
// (tls.LoadX509KeyPair, as client-go's CanReadCertAndKey and the kubelet's
// dynamic serving content do), the certificate verifies against the CA in
// the chain for the node's name, the key is P-256 and private, and openssl
// agrees; a usable pair is kept, an unusable one replaced.
func TestServingCertAsTheKubeletWould(t *testing.T) {
	root := t.TempDir()
	now := time.Now()
	detail, err := ensureServingCert(root, "izbp1abcz", now)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath := filepath.Join(root, ServingCert), filepath.Join(root, ServingKey)
	pair, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		t.Fatalf("%s: %v", detail, err)
	}
	if len(pair.Certificate) != 2 {
		t.Fatalf("chain of %d certificates, want the certificate and its CA", len(pair.Certificate))
	}
	leaf, _ := x509.ParseCertificate(pair.Certificate[0])
	ca, _ := x509.ParseCertificate(pair.Certificate[1])
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "izbp1abcz", Roots: roots, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("the serving certificate does not verify for the node's name: %v", err)
	}
	if k, ok := pair.PrivateKey.(*ecdsa.PrivateKey); !ok || k.Curve.Params().Name != "P-256" {
		t.Errorf("key %T, want P-256", pair.PrivateKey)
	}
	if fi, _ := os.Stat(keyPath); fi.Mode().Perm() != 0o600 {
		t.Errorf("key mode %v, want 0600", fi.Mode().Perm())
	}
	if leaf.NotAfter.Sub(now) < 364*24*time.Hour || !leaf.NotBefore.Before(now.Add(-59*time.Minute)) {
		t.Errorf("valid %s to %s, want a year from an hour ago", leaf.NotBefore, leaf.NotAfter)
	}
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Fatal("openssl is needed to check the certificate independently (scripts/host-setup.sh installs it)")
	}
	chainFile := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(chainFile, pemOf(ca.Raw), 0o644)
	if out, err := exec.Command("openssl", "verify", "-CAfile", chainFile, "-purpose", "sslserver", certPath).CombinedOutput(); err != nil {
		t.Errorf("openssl verify: %v\n%s", err, out)
	}
	if out, err := exec.Command("openssl", "ec", "-in", keyPath, "-check", "-noout").CombinedOutput(); err != nil {
		t.Errorf("openssl ec -check: %v\n%s", err, out)
	}

	// Kept while usable (a later boot).
	before, _ := os.ReadFile(certPath)
	if d, err := ensureServingCert(root, "izbp1abcz", now); err != nil || !strings.Contains(d, "kept") {
		t.Errorf("second call: %q, %v", d, err)
	}
	if after, _ := os.ReadFile(certPath); string(after) != string(before) {
		t.Error("a usable serving certificate was replaced")
	}
	// A certificate without its key (an interrupted first write) is replaced.
	os.Remove(keyPath)
	if _, err := ensureServingCert(root, "izbp1abcz", now); err != nil {
		t.Fatal(err)
	}
	if _, err := tls.LoadX509KeyPair(certPath, keyPath); err != nil {
		t.Errorf("not replaced after the key was lost: %v", err)
	}
}

func pemOf(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
