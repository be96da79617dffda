package cluster

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var testNow = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func verify(t *testing.T, ca *CA, kp KeyPair, usage x509.ExtKeyUsage) *x509.Certificate {
	t.Helper()
	cert, err := parseCertPEM(kp.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: testNow, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		t.Errorf("%s does not verify for %v: %v", cert.Subject, usage, err)
	}
	if _, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM); err != nil {
		t.Errorf("%s: key does not match certificate: %v", cert.Subject, err)
	}
	return cert
}

func TestCAAndLeafChains(t *testing.T) {
	ca, err := NewCA("test-ca", testNow)
	if err != nil {
		t.Fatal(err)
	}
	if !ca.Cert.IsCA || ca.Cert.NotAfter.Sub(testNow) != certValidity {
		t.Errorf("CA: IsCA=%v NotAfter=%v", ca.Cert.IsCA, ca.Cert.NotAfter)
	}
	for name, spec := range leafSpecs("") {
		kp, err := ca.Issue(spec, testNow)
		if err != nil {
			t.Fatal(err)
		}
		usage := x509.ExtKeyUsageClientAuth
		if spec.Server {
			usage = x509.ExtKeyUsageServerAuth
		}
		cert := verify(t, ca, kp, usage)
		if cert.Subject.CommonName != spec.CommonName {
			t.Errorf("%s: CN %q", name, cert.Subject.CommonName)
		}
		if cert.NotBefore.After(testNow) || cert.NotAfter.After(ca.Cert.NotAfter) {
			t.Errorf("%s: validity %v..%v outside the CA's", name, cert.NotBefore, cert.NotAfter)
		}
	}
	admin, _ := ca.Issue(leafSpecs("")["admin"], testNow)
	if c, _ := parseCertPEM(admin.CertPEM); len(c.Subject.Organization) != 1 || c.Subject.Organization[0] != "system:masters" {
		t.Errorf("admin organization = %v", c.Subject.Organization)
	}
	kcm, _ := ca.Issue(leafSpecs("")["controller-manager"], testNow)
	if c, _ := parseCertPEM(kcm.CertPEM); c.Subject.CommonName != "system:kube-controller-manager" {
		t.Errorf("controller-manager CN = %q", c.Subject.CommonName)
	}
	// A certificate from another CA must not verify.
	other, _ := NewCA("other", testNow)
	foreign, _ := other.Issue(CertSpec{CommonName: "x"}, testNow)
	c, _ := parseCertPEM(foreign.CertPEM)
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	if _, err := c.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: testNow, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("a foreign certificate verified against the cluster CA")
	}
}

func TestAPIServerSANs(t *testing.T) {
	ca, _ := NewCA("test-ca", testNow)
	for _, extra := range []string{"", "192.0.2.7", "guest.example"} {
		kp, err := ca.Issue(apiServerSpec(extra), testNow)
		if err != nil {
			t.Fatal(err)
		}
		cert := verify(t, ca, kp, x509.ExtKeyUsageServerAuth)
		want := append(append([]string{}, apiServerIPs...), apiServerDNS...)
		if extra != "" {
			want = append(want, extra)
		}
		for _, h := range want {
			if err := cert.VerifyHostname(h); err != nil {
				t.Errorf("extra %q: %v", extra, err)
			}
		}
		if n := len(cert.IPAddresses) + len(cert.DNSNames); n != len(want) {
			t.Errorf("extra %q: %d SANs, want %d: %v %v", extra, n, len(want), cert.IPAddresses, cert.DNSNames)
		}
	}
	// A default host given again is not duplicated.
	if spec := apiServerSpec("100.64.0.2"); len(spec.IPs) != len(apiServerIPs) {
		t.Errorf("100.64.0.2 duplicated: %v", spec.IPs)
	}
	if spec := apiServerSpec("localhost"); len(spec.DNSNames) != len(apiServerDNS) {
		t.Errorf("localhost duplicated: %v", spec.DNSNames)
	}
	if !containsIP(apiServerSpec("").IPs, net.ParseIP("10.96.0.1")) {
		t.Error("no service IP SAN")
	}
}

func TestSetupPKIKeepsCAAndServiceAccountKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	p1, fresh, err := setupPKI(dir, "100.64.0.2", testNow)
	if err != nil || !fresh {
		t.Fatalf("first setup: fresh=%v err=%v", fresh, err)
	}
	for _, f := range []string{"ca.crt", "ca.key", "sa.key", "sa.pub", "apiserver.crt", "apiserver.key", "admin.crt",
		"admin.key", "controller-manager.crt", "controller-manager.key", "apiserver-kubelet-client.crt",
		"controller-manager-serving.crt"} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Errorf("missing %s: %v", f, err)
		} else if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", f, fi.Mode().Perm())
		}
	}
	sa1, _ := os.ReadFile(filepath.Join(dir, "sa.key"))
	apiserver1, _ := os.ReadFile(filepath.Join(dir, "apiserver.crt"))

	p2, fresh, err := setupPKI(dir, "192.0.2.9", testNow.Add(time.Hour))
	if err != nil || fresh {
		t.Fatalf("second setup: fresh=%v err=%v", fresh, err)
	}
	if !bytes.Equal(p1.CA.CertPEM(), p2.CA.CertPEM()) {
		t.Error("second setup replaced the CA")
	}
	sa2, _ := os.ReadFile(filepath.Join(dir, "sa.key"))
	apiserver2, _ := os.ReadFile(filepath.Join(dir, "apiserver.crt"))
	if !bytes.Equal(sa1, sa2) {
		t.Error("second setup replaced the service-account key")
	}
	if bytes.Equal(apiserver1, apiserver2) {
		t.Error("second setup kept the old serving certificate")
	}
	cert := verify(t, p2.CA, p2.Leafs["apiserver"], x509.ExtKeyUsageServerAuth)
	if err := cert.VerifyHostname("192.0.2.9"); err != nil {
		t.Errorf("new guest host: %v", err)
	}

	// A CA close to expiry, or a broken key, means a new CA.
	if _, fresh, _ := setupPKI(dir, "", testNow.Add(certValidity-time.Hour)); !fresh {
		t.Error("a CA about to expire was kept")
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.key"), []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, fresh, err := setupPKI(dir, "", testNow); err != nil || !fresh {
		t.Errorf("broken CA key: fresh=%v err=%v", fresh, err)
	}
	if err := os.Remove(filepath.Join(dir, "sa.key")); err != nil {
		t.Fatal(err)
	}
	if _, fresh, err := setupPKI(dir, "", testNow); err != nil || !fresh {
		t.Errorf("missing sa.key: fresh=%v err=%v", fresh, err)
	}
}

func TestLoadCARefusesMismatchedKey(t *testing.T) {
	dir := t.TempDir()
	a, _ := NewCA("a", testNow)
	b, _ := NewCA("b", testNow)
	keyB, _ := encodeKey(b.Key)
	if err := writeFiles(dir, map[string][]byte{"ca.crt": a.CertPEM(), "ca.key": keyB}); err != nil {
		t.Fatal(err)
	}
	if _, err := loadCA(filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")); err == nil {
		t.Error("loadCA accepted a key of another CA")
	}
}
