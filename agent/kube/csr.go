package kube

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// The kubelet's TLS bootstrap, done by the agent before the kubelet starts
// (docs/agent.md, "Joining"): the same certificates.k8s.io/v1 request the
// kubelet makes with its bootstrap kubeconfig — subject system:node:<name>
// in system:nodes, signer kubernetes.io/kube-apiserver-client-kubelet,
// usages digital signature and client auth — so the controller manager's
// approver judges it exactly as the kubelet's own. client-go's csr package
// would bring the whole clientset into the agent for two requests.

// KubeletClientSigner is the signer of kubelet client certificates.
const KubeletClientSigner = "kubernetes.io/kube-apiserver-client-kubelet"

// kubeletClientUsages are the kubelet's own for an ECDSA key (it adds key
// encipherment only for RSA keys).
var kubeletClientUsages = []string{"digital signature", "client auth"}

// NodeClientCSR returns the PEM certificate request for the node's client
// certificate and the name of the CertificateSigningRequest object: a
// digest of the public key and the node name, so a rerun with the same key
// (an interrupted boot) finds its earlier request rather than piling up
// new ones.
func NodeClientCSR(key crypto.Signer, nodeName string) (csrPEM []byte, name string, err error) {
	if nodeName == "" {
		return nil, "", errors.New("node client certificate request: no node name")
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}},
	}, key)
	if err != nil {
		return nil, "", fmt.Errorf("node client certificate request: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, "", fmt.Errorf("node client certificate request: %w", err)
	}
	h := sha256.New()
	h.Write(pub)
	h.Write([]byte("\x00" + nodeName + "\x00" + strings.Join(kubeletClientUsages, ",")))
	name = "node-csr-" + base64.RawURLEncoding.EncodeToString(h.Sum(nil))
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), name, nil
}

// csrObject is the part of a certificates.k8s.io/v1 CertificateSigningRequest
// the agent writes and reads.
type csrObject struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Metadata   struct {
		Name string `json:"name"`
		UID  string `json:"uid,omitempty"`
	} `json:"metadata"`
	Spec struct {
		Request    []byte   `json:"request"`
		SignerName string   `json:"signerName"`
		Usages     []string `json:"usages"`
		Username   string   `json:"username,omitempty"`
	} `json:"spec"`
	Status struct {
		Conditions []struct {
			Type    string `json:"type"`
			Reason  string `json:"reason,omitempty"`
			Message string `json:"message,omitempty"`
		} `json:"conditions,omitempty"`
		Certificate []byte `json:"certificate,omitempty"`
	} `json:"status"`
}

// issued says whether the request has its certificate, or why it never
// will (denied or failed).
func (o *csrObject) issued() ([]byte, error) {
	for _, c := range o.Status.Conditions {
		if c.Type == "Denied" || c.Type == "Failed" {
			return nil, fmt.Errorf("CertificateSigningRequest %s %s: %s %s", o.Metadata.Name, strings.ToLower(c.Type), c.Reason, c.Message)
		}
	}
	if len(o.Status.Certificate) == 0 {
		return nil, nil
	}
	return o.Status.Certificate, nil
}

// RequestNodeClientCert creates the CertificateSigningRequest name for
// csrPEM (or finds the one an earlier run created for the same request)
// and waits, polling every poll, until it is issued: the certificate PEM.
// The client authenticates with the bootstrap token (NewWithToken).
func (c *Client) RequestNodeClientCert(ctx context.Context, name string, csrPEM []byte, poll time.Duration) ([]byte, error) {
	const base = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
	var req csrObject
	req.APIVersion, req.Kind = "certificates.k8s.io/v1", "CertificateSigningRequest"
	req.Metadata.Name = name
	req.Spec.Request, req.Spec.SignerName, req.Spec.Usages = csrPEM, KubeletClientSigner, kubeletClientUsages
	var got csrObject
	err := c.do(ctx, "POST", base, "application/json", req, &got)
	var se *StatusError
	if errors.As(err, &se) && se.Code == 409 {
		// Created by an earlier run of this boot that did not see the
		// answer: the same key gives the same name, so it is ours only if
		// it asks for the same thing.
		if err = c.do(ctx, "GET", base+"/"+url.PathEscape(name), "", nil, &got); err == nil && string(got.Spec.Request) != string(csrPEM) {
			return nil, fmt.Errorf("CertificateSigningRequest %s exists with another request: delete it, or give the node a new key", name)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("requesting the kubelet's client certificate: %w", err)
	}
	for {
		cert, err := got.issued()
		if err != nil || cert != nil {
			return cert, err
		}
		select {
		case <-ctx.Done():
		case <-time.After(poll):
			err = c.do(ctx, "GET", base+"/"+url.PathEscape(name), "", nil, &got)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("waiting for CertificateSigningRequest %s to be approved and signed: %w", name, ctx.Err())
		}
		if err != nil {
			return nil, fmt.Errorf("waiting for CertificateSigningRequest %s: %w", name, err)
		}
	}
}
