package authenticode

import (
	"bytes"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"sort"
	"unicode/utf16"

	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"

	"github.com/drover-os/drover/image/pe"
)

var (
	oidSignedData        = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 2}
	oidSHA256            = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 1}
	oidRSAEncryption     = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 1}
	oidContentType       = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 3}
	oidMessageDigest     = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 4}
	oidSpcIndirectData   = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 311, 2, 1, 4}
	oidSpcStatementType  = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 311, 2, 1, 11}
	oidSpcSpOpusInfo     = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 311, 2, 1, 12}
	oidSpcPEImageData    = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 311, 2, 1, 15}
	oidSpcIndividualCode = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 311, 2, 1, 21}
)

// Signer is a Secure Boot signing key and its certificate.
type Signer struct {
	Cert *x509.Certificate
	Key  *rsa.PrivateKey
}

// ParseSigner reads a PEM private key (PKCS#8 or PKCS#1, unencrypted) and
// a PEM certificate, and checks that they belong together.
func ParseSigner(keyPEM, certPEM []byte) (*Signer, error) {
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, errors.New("secure boot key: no PEM block")
	}
	var key any
	var err error
	switch kb.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(kb.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(kb.Bytes)
	case "ENCRYPTED PRIVATE KEY":
		return nil, errors.New("secure boot key is encrypted: decrypt it first, e.g. openssl pkcs8 -in KEY -out PLAIN.pem (keep PLAIN.pem private)")
	default:
		return nil, fmt.Errorf("secure boot key: PEM block %q; want PRIVATE KEY or RSA PRIVATE KEY", kb.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("secure boot key: %w", err)
	}
	rk, ok := key.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("secure boot key is %T; want RSA: RSA PKCS#1 v1.5 signatures are deterministic, so signed builds stay bit-identical, and UEFI db verification expects RSA", key)
	}
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, errors.New("secure boot certificate: no PEM CERTIFICATE block")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("secure boot certificate: %w", err)
	}
	if pub, ok := cert.PublicKey.(*rsa.PublicKey); !ok || !pub.Equal(&rk.PublicKey) {
		return nil, errors.New("secure boot key and certificate do not match: the certificate's public key is not the key's")
	}
	return &Signer{Cert: cert, Key: rk}, nil
}

// Signed reports whether a PE image carries an attribute certificate table.
func Signed(b []byte) (bool, error) {
	im, err := pe.Parse(b)
	if err != nil {
		return false, err
	}
	_, size := im.CertTable()
	return size != 0, nil
}

// Sign returns image with an Authenticode signature by s appended as its
// attribute certificate table, and the checksum updated. image must be
// unsigned; it is not modified.
func (s *Signer) Sign(image []byte) ([]byte, error) {
	im, err := pe.Parse(image)
	if err != nil {
		return nil, err
	}
	if _, size := im.CertTable(); size != 0 {
		return nil, errors.New("PE image is already signed")
	}
	digest, err := Hash(image, crypto.SHA256)
	if err != nil {
		return nil, err
	}
	p7, err := s.signedData(digest)
	if err != nil {
		return nil, err
	}
	// The table starts 8-byte aligned (PE/COFF §4.7); padding before it is
	// hashed as data after the last section, so add it before hashing.
	if len(image)%8 != 0 {
		return nil, fmt.Errorf("PE image is %d bytes, not a multiple of 8: the certificate table must start quadword-aligned", len(image))
	}
	// WIN_CERTIFICATE: dwLength, wRevision 2.0, WIN_CERT_TYPE_PKCS_SIGNED_DATA,
	// then the PKCS#7, padded to 8 bytes.
	certLen := 8 + len(p7)
	padded := (certLen + 7) &^ 7
	out := make([]byte, len(image)+padded)
	copy(out, image)
	w := out[len(image):]
	binary.LittleEndian.PutUint32(w[0:], uint32(certLen))
	binary.LittleEndian.PutUint16(w[4:], 0x0200)
	binary.LittleEndian.PutUint16(w[6:], 0x0002)
	copy(w[8:], p7)
	binary.LittleEndian.PutUint32(out[im.CertDirOffset():], uint32(len(image)))
	binary.LittleEndian.PutUint32(out[im.CertDirOffset()+4:], uint32(padded))
	pe.SetChecksum(out, im.CheckSumOffset())
	return out, nil
}

// spcIndirectData is the Authenticode content: SpcAttributeTypeAndOptionalValue
// (SPC_PE_IMAGE_DATA with an SpcPeImageData whose file link is the
// customary "<<<Obsolete>>>") and the DigestInfo of the image hash.
func spcIndirectData(digest []byte) ([]byte, error) {
	var b cryptobyte.Builder
	b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
			b.AddASN1ObjectIdentifier(oidSpcPEImageData)
			b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) { // SpcPeImageData
				b.AddASN1BitString(nil)                                                                // flags: none
				b.AddASN1(cbasn1.Tag(0).Constructed().ContextSpecific(), func(b *cryptobyte.Builder) { // file [0] EXPLICIT SpcLink
					b.AddASN1(cbasn1.Tag(2).Constructed().ContextSpecific(), func(b *cryptobyte.Builder) { // SpcLink.file [2] EXPLICIT SpcString
						b.AddASN1(cbasn1.Tag(0).ContextSpecific(), func(b *cryptobyte.Builder) { // SpcString.unicode [0] IMPLICIT BMPString
							for _, u := range utf16.Encode([]rune("<<<Obsolete>>>")) {
								b.AddUint16(u)
							}
						})
					})
				})
			})
		})
		b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) { // DigestInfo
			addAlgorithm(b, oidSHA256)
			b.AddASN1OctetString(digest)
		})
	})
	return b.Bytes()
}

func addAlgorithm(b *cryptobyte.Builder, oid asn1.ObjectIdentifier) {
	b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddASN1ObjectIdentifier(oid)
		b.AddASN1NULL()
	})
}

// signedData returns the DER PKCS#7 ContentInfo (RFC 2315) of type
// signedData with one signer, its certificate, and the authenticated
// attributes Authenticode signers write: contentType, messageDigest,
// SpcStatementType (individual code signing) and an empty SpcSpOpusInfo.
// There is no signingTime.
func (s *Signer) signedData(digest []byte) ([]byte, error) {
	content, err := spcIndirectData(digest)
	if err != nil {
		return nil, err
	}
	var seq cryptobyte.String
	in := cryptobyte.String(content)
	if !in.ReadASN1(&seq, cbasn1.SEQUENCE) {
		return nil, errors.New("internal error: SpcIndirectDataContent is not a SEQUENCE")
	}
	// RFC 2315 §9.3: the message digest covers the contents octets of the
	// content, without its tag and length.
	md := sha256.Sum256(seq)

	attrs := [][]byte{
		attribute(oidContentType, func(b *cryptobyte.Builder) { b.AddASN1ObjectIdentifier(oidSpcIndirectData) }),
		attribute(oidMessageDigest, func(b *cryptobyte.Builder) { b.AddASN1OctetString(md[:]) }),
		attribute(oidSpcStatementType, func(b *cryptobyte.Builder) {
			b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) { b.AddASN1ObjectIdentifier(oidSpcIndividualCode) })
		}),
		attribute(oidSpcSpOpusInfo, func(b *cryptobyte.Builder) { b.AddASN1(cbasn1.SEQUENCE, func(*cryptobyte.Builder) {}) }),
	}
	for _, a := range attrs {
		if a == nil {
			return nil, errors.New("internal error: encoding an authenticated attribute")
		}
	}
	// DER orders a SET OF by the encodings of its members.
	sort.Slice(attrs, func(i, j int) bool { return bytes.Compare(attrs[i], attrs[j]) < 0 })
	attrSet := func(b *cryptobyte.Builder) {
		for _, a := range attrs {
			b.AddBytes(a)
		}
	}
	// The signature covers the attributes encoded as a SET (tag 0x31), not
	// with the [0] IMPLICIT tag they carry in SignerInfo.
	var signedAttrs cryptobyte.Builder
	signedAttrs.AddASN1(cbasn1.SET, attrSet)
	toSign, err := signedAttrs.Bytes()
	if err != nil {
		return nil, err
	}
	h := sha256.Sum256(toSign)
	sig, err := rsa.SignPKCS1v15(nil, s.Key, crypto.SHA256, h[:])
	if err != nil {
		return nil, fmt.Errorf("signing with the secure boot key: %w", err)
	}

	var b cryptobyte.Builder
	b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) { // ContentInfo
		b.AddASN1ObjectIdentifier(oidSignedData)
		b.AddASN1(cbasn1.Tag(0).Constructed().ContextSpecific(), func(b *cryptobyte.Builder) {
			b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) { // SignedData
				b.AddASN1Int64(1)
				b.AddASN1(cbasn1.SET, func(b *cryptobyte.Builder) { addAlgorithm(b, oidSHA256) })
				b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) { // contentInfo
					b.AddASN1ObjectIdentifier(oidSpcIndirectData)
					b.AddASN1(cbasn1.Tag(0).Constructed().ContextSpecific(), func(b *cryptobyte.Builder) { b.AddBytes(content) })
				})
				b.AddASN1(cbasn1.Tag(0).Constructed().ContextSpecific(), func(b *cryptobyte.Builder) { b.AddBytes(s.Cert.Raw) })
				b.AddASN1(cbasn1.SET, func(b *cryptobyte.Builder) {
					b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) { // SignerInfo
						b.AddASN1Int64(1)
						b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) { // issuerAndSerialNumber
							b.AddBytes(s.Cert.RawIssuer)
							b.AddASN1BigInt(s.Cert.SerialNumber)
						})
						addAlgorithm(b, oidSHA256)
						b.AddASN1(cbasn1.Tag(0).Constructed().ContextSpecific(), attrSet)
						addAlgorithm(b, oidRSAEncryption)
						b.AddASN1OctetString(sig)
					})
				})
			})
		})
	})
	return b.Bytes()
}

func attribute(oid asn1.ObjectIdentifier, value func(*cryptobyte.Builder)) []byte {
	var b cryptobyte.Builder
	b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddASN1ObjectIdentifier(oid)
		b.AddASN1(cbasn1.SET, value)
	})
	out, err := b.Bytes()
	if err != nil {
		return nil
	}
	return out
}
