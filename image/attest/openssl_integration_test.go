//go:build integration

package attest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

func openssl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command("openssl", args...).CombinedOutput()
	return string(out), err
}

// TestSignatureVerifiesWithOpenSSL signs with keys openssl made and checks
// each signature with openssl over the DSSE pre-authentication encoding,
// built here from the DSSE spec rather than by the library under test.
func TestSignatureVerifiesWithOpenSSL(t *testing.T) {
	for _, tc := range []struct {
		name   string
		gen    []string
		verify func(pub, pae, sig string) []string
	}{
		{"ecdsa-p256", []string{"-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"},
			func(pub, pae, sig string) []string {
				return []string{"dgst", "-sha256", "-verify", pub, "-signature", sig, pae}
			}},
		{"ed25519", []string{"-algorithm", "ed25519"},
			func(pub, pae, sig string) []string {
				return []string{"pkeyutl", "-verify", "-pubin", "-inkey", pub, "-rawin", "-in", pae, "-sigfile", sig}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			priv, pub := filepath.Join(dir, "key.pem"), filepath.Join(dir, "key.pub")
			if out, err := openssl(t, append(append([]string{"genpkey"}, tc.gen...), "-out", priv)...); err != nil {
				t.Fatalf("openssl genpkey: %v\n%s", err, out)
			}
			if out, err := openssl(t, "pkey", "-in", priv, "-pubout", "-out", pub); err != nil {
				t.Fatalf("openssl pkey: %v\n%s", err, out)
			}
			s, err := LoadSigner(priv)
			if err != nil {
				t.Fatal(err)
			}
			env, err := Sign(context.Background(), []byte(statement), s)
			if err != nil {
				t.Fatal(err)
			}
			var e dsse.Envelope
			if err := json.Unmarshal(env, &e); err != nil {
				t.Fatal(err)
			}
			payload, _ := base64.StdEncoding.DecodeString(e.Payload)
			sig, _ := base64.StdEncoding.DecodeString(e.Signatures[0].Sig)
			pae := fmt.Sprintf("DSSEv1 %d %s %d %s", len(e.PayloadType), e.PayloadType, len(payload), payload)
			paePath, sigPath := filepath.Join(dir, "pae"), filepath.Join(dir, "sig")
			os.WriteFile(paePath, []byte(pae), 0o644)
			os.WriteFile(sigPath, sig, 0o644)
			if out, err := openssl(t, tc.verify(pub, paePath, sigPath)...); err != nil {
				t.Fatalf("openssl does not verify the signature: %v\n%s", err, out)
			} else {
				t.Logf("openssl: %s", bytes.TrimSpace([]byte(out)))
			}
			// The same check fails on a PAE with one byte changed.
			bad := []byte(pae)
			bad[len(bad)-3] ^= 1
			os.WriteFile(paePath, bad, 0o644)
			if out, err := openssl(t, tc.verify(pub, paePath, sigPath)...); err == nil {
				t.Fatalf("openssl verified a changed PAE:\n%s", out)
			}
		})
	}
}
