package agent

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/drover-os/drover/agent/kube"
	"github.com/drover-os/drover/agent/nodeconfig"
	"github.com/drover-os/drover/internal/atomicfile"
)

// The kubelet's TLS bootstrap is done by the agent, beside containerd's
// start, so the kubelet starts with its client certificate as it does on
// every later boot. A kubelet that bootstraps itself starts its API
// clients and informers without a certificate, gets one about a second
// later, and then closes every connection to use it ("Certificate rotation
// detected"): its Node informer re-lists only after the reflector's
// backoff, and the Node turned Ready 3.3 s after the certificate on a
// first boot against 1.5 s on a reboot (the smoke bench, medians of 3).
// The request is the kubelet's own (kube.NodeClientCSR), approved by the
// same approver; the files are where and how the kubelet keeps them (its
// certificate store in --cert-dir, its --kubeconfig naming the current
// pair), and the kubelet rotates the certificate itself from then on.

var (
	// clientPairPrefix names the files of the kubelet's client
	// certificate store: kubelet-client-<time>.pem and the
	// kubelet-client-current.pem link to the one in use.
	clientPairPrefix = filepath.Join(nodeconfig.CertDir, "kubelet-client")
	// bootstrapKey is the private key waiting for its certificate, under
	// the kubelet's own name for it: a rerun after an interruption asks
	// again with the same key, and so finds its earlier request.
	bootstrapKey = filepath.Join(nodeconfig.CertDir, "kubelet-client.key.tmp")
)

// clientCertificate gives the kubelet its client certificate and the
// kubeconfig that uses it, unless both are there and valid.
func (a *Agent) clientCertificate(ctx context.Context) (string, error) {
	if a.env.RequestClientCert == nil {
		return "left to the kubelet's own TLS bootstrap", nil
	}
	kubeconfig := a.path(nodeconfig.KubeconfigPath)
	certErr := a.clientCertErr()
	if certErr == nil && fileExists(kubeconfig) {
		return KubeletCert + " valid: kept", nil
	}
	c := a.node.Cluster
	if certErr != nil {
		if c.Redacted() || c.BootstrapToken == "" {
			// The token went once the first certificate came: the kubelet
			// renews a valid one itself, and the certificate phase says
			// why an expired one cannot be.
			return "no bootstrap token on the node (" + certErr.Error() + "): left to the kubelet", nil
		}
		key, keyPEM, err := a.loadOrMakeBootstrapKey()
		if err != nil {
			return "", err
		}
		csrPEM, name, err := kube.NodeClientCSR(key, a.nodeName)
		if err != nil {
			return "", err
		}
		certPEM, err := a.env.RequestClientCert(ctx, c.Server, []byte(c.CAData), c.BootstrapToken, name, csrPEM)
		if err != nil {
			return "", fmt.Errorf("%w: is the CSR approver running and the bootstrap token valid?", err)
		}
		if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
			return "", fmt.Errorf("CertificateSigningRequest %s: the issued certificate does not match the request's key: %w", name, err)
		}
		if err := writeClientPair(a.env.Root, certPEM, keyPEM, time.Now()); err != nil {
			return "", err
		}
		if err := os.Remove(a.path(bootstrapKey)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		if err := a.clientCertErr(); err != nil {
			return "", fmt.Errorf("CertificateSigningRequest %s: %w", name, err)
		}
	}
	kc, err := nodeconfig.KubeletKubeconfig(a.node, KubeletCert)
	if err != nil {
		return "", err
	}
	if err := atomicfile.Write(kubeconfig, kc, 0o600); err != nil {
		return "", err
	}
	if certErr == nil {
		return nodeconfig.KubeconfigPath + " written for the valid " + KubeletCert, nil
	}
	return KubeletCert + " issued for system:node:" + a.nodeName + " (P-256); " + nodeconfig.KubeconfigPath + " uses it", nil
}

// loadOrMakeBootstrapKey returns the key waiting for its certificate, made
// (P-256, as the kubelet's) and kept 0600 when there is none.
func (a *Agent) loadOrMakeBootstrapKey() (*ecdsa.PrivateKey, []byte, error) {
	p := a.path(bootstrapKey)
	if data, err := os.ReadFile(p); err == nil {
		if b, _ := pem.Decode(data); b != nil && b.Type == "EC PRIVATE KEY" {
			if k, err := x509.ParseECPrivateKey(b.Bytes); err == nil {
				return k, data, nil
			}
		}
		// Unreadable (a torn write is not possible: atomicfile): a new key
		// gives a new request name, nothing else.
	}
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, nil, err
	}
	data := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	if err := atomicfile.Write(p, data, 0o600); err != nil {
		return nil, nil, err
	}
	return k, data, nil
}

// writeClientPair adds a pair to the kubelet's certificate store as
// client-go's file store does (certificate.NewFileStore("kubelet-client",
// certDir, …).Update): kubelet-client-<time>.pem, 0600, the certificates
// then the key, and kubelet-client-current.pem a link to it, replaced by a
// rename. The link is relative, so it resolves under root in tests too;
// the kubelet writes absolute ones at its own rotations.
func writeClientPair(root string, certPEM, keyPEM []byte, now time.Time) error {
	name := filepath.Base(clientPairPrefix) + "-" + now.Format("2006-01-02-15-04-05") + ".pem"
	dir := filepath.Join(root, filepath.Dir(clientPairPrefix))
	pair := append(append([]byte(nil), certPEM...), keyPEM...)
	if err := atomicfile.Write(filepath.Join(dir, name), pair, 0o600); err != nil {
		return err
	}
	tmp := filepath.Join(dir, filepath.Base(clientPairPrefix)+"-updated.pem")
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.Symlink(name, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(root, KubeletCert))
}
