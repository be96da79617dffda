// Package attest signs and verifies in-toto statements in DSSE envelopes
// (github.com/secure-systems-lab/go-securesystemslib/dsse) with ECDSA P-256
// or Ed25519 keys in PEM, the two key types openssl and cosign both handle.
//
// ECDSA signs the SHA-256 of the DSSE pre-authentication encoding (PAE) with
// an ASN.1 DER signature, Ed25519 signs the PAE itself: exactly what
// `openssl dgst -sha256 -verify` and `openssl pkeyutl -verify -rawin` check,
// so a signature can be verified without drover.
package attest

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

// PayloadType is the DSSE payload type of an in-toto statement.
const PayloadType = "application/vnd.in-toto+json"

// key signs and verifies with one ECDSA P-256 or Ed25519 key.
type key struct {
	pub  crypto.PublicKey
	priv crypto.Signer // nil for a public key
}

func (k *key) Sign(_ context.Context, data []byte) ([]byte, error) {
	switch p := k.priv.(type) {
	case *ecdsa.PrivateKey:
		d := sha256.Sum256(data)
		return ecdsa.SignASN1(rand.Reader, p, d[:])
	case ed25519.PrivateKey:
		return ed25519.Sign(p, data), nil
	}
	return nil, errors.New("no private key")
}

func (k *key) Verify(_ context.Context, data, sig []byte) error {
	switch p := k.pub.(type) {
	case *ecdsa.PublicKey:
		d := sha256.Sum256(data)
		if ecdsa.VerifyASN1(p, d[:], sig) {
			return nil
		}
	case ed25519.PublicKey:
		if ed25519.Verify(p, data, sig) {
			return nil
		}
	}
	return errors.New("signature does not verify")
}

// KeyID is the SHA-256 fingerprint dsse computes for a public key.
func (k *key) KeyID() (string, error) { return dsse.SHA256KeyID(k.pub) }

func (k *key) Public() crypto.PublicKey { return k.pub }

func checkPublic(pub crypto.PublicKey) error {
	switch p := pub.(type) {
	case *ecdsa.PublicKey:
		if p.Curve != elliptic.P256() {
			return fmt.Errorf("ECDSA key on %s: only P-256 is accepted", p.Curve.Params().Name)
		}
		return nil
	case ed25519.PublicKey:
		return nil
	}
	return fmt.Errorf("key type %T: want ECDSA P-256 or Ed25519", pub)
}

func readPEM(path string) (*pem.Block, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b, _ := pem.Decode(data)
	if b == nil {
		return nil, errors.New("no PEM block found")
	}
	return b, nil
}

// LoadSigner reads a private key in PEM: PKCS#8 ("PRIVATE KEY", what
// `openssl genpkey` writes) or SEC 1 ("EC PRIVATE KEY", `openssl ecparam -genkey`).
func LoadSigner(path string) (dsse.SignerVerifier, error) {
	fail := func(err error) (dsse.SignerVerifier, error) {
		return nil, fmt.Errorf("reading signing key %s: %w (want an ECDSA P-256 or Ed25519 private key in PEM, e.g. from `openssl genpkey -algorithm ed25519`)", path, err)
	}
	b, err := readPEM(path)
	if err != nil {
		return fail(err)
	}
	var priv any
	switch b.Type {
	case "PRIVATE KEY":
		priv, err = x509.ParsePKCS8PrivateKey(b.Bytes)
	case "EC PRIVATE KEY":
		priv, err = x509.ParseECPrivateKey(b.Bytes)
	default:
		err = fmt.Errorf("PEM block %q is not a private key", b.Type)
	}
	if err != nil {
		return fail(err)
	}
	s, ok := priv.(crypto.Signer)
	if !ok {
		return fail(fmt.Errorf("key type %T cannot sign", priv))
	}
	if err := checkPublic(s.Public()); err != nil {
		return fail(err)
	}
	return &key{pub: s.Public(), priv: s}, nil
}

// LoadVerifier reads a public key in PEM ("PUBLIC KEY", PKIX, what
// `openssl pkey -pubout` writes).
func LoadVerifier(path string) (dsse.Verifier, error) {
	fail := func(err error) (dsse.Verifier, error) {
		return nil, fmt.Errorf("reading public key %s: %w (want an ECDSA P-256 or Ed25519 public key in PEM, e.g. from `openssl pkey -pubout`)", path, err)
	}
	b, err := readPEM(path)
	if err != nil {
		return fail(err)
	}
	if b.Type != "PUBLIC KEY" {
		return fail(fmt.Errorf("PEM block %q is not a public key", b.Type))
	}
	pub, err := x509.ParsePKIXPublicKey(b.Bytes)
	if err != nil {
		return fail(err)
	}
	if err := checkPublic(pub); err != nil {
		return fail(err)
	}
	return &key{pub: pub}, nil
}

// Sign wraps statement in a DSSE envelope signed by s and returns the
// envelope as indented JSON.
func Sign(ctx context.Context, statement []byte, s dsse.Signer) ([]byte, error) {
	es, err := dsse.NewEnvelopeSigner(s)
	if err != nil {
		return nil, err
	}
	env, err := es.SignPayload(ctx, PayloadType, statement)
	if err != nil {
		return nil, fmt.Errorf("signing the provenance: %w", err)
	}
	b, err := json.MarshalIndent(env, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Verify checks that envelope (JSON) carries an in-toto statement signed by
// v and returns the statement's bytes. Nothing in the payload may be used
// before Verify returns it.
func Verify(ctx context.Context, envelope []byte, v dsse.Verifier) ([]byte, error) {
	var env dsse.Envelope
	if err := json.Unmarshal(envelope, &env); err != nil {
		return nil, fmt.Errorf("reading the DSSE envelope: %w", err)
	}
	if env.PayloadType != PayloadType {
		return nil, fmt.Errorf("DSSE envelope payload type %q, want %q", env.PayloadType, PayloadType)
	}
	ev, err := dsse.NewEnvelopeVerifier(v)
	if err != nil {
		return nil, err
	}
	_, payload, err := ev.VerifyAndDecode(ctx, &env)
	if err != nil {
		id, _ := v.KeyID()
		return nil, fmt.Errorf("DSSE envelope signature does not verify with key %s: %w", id, err)
	}
	return payload, nil
}
