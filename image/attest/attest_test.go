package attest

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

// writeKeys stores priv as PKCS#8 and its public key as PKIX PEM, the forms
// openssl writes.
func writeKeys(t *testing.T, priv crypto.Signer) (privPath, pubPath string) {
	t.Helper()
	dir := t.TempDir()
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	privPath, pubPath = filepath.Join(dir, "key.pem"), filepath.Join(dir, "key.pub")
	os.WriteFile(privPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
	os.WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644)
	return privPath, pubPath
}

func testKeys(t *testing.T) map[string]crypto.Signer {
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]crypto.Signer{"ecdsa-p256": ec, "ed25519": ed}
}

const statement = `{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"a.raw","digest":{"sha256":"00"}}]}`

func TestSignVerify(t *testing.T) {
	ctx := context.Background()
	for name, k := range testKeys(t) {
		t.Run(name, func(t *testing.T) {
			privPath, pubPath := writeKeys(t, k)
			s, err := LoadSigner(privPath)
			if err != nil {
				t.Fatal(err)
			}
			v, err := LoadVerifier(pubPath)
			if err != nil {
				t.Fatal(err)
			}
			env, err := Sign(ctx, []byte(statement), s)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Verify(ctx, env, v)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != statement {
				t.Fatalf("payload = %s", got)
			}
			// One changed byte in the payload, in the signature, or in the key ID fails.
			var e dsse.Envelope
			json.Unmarshal(env, &e)
			for _, field := range []string{e.Payload, e.Signatures[0].Sig, e.Signatures[0].KeyID} {
				i := len(field) / 2
				flipped := field[:i] + string(flipChar(field[i])) + field[i+1:]
				bad := bytes.Replace(env, []byte(field), []byte(flipped), 1)
				if bytes.Equal(bad, env) {
					t.Fatal("tampering changed nothing")
				}
				if _, err := Verify(ctx, bad, v); err == nil || !strings.Contains(err.Error(), "signature does not verify with key SHA256:") {
					t.Errorf("changing byte %d of %q…: err = %v", i, field[:8], err)
				}
			}
			// Another key of the same type does not verify it.
			_, otherPub := writeKeys(t, testKeys(t)[name])
			ov, _ := LoadVerifier(otherPub)
			if _, err := Verify(ctx, env, ov); err == nil {
				t.Error("verified with another key")
			}
		})
	}
}

func flipChar(c byte) byte {
	if c == 'A' {
		return 'B'
	}
	return 'A'
}

func TestVerifyRefusesOtherPayloadTypes(t *testing.T) {
	_, pubPath := writeKeys(t, testKeys(t)["ed25519"])
	v, _ := LoadVerifier(pubPath)
	env, _ := json.Marshal(dsse.Envelope{PayloadType: "text/plain", Payload: base64.StdEncoding.EncodeToString([]byte("x"))})
	if _, err := Verify(context.Background(), env, v); err == nil || !strings.Contains(err.Error(), `payload type "text/plain"`) {
		t.Fatalf("err = %v", err)
	}
}

func TestLoadRefusesOtherKeys(t *testing.T) {
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	for name, k := range map[string]crypto.Signer{"rsa": rk, "p384": p384} {
		privPath, pubPath := writeKeys(t, k)
		if _, err := LoadSigner(privPath); err == nil || !strings.Contains(err.Error(), "want an ECDSA P-256 or Ed25519 private key") {
			t.Errorf("%s signer: err = %v", name, err)
		}
		if _, err := LoadVerifier(pubPath); err == nil {
			t.Errorf("%s verifier accepted", name)
		}
	}
	// A public key given as the signing key, and the reverse.
	privPath, pubPath := writeKeys(t, testKeys(t)["ed25519"])
	if _, err := LoadSigner(pubPath); err == nil || !strings.Contains(err.Error(), `PEM block "PUBLIC KEY" is not a private key`) {
		t.Errorf("public key as signer: %v", err)
	}
	if _, err := LoadVerifier(privPath); err == nil || !strings.Contains(err.Error(), `PEM block "PRIVATE KEY" is not a public key`) {
		t.Errorf("private key as verifier: %v", err)
	}
}
