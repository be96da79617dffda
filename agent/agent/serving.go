package agent

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/netip"
	"path/filepath"
	"time"

	"github.com/drover-os/drover/agent/nodeconfig"
	"github.com/drover-os/drover/internal/atomicfile"
)

// The kubelet's self-signed serving certificate and key, where the kubelet
// looks for them (its --cert-dir) when tlsCertFile is unset, as drover's
// kubelet configuration requires.
var (
	ServingCert = filepath.Join(nodeconfig.CertDir, "kubelet.crt")
	ServingKey  = filepath.Join(nodeconfig.CertDir, "kubelet.key")
)

// servingCertValidity is the kubelet's own (client-go's
// GenerateSelfSignedCertKey): a year.
const servingCertValidity = 365 * 24 * time.Hour

// ensureServingCert writes the kubelet's self-signed serving certificate
// unless a usable pair is there already (later boots: /var persists). It is
// the certificate the kubelet would make on its first start — a CA named
// host-ca@unix and a certificate for host signed by it, valid for a year
// from an hour ago, the chain in kubelet.crt — with P-256 keys instead of
// its two RSA-2048 ones: under emulation their generation took the first
// start of the kubelet about 1.3 s, before it served healthz. It runs
// while containerd starts.
func ensureServingCert(root, host string, now time.Time) (string, error) {
	certPath, keyPath := filepath.Join(root, ServingCert), filepath.Join(root, ServingKey)
	if _, err := tls.LoadX509KeyPair(certPath, keyPath); err == nil {
		return "serving certificate " + ServingCert + " kept", nil
	}
	chain, key, err := selfSignedServing(host, now)
	if err != nil {
		return "", fmt.Errorf("the kubelet's serving certificate: %w", err)
	}
	// The key first: a certificate without its key is not a usable pair,
	// so an interrupted write is redone at the next boot.
	if err := atomicfile.Write(keyPath, key, 0o600); err != nil {
		return "", err
	}
	if err := atomicfile.Write(certPath, chain, 0o644); err != nil {
		return "", err
	}
	return "serving certificate " + ServingCert + " for " + host + " (self-signed, P-256)", nil
}

// selfSignedServing returns the PEM chain (certificate, then its CA) and
// the PEM key of a serving certificate for host.
func selfSignedServing(host string, now time.Time) (chain, keyPEM []byte, err error) {
	from := now.Add(-time.Hour) // the kubelet's allowance for clock skew
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: fmt.Sprintf("%s-ca@%d", host, now.Unix())},
		NotBefore: from, NotAfter: from.Add(servingCertValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		BasicConstraintsValid: true, IsCA: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: fmt.Sprintf("%s@%d", host, now.Unix())},
		NotBefore: from, NotAfter: from.Add(servingCertValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	if ip, perr := netip.ParseAddr(host); perr == nil {
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip.AsSlice())
	} else {
		tmpl.DNSNames = append(tmpl.DNSNames, host)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	chain = append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})...)
	return chain, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}

// serial is a random certificate serial number in [1, 2^63].
func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 63))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n.Add(n, big.NewInt(1))
}
