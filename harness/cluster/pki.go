package cluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certValidity is how long every certificate of the local cluster lives;
// a smoke-test cluster never gets near it, and a state dir kept for longer
// gets a new CA (see loadOrCreateCA).
const certValidity = 365 * 24 * time.Hour

// clockSkew backdates NotBefore so that a guest whose clock is a little
// behind the host's still accepts the certificates.
const clockSkew = time.Hour

// apiServerSANs are the names the apiserver serving certificate carries:
// loopback for the host, the QEMU user-network host addresses for the guest
// (100.64.0.2 with net=100.64.0.0/10, 10.0.2.2 with QEMU's default), the
// first service IP and the in-cluster names for pods.
var (
	apiServerIPs = []string{"127.0.0.1", "100.64.0.2", "10.0.2.2", "10.96.0.1"}
	apiServerDNS = []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc.cluster.local"}
)

// CA is a certificate authority: the cluster CA signs every certificate of
// the control plane and, through kube-controller-manager, the kubelet's.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// CertPEM is the CA certificate in PEM form (what a kubeconfig and the
// guest's user-data carry).
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// CertSpec describes one leaf certificate.
type CertSpec struct {
	CommonName   string
	Organization []string
	DNSNames     []string
	IPs          []net.IP
	Server       bool // serverAuth extended key usage (else clientAuth)
}

// KeyPair is an issued certificate and its private key, both PEM.
type KeyPair struct {
	CertPEM, KeyPEM []byte
}

// NewCA creates a self-signed ECDSA P-256 CA valid from now.
func NewCA(commonName string, now time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("creating CA certificate %q: %w", commonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing CA certificate %q: %w", commonName, err)
	}
	return &CA{Cert: cert, Key: key}, nil
}

// Issue creates a new key and a certificate for spec signed by ca, valid
// from now for a year but never beyond the CA.
func (ca *CA) Issue(spec CertSpec, now time.Time) (KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return KeyPair{}, fmt.Errorf("generating key for %q: %w", spec.CommonName, err)
	}
	serial, err := randomSerial()
	if err != nil {
		return KeyPair{}, err
	}
	usage := x509.ExtKeyUsageClientAuth
	if spec.Server {
		usage = x509.ExtKeyUsageServerAuth
	}
	notAfter := now.Add(certValidity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: spec.CommonName, Organization: spec.Organization},
		NotBefore:    now.Add(-clockSkew),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     spec.DNSNames,
		IPAddresses:  spec.IPs,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return KeyPair{}, fmt.Errorf("issuing certificate %q: %w", spec.CommonName, err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return KeyPair{}, fmt.Errorf("encoding key of %q: %w", spec.CommonName, err)
	}
	return KeyPair{CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), KeyPEM: keyPEM}, nil
}

func randomSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generating certificate serial number: %w", err)
	}
	return serial, nil
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// apiServerSpec is the serving certificate's spec; extraHost (the host of
// the guest's server URL when it is not one of the defaults) is added so
// that the guest can verify whatever address it was told to use.
func apiServerSpec(extraHost string) CertSpec {
	spec := CertSpec{CommonName: "kube-apiserver", DNSNames: append([]string(nil), apiServerDNS...), Server: true}
	for _, s := range apiServerIPs {
		spec.IPs = append(spec.IPs, net.ParseIP(s))
	}
	if extraHost != "" {
		if ip := net.ParseIP(extraHost); ip != nil {
			if !containsIP(spec.IPs, ip) {
				spec.IPs = append(spec.IPs, ip)
			}
		} else if !contains(spec.DNSNames, extraHost) {
			spec.DNSNames = append(spec.DNSNames, extraHost)
		}
	}
	return spec
}

func containsIP(ips []net.IP, ip net.IP) bool {
	for _, x := range ips {
		if x.Equal(ip) {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// leafSpecs are the control plane's client and serving certificates by
// file name stem. They are reissued at every start (only the CA and the
// service-account key must survive a restart), so a change here needs no
// migration of old state dirs.
func leafSpecs(guestHost string) map[string]CertSpec {
	return map[string]CertSpec{
		"apiserver": apiServerSpec(guestHost),
		// The apiserver's identity towards kubelets (logs, exec, port-forward).
		"apiserver-kubelet-client": {CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		"admin":                    {CommonName: "drover-admin", Organization: []string{"system:masters"}},
		"controller-manager":       {CommonName: "system:kube-controller-manager"},
		"controller-manager-serving": {CommonName: "kube-controller-manager", DNSNames: []string{"localhost"},
			IPs: []net.IP{net.ParseIP("127.0.0.1")}, Server: true},
		"scheduler": {CommonName: "system:kube-scheduler"},
		"scheduler-serving": {CommonName: "kube-scheduler", DNSNames: []string{"localhost"},
			IPs: []net.IP{net.ParseIP("127.0.0.1")}, Server: true},
	}
}

// PKI is the cluster's key material as written to <state>/pki.
type PKI struct {
	Dir   string
	CA    *CA
	Leafs map[string]KeyPair
}

// Path returns the path of a PKI file, e.g. Path("ca.crt").
func (p *PKI) Path(name string) string { return filepath.Join(p.Dir, name) }

// setupPKI loads the CA and the service-account key from dir, or creates
// them when missing or when the CA expires within a month, then issues
// fresh leaf certificates. fresh tells whether a new CA was made, which
// makes every earlier kubelet certificate and etcd's stored tokens useless.
func setupPKI(dir, guestHost string, now time.Time) (p *PKI, fresh bool, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, fmt.Errorf("creating PKI directory: %w", err)
	}
	p = &PKI{Dir: dir, Leafs: map[string]KeyPair{}}
	p.CA, err = loadCA(p.Path("ca.crt"), p.Path("ca.key"))
	if err == nil && p.CA.Cert.NotAfter.Before(now.Add(30*24*time.Hour)) {
		err = fmt.Errorf("CA certificate expires %s", p.CA.Cert.NotAfter.Format(time.RFC3339))
	}
	_, saErr := os.Stat(p.Path("sa.key"))
	if err != nil || saErr != nil {
		fresh = true
		if p.CA, err = NewCA("drover-local-ca", now); err != nil {
			return nil, false, err
		}
		caKey, err := encodeKey(p.CA.Key)
		if err != nil {
			return nil, false, fmt.Errorf("encoding CA key: %w", err)
		}
		if err := writeFiles(dir, map[string][]byte{"ca.crt": p.CA.CertPEM(), "ca.key": caKey}); err != nil {
			return nil, false, err
		}
		if err := writeServiceAccountKey(dir); err != nil {
			return nil, false, err
		}
	}
	files := map[string][]byte{}
	for name, spec := range leafSpecs(guestHost) {
		kp, err := p.CA.Issue(spec, now)
		if err != nil {
			return nil, false, err
		}
		p.Leafs[name] = kp
		files[name+".crt"], files[name+".key"] = kp.CertPEM, kp.KeyPEM
	}
	if err := writeFiles(dir, files); err != nil {
		return nil, false, err
	}
	return p, fresh, nil
}

// writeServiceAccountKey writes the key pair kube-apiserver signs and
// verifies service-account tokens with (sa.key, sa.pub).
func writeServiceAccountKey(dir string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generating service-account key: %w", err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return fmt.Errorf("encoding service-account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return fmt.Errorf("encoding service-account public key: %w", err)
	}
	return writeFiles(dir, map[string][]byte{
		"sa.key": keyPEM,
		"sa.pub": pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
	})
}

func loadCA(certPath, keyPath string) (*CA, error) {
	cert, err := readCert(certPath)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, fmt.Errorf("reading CA key: %w", err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "EC PRIVATE KEY" {
		return nil, fmt.Errorf("reading CA key %s: no EC PRIVATE KEY block", keyPath)
	}
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing CA key %s: %w", keyPath, err)
	}
	if !publicKeysEqual(cert.PublicKey, key.Public()) {
		return nil, fmt.Errorf("CA key %s does not belong to certificate %s", keyPath, certPath)
	}
	return &CA{Cert: cert, Key: key}, nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	ak, ok := a.(*ecdsa.PublicKey)
	return ok && ak.Equal(b)
}

// readCert parses the first certificate of a PEM file.
func readCert(path string) (*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading certificate: %w", err)
	}
	return parseCertPEM(data)
}

func parseCertPEM(data []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("parsing certificate: no CERTIFICATE PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing certificate: %w", err)
	}
	return cert, nil
}

// writeFiles writes each file 0600 via a temp file and a rename, so that a
// process reading the PKI never sees half a key.
func writeFiles(dir string, files map[string][]byte) error {
	for name, data := range files {
		path := filepath.Join(dir, name)
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
		if err := os.Rename(tmp, path); err != nil {
			os.Remove(tmp)
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}
	return nil
}
