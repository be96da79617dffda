// Package authenticode signs PE/COFF images (systemd-boot, UKIs) for UEFI
// Secure Boot: the Authenticode image hash of the PE/COFF specification
// (§"Calculating the PE Image Hash"), a PKCS#7 SignedData whose content is
// an SpcIndirectDataContent carrying that hash, and the attribute
// certificate table that holds it.
//
// The PKCS#7 is written here with cryptobyte, not with a PKCS#7 library:
// go.mozilla.org/pkcs7 (v0.10.0) and github.com/smallstep/pkcs7 (v0.2.3),
// the maintained Go PKCS#7 signers, always sign content type "data" —
// the content wrapped in an OCTET STRING and the whole encoding digested —
// and always add a wall-clock signingTime. Authenticode needs the
// SpcIndirectDataContent content type, the SEQUENCE itself as content and
// the digest over its contents octets (RFC 2315 §9.3; this is what EDK2's
// AuthenticodeVerify and sbverify check), and drover needs no signing time
// so that the same key gives bit-identical images. The Go library built for
// this (github.com/foxboron/go-uefi) is not served by the module proxy
// drover builds with.
//
// Signatures are RSA PKCS#1 v1.5 with SHA-256, which is deterministic:
// the same image and key always give the same bytes.
package authenticode

import (
	"crypto"
	"fmt"
	"sort"

	"github.com/drover-os/drover/image/pe"
)

// Hash returns the Authenticode hash of a PE image: the headers without
// the CheckSum field and the Certificate Table directory entry, then every
// section's raw data in file order, then any data after the last section
// that is not the attribute certificate table.
func Hash(b []byte, h crypto.Hash) ([]byte, error) {
	im, err := pe.Parse(b)
	if err != nil {
		return nil, err
	}
	d := h.New()
	csum, certDir := im.CheckSumOffset(), im.CertDirOffset()
	headers := int(im.Opt.SizeOfHeaders)
	d.Write(b[:csum])
	d.Write(b[csum+4 : certDir])
	d.Write(b[certDir+8 : headers])
	hashed := headers
	secs := append([]*peSection(nil), sectionsOf(im)...)
	sort.SliceStable(secs, func(i, j int) bool { return secs[i].offset < secs[j].offset })
	for _, s := range secs {
		if s.size == 0 {
			continue
		}
		d.Write(b[s.offset : s.offset+s.size])
		hashed = max(hashed, s.offset+s.size)
	}
	certOff, certSize := im.CertTable()
	end := len(b)
	if certSize != 0 {
		if int(certOff)+int(certSize) != len(b) {
			return nil, fmt.Errorf("the certificate table (%d bytes at %d) is not at the end of the %d-byte image", certSize, certOff, len(b))
		}
		end = int(certOff)
	}
	if end > hashed {
		d.Write(b[hashed:end])
	}
	return d.Sum(nil), nil
}

type peSection struct{ offset, size int }

func sectionsOf(im *pe.Image) []*peSection {
	var out []*peSection
	for _, s := range im.Sections() {
		out = append(out, &peSection{int(s.Offset), int(s.Size)})
	}
	return out
}
