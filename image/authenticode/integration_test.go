//go:build integration

package authenticode

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

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
