//go:build integration

package authenticode

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-os/drover/image/pe"
	"github.com/drover-os/drover/image/pe/petest"
	"github.com/drover-os/drover/image/uki"
)

// TestSbverify checks signatures with sbsigntool's sbverify, an
// independent (OpenSSL) Authenticode verifier: it accepts a signed UKI
// with the signing certificate, and refuses another certificate, a changed
// byte of .cmdline, and an unsigned image.
func TestSbverify(t *testing.T) {
	sbverify, err := exec.LookPath("sbverify")
	if err != nil {
		t.Fatal("sbverify not found: install the Debian package sbsigntool (scripts/host-setup.sh)")
	}
	s, _, certPEM := testSigner(t)
	_, _, otherPEM := testSigner(t)
	img, err := uki.Build(petest.Stub(9000, 120), uki.Parts{OSRelease: []byte("ID=debian\n"), Cmdline: "console=ttyS0 drover.roothash=abcd",
		Uname: "6.12.0-test", Initrd: []byte("initrd"), Linux: petest.Stub(4000, 100)})
	if err != nil {
		t.Fatal(err)
	}
	signed, err := s.Sign(img)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cert, other := write("cert.pem", certPEM), write("other.pem", otherPEM)
	verify := func(cert, file string) (string, error) {
		out, err := exec.Command(sbverify, "--cert", cert, file).CombinedOutput()
		return string(out), err
	}
	if out, err := verify(cert, write("signed.efi", signed)); err != nil {
		t.Fatalf("sbverify refuses the signed UKI: %v\n%s", err, out)
	} else {
		t.Logf("sbverify --cert: %s", out)
	}
	if out, err := verify(other, filepath.Join(dir, "signed.efi")); err == nil {
		t.Errorf("sbverify accepts the signature with another certificate:\n%s", out)
	}
	secs, _ := uki.Sections(signed)
	tampered := append([]byte(nil), signed...)
	for _, sec := range secs {
		if sec.Name == ".cmdline" {
			off := sectionOffset(t, signed, ".cmdline")
			tampered[off+int(sec.Size)-1] ^= 1
		}
	}
	if out, err := verify(cert, write("tampered.efi", tampered)); err == nil {
		t.Errorf("sbverify accepts a UKI with one byte of .cmdline changed:\n%s", out)
	}
	if out, err := verify(cert, write("unsigned.efi", img)); err == nil {
		t.Errorf("sbverify accepts an unsigned UKI:\n%s", out)
	}
}

func sectionOffset(t *testing.T, b []byte, name string) int {
	f, err := pe.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range f.Sections() {
		if s.Name == name {
			return int(s.Offset)
		}
	}
	t.Fatalf("no section %s", name)
	return 0
}

// TestEnrollmentFilesMatchEfitools: PK.auth, KEK.auth and db.auth are
// byte-for-byte what efitools' cert-to-efi-sig-list and sign-efi-sig-list
// write for the same certificate, owner GUID, key and timestamp (both sign
// deterministically: RSA PKCS#1 v1.5, no signed attributes).
func TestEnrollmentFilesMatchEfitools(t *testing.T) {
	for _, tool := range []string{"cert-to-efi-sig-list", "sign-efi-sig-list"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: install the Debian package efitools (scripts/host-setup.sh)", tool)
		}
	}
	s, keyPEM, certPEM := testSigner(t)
	dir := t.TempDir()
	key, cert := filepath.Join(dir, "key.pem"), filepath.Join(dir, "cert.pem")
	os.WriteFile(key, keyPEM, 0o600)
	os.WriteFile(cert, certPEM, 0o644)
	stamp := time.Date(2026, 11, 21, 9, 15, 44, 0, time.UTC)
	files, err := s.EnrollmentFiles(stamp)
	if err != nil {
		t.Fatal(err)
	}
	esl := filepath.Join(dir, "cert.esl")
	if out, err := exec.Command("cert-to-efi-sig-list", "-g", "64726f76-6572-4000-8000-64726f766572", cert, esl).CombinedOutput(); err != nil {
		t.Fatalf("cert-to-efi-sig-list: %v\n%s", err, out)
	}
	for _, v := range []string{"PK", "KEK", "db"} {
		auth := filepath.Join(dir, v+".auth")
		out, err := exec.Command("sign-efi-sig-list", "-t", stamp.Format("2006-01-02 15:04:05"), "-k", key, "-c", cert, v, esl, auth).CombinedOutput()
		if err != nil {
			t.Fatalf("sign-efi-sig-list %s: %v\n%s", v, err, out)
		}
		want, _ := os.ReadFile(auth)
		if got := files[v+".auth"]; !bytes.Equal(got, want) {
			t.Errorf("%s.auth (%d bytes) differs from efitools' (%d bytes); first difference at byte %d", v, len(got), len(want), firstDiff(got, want))
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
