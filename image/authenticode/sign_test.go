package authenticode

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/image/pe"
	"github.com/drover-os/drover/image/pe/petest"
)

// testSigner makes a self-signed RSA certificate like the OVMF snakeoil one.
func testSigner(t testing.TB) (*Signer, []byte, []byte) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(4242), Subject: pkix.Name{CommonName: "drover test db"},
		NotBefore: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), NotAfter: time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	s, err := ParseSigner(keyPEM, certPEM)
	if err != nil {
		t.Fatal(err)
	}
	return s, keyPEM, certPEM
}

func TestSignIsDeterministicAndKeepsTheHash(t *testing.T) {
	s, _, _ := testSigner(t)
	img := petest.Stub(7000, 80)
	signed, err := s.Sign(img)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := s.Sign(img)
	if !bytes.Equal(signed, again) {
		t.Fatal("two signatures of the same image with the same key differ")
	}
	h1, _ := Hash(img, crypto.SHA256)
	h2, err := Hash(signed, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(h1, h2) {
		t.Fatal("the Authenticode hash of the signed image differs from the unsigned one's")
	}
	if !bytes.Contains(signed, h1) {
		t.Fatal("the signature does not carry the image hash")
	}
	im, _ := pe.Parse(signed)
	off, size := im.CertTable()
	if int(off) != len(img) || int(off+size) != len(signed) || size%8 != 0 {
		t.Fatalf("certificate table at %d, %d bytes; image %d, signed %d", off, size, len(img), len(signed))
	}
	if ok, _ := Signed(signed); !ok {
		t.Error("Signed(signed image) = false")
	}
	if _, err := s.Sign(signed); err == nil {
		t.Error("signing a signed image again succeeded")
	}
}

func TestHashCoversSectionsNotChecksum(t *testing.T) {
	img := petest.Stub(7000, 80)
	h, _ := Hash(img, crypto.SHA256)
	im, _ := pe.Parse(img)
	c := append([]byte(nil), img...)
	c[im.CheckSumOffset()] ^= 0xff
	if hc, _ := Hash(c, crypto.SHA256); !bytes.Equal(h, hc) {
		t.Error("the hash covers the CheckSum field")
	}
	c = append([]byte(nil), img...)
	c[im.Sections()[1].Offset+3] ^= 1
	if hc, _ := Hash(c, crypto.SHA256); bytes.Equal(h, hc) {
		t.Error("the hash does not cover section data")
	}
}

func TestParseSignerRefuses(t *testing.T) {
	_, keyPEM, certPEM := testSigner(t)
	_, _, otherCert := testSigner(t)
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecDER, _ := x509.MarshalPKCS8PrivateKey(ec)
	ecPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecDER})
	for name, tc := range map[string]struct {
		key, cert []byte
		want      string
	}{
		"mismatch":  {keyPEM, otherCert, "do not match"},
		"ecdsa":     {ecPEM, certPEM, "want RSA"},
		"encrypted": {[]byte("-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n"), certPEM, "encrypted"},
		"no cert":   {keyPEM, []byte("junk"), "CERTIFICATE"},
	} {
		if _, err := ParseSigner(tc.key, tc.cert); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", name, err, tc.want)
		}
	}
}
