package kube

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/drover-os/drover/agent/nodeconfig"
)

// clusterInfoPath is the ConfigMap kubeadm-style discovery reads: the
// cluster's kubeconfig (server and CA) and one detached JWS signature of it
// per bootstrap token, "jws-kubeconfig-<token-id>", that the controller
// manager's bootstrapsigner maintains.
const clusterInfoPath = "/api/v1/namespaces/kube-public/configmaps/cluster-info"

// ErrUnsigned is returned when cluster-info carries no signature for the
// token: either bootstrapsigner has not signed it yet (a fresh token, a
// control plane still starting; worth retrying) or the token is not one of
// this cluster's.
var ErrUnsigned = errors.New("cluster-info has no signature for the bootstrap token")

// retryable marks discovery errors that may pass by themselves: the API
// server unreachable or not answering 200, or the signature not there yet.
// A wrong signature, a CA that does not match the pin or a server that
// fails verification with the pinned CA are final.
type retryable struct{ err error }

func (r retryable) Error() string { return r.err.Error() }
func (r retryable) Unwrap() error { return r.err }

// Retryable reports whether DiscoverCA failed in a way that may pass.
func Retryable(err error) bool {
	var r retryable
	return errors.As(err, &r)
}

// DiscoverCA finds the cluster CA a node file pins only by hash, the way
// kubeadm's token discovery does:
//
//  1. fetch kube-public/cluster-info without trusting the connection;
//  2. verify the kubeconfig's jws-kubeconfig-<token-id> signature with the
//     bootstrap token (a shared secret the attacker in the middle lacks);
//  3. keep only the certificate whose public key matches the pin, so that
//     a bundle "attacker CA + genuine CA" yields the genuine one alone;
//  4. fetch cluster-info again trusting only that certificate, and require
//     the same kubeconfig.
//
// It returns that one certificate as PEM.
func DiscoverCA(ctx context.Context, server, token, pin string) ([]byte, error) {
	id, secret, ok := strings.Cut(token, ".")
	if !ok || id == "" || secret == "" {
		return nil, errors.New("CA discovery: cluster.bootstrapToken is not <id>.<secret>")
	}
	// Trust comes from the signature and the pin checked below, not from
	// this TLS session: the CA is what is being fetched.
	insecure := &tls.Config{InsecureSkipVerify: true} //nolint:gosec
	data, err := fetchClusterInfo(ctx, server, insecure)
	if err != nil {
		return nil, err
	}
	kc, ok := data["kubeconfig"]
	if !ok {
		return nil, fmt.Errorf("CA discovery: cluster-info at %s has no kubeconfig — is this a Kubernetes API server?", server)
	}
	sig, ok := data["jws-kubeconfig-"+id]
	if !ok {
		return nil, retryable{fmt.Errorf("CA discovery from %s: %w %q (is the token valid with usage-bootstrap-signing, and the controller manager's bootstrapsigner enabled?)", server, ErrUnsigned, id)}
	}
	if err := VerifyDetachedJWS(sig, []byte(kc), id, secret); err != nil {
		return nil, fmt.Errorf("CA discovery from %s: jws-kubeconfig-%s: %w — cluster-info was not signed with this bootstrap token; refusing its CA", server, id, err)
	}
	bundle, err := kubeconfigCA(kc)
	if err != nil {
		return nil, fmt.Errorf("CA discovery from %s: %w", server, err)
	}
	ca, err := nodeconfig.PinnedCA(bundle, pin)
	if err != nil {
		return nil, fmt.Errorf("CA discovery from %s: %w", server, err)
	}
	// The signed kubeconfig is what the cluster publishes; that the
	// server we talk to holds a certificate of the pinned CA is checked
	// by asking again over a verified connection.
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	again, err := fetchClusterInfo(ctx, server, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	if err != nil && isTLSError(err) {
		return nil, fmt.Errorf("CA discovery: %s does not verify with the pinned CA (%w); its serving certificate is not from the cluster the pin names", server, errors.Unwrap(err))
	}
	if err != nil {
		return nil, err
	}
	if again["kubeconfig"] != kc {
		return nil, retryable{fmt.Errorf("CA discovery from %s: cluster-info changed between the unverified and the verified request", server)}
	}
	return ca, nil
}

func isTLSError(err error) bool {
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var inv x509.CertificateInvalidError
	var verr *tls.CertificateVerificationError
	return errors.As(err, &unknown) || errors.As(err, &host) || errors.As(err, &inv) || errors.As(err, &verr)
}

// fetchClusterInfo GETs cluster-info anonymously and returns its data.
func fetchClusterInfo(ctx context.Context, server string, tc *tls.Config) (map[string]string, error) {
	tr := &http.Transport{TLSClientConfig: tc, Proxy: nil}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 15 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	url := strings.TrimSuffix(server, "/") + clusterInfoPath
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("CA discovery: cluster.server %q: %w", server, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return nil, retryable{fmt.Errorf("fetching cluster-info for CA discovery: %w", err)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, retryable{fmt.Errorf("fetching cluster-info for CA discovery: %w", err)}
	}
	if resp.StatusCode != http.StatusOK {
		return nil, retryable{fmt.Errorf("fetching cluster-info for CA discovery: %s (the cluster must publish kube-public/cluster-info readable anonymously, or give caData in the node file)", resp.Status)}
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := json.Unmarshal(body, &cm); err != nil {
		return nil, fmt.Errorf("CA discovery: decoding cluster-info: %w", err)
	}
	return cm.Data, nil
}

// kubeconfigCA returns the certificate-authority-data of cluster-info's
// single cluster, as PEM.
func kubeconfigCA(kc string) ([]byte, error) {
	var cfg struct {
		Clusters []struct {
			Cluster struct {
				CAData []byte `json:"certificate-authority-data"`
			} `json:"cluster"`
		} `json:"clusters"`
	}
	if err := yaml.Unmarshal([]byte(kc), &cfg); err != nil {
		return nil, fmt.Errorf("cluster-info kubeconfig: %w", err)
	}
	if len(cfg.Clusters) != 1 || len(cfg.Clusters[0].Cluster.CAData) == 0 {
		return nil, fmt.Errorf("cluster-info kubeconfig has %d clusters; want one with certificate-authority-data", len(cfg.Clusters))
	}
	return cfg.Clusters[0].Cluster.CAData, nil
}

// VerifyDetachedJWS checks a bootstrap-token signature: a compact JWS with
// the payload left out (RFC 7515 appendix F), "<header>..<signature>",
// whose protected header is {"alg":"HS256","kid":<token id>} and whose key
// is the token secret. Only HS256 is accepted: the header cannot choose
// the algorithm.
func VerifyDetachedJWS(jws string, payload []byte, tokenID, secret string) error {
	parts := strings.Split(jws, ".")
	if len(parts) != 3 || parts[1] != "" {
		return errors.New("not a detached compact JWS (<header>..<signature>)")
	}
	hdrJSON, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return fmt.Errorf("JWS header is not base64url: %w", err)
	}
	var hdr struct {
		Alg  string   `json:"alg"`
		Kid  string   `json:"kid"`
		Crit []string `json:"crit"`
	}
	if err := json.Unmarshal(hdrJSON, &hdr); err != nil {
		return fmt.Errorf("JWS header: %w", err)
	}
	if hdr.Alg != "HS256" {
		return fmt.Errorf("JWS algorithm %q, want HS256", hdr.Alg)
	}
	if hdr.Kid != tokenID {
		return fmt.Errorf("JWS key id %q, want the token id %q", hdr.Kid, tokenID)
	}
	if len(hdr.Crit) > 0 {
		return fmt.Errorf("JWS header has critical extensions %v, which the bootstrap signer never sets", hdr.Crit)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return fmt.Errorf("JWS signature is not base64url: %w", err)
	}
	if !hmac.Equal(sig, SignDetached(parts[0], payload, secret)) {
		return errors.New("signature does not match")
	}
	return nil
}

// SignDetached computes the HS256 MAC of a JWS with the given encoded
// protected header over payload. The Kubernetes signer zero-pads the
// secret to 32 bytes; HMAC zero-pads every key to its block size anyway,
// so the secret is used as it is.
func SignDetached(header string, payload []byte, secret string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(header + "." + base64.RawURLEncoding.EncodeToString(payload)))
	return m.Sum(nil)
}
