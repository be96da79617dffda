package authenticode

import (
	"bytes"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/asn1"
	"encoding/binary"
	"fmt"
	"time"
	"unicode/utf16"

	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"
)

var oidData = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 1}

// UEFI GUIDs (UEFI specification §3.3, §32.4), in EFI byte order.
var (
	guidGlobalVariable  = efiGUID(0x8be4df61, 0x93ca, 0x11d2, [8]byte{0xaa, 0x0d, 0x00, 0xe0, 0x98, 0x03, 0x2b, 0x8c})
	guidImageSecurityDB = efiGUID(0xd719b2cb, 0x3d3a, 0x4596, [8]byte{0xa3, 0xbc, 0xda, 0xd0, 0x0e, 0x67, 0x65, 0x6f})
	guidCertX509        = efiGUID(0xa5c059a1, 0x94e4, 0x4aa7, [8]byte{0x87, 0xb5, 0xab, 0x15, 0x5c, 0x2b, 0xf0, 0x72})
	guidCertPKCS7       = efiGUID(0x4aafd29d, 0x68df, 0x49ee, [8]byte{0x8a, 0xa9, 0x34, 0x7d, 0x37, 0x56, 0x65, 0xa7})
	// guidOwner owns the signature list entries drover writes (the
	// SignatureOwner field; any GUID the key's owner picks).
	guidOwner = efiGUID(0x6472_6f76, 0x6572, 0x4000, [8]byte{0x80, 0x00, 'd', 'r', 'o', 'v', 'e', 'r'})
)

func efiGUID(a uint32, b, c uint16, d [8]byte) []byte {
	g := make([]byte, 16)
	binary.LittleEndian.PutUint32(g[0:], a)
	binary.LittleEndian.PutUint16(g[4:], b)
	binary.LittleEndian.PutUint16(g[6:], c)
	copy(g[8:], d[:])
	return g
}

// Attributes of the Secure Boot key variables: non-volatile, boot and
// runtime access, time-based authenticated writes.
const authVarAttributes = 0x01 | 0x02 | 0x04 | 0x20

// EnrollmentFiles returns PK.auth, KEK.auth and db.auth for systemd-boot's
// key enrolment (loader/keys/<name>/): each an EFI_VARIABLE_AUTHENTICATION_2
// (UEFI specification §8.2.2) followed by an EFI_SIGNATURE_LIST holding
// s's certificate, signed by s — the certificate is PK, KEK and db at
// once. stamp is the authentication timestamp (the build's epoch, so the
// files are reproducible); firmware in setup mode takes any.
func (s *Signer) EnrollmentFiles(stamp time.Time) (map[string][]byte, error) {
	list := signatureList(s.Cert.Raw)
	out := map[string][]byte{}
	for _, v := range []struct {
		name string
		guid []byte
	}{{"PK", guidGlobalVariable}, {"KEK", guidGlobalVariable}, {"db", guidImageSecurityDB}} {
		auth, err := s.authVariable(v.name, v.guid, list, stamp)
		if err != nil {
			return nil, fmt.Errorf("%s.auth: %w", v.name, err)
		}
		out[v.name+".auth"] = auth
	}
	return out, nil
}

// signatureList is one EFI_SIGNATURE_LIST with one X.509 certificate.
func signatureList(cert []byte) []byte {
	var b bytes.Buffer
	sigSize := 16 + len(cert)
	b.Write(guidCertX509)
	binary.Write(&b, binary.LittleEndian, uint32(28+sigSize)) // SignatureListSize
	binary.Write(&b, binary.LittleEndian, uint32(0))          // SignatureHeaderSize
	binary.Write(&b, binary.LittleEndian, uint32(sigSize))    // SignatureSize
	b.Write(guidOwner)
	b.Write(cert)
	return b.Bytes()
}

func efiTime(t time.Time) []byte {
	t = t.UTC()
	b := make([]byte, 16)
	binary.LittleEndian.PutUint16(b[0:], uint16(t.Year()))
	b[2], b[3], b[4], b[5], b[6] = byte(t.Month()), byte(t.Day()), byte(t.Hour()), byte(t.Minute()), byte(t.Second())
	// Nanosecond, TimeZone, Daylight and padding stay zero, as the
	// specification requires for authenticated variables.
	return b
}

func (s *Signer) authVariable(name string, guid, data []byte, stamp time.Time) ([]byte, error) {
	ts := efiTime(stamp)
	var payload bytes.Buffer
	for _, u := range utf16.Encode([]rune(name)) {
		binary.Write(&payload, binary.LittleEndian, u)
	}
	payload.Write(guid)
	binary.Write(&payload, binary.LittleEndian, uint32(authVarAttributes))
	payload.Write(ts)
	payload.Write(data)
	p7, err := s.detachedSignedData(payload.Bytes())
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Write(ts)
	binary.Write(&b, binary.LittleEndian, uint32(8+16+len(p7))) // WIN_CERTIFICATE.dwLength
	binary.Write(&b, binary.LittleEndian, uint16(0x0200))       // wRevision
	binary.Write(&b, binary.LittleEndian, uint16(0x0EF1))       // WIN_CERT_TYPE_EFI_GUID
	b.Write(guidCertPKCS7)
	b.Write(p7)
	b.Write(data)
	return b.Bytes(), nil
}

// detachedSignedData is a DER PKCS#7 SignedData of type data over payload,
// detached (no content) and without authenticated attributes, as UEFI
// authenticated variables carry it.
func (s *Signer) detachedSignedData(payload []byte) ([]byte, error) {
	h := sha256.Sum256(payload)
	sig, err := rsa.SignPKCS1v15(nil, s.Key, crypto.SHA256, h[:])
	if err != nil {
		return nil, fmt.Errorf("signing with the secure boot key: %w", err)
	}
	// The bare SignedData, without a ContentInfo around it: what the UEFI
	// specification describes and efitools' sign-efi-sig-list writes.
	var b cryptobyte.Builder
	b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddASN1Int64(1)
		b.AddASN1(cbasn1.SET, func(b *cryptobyte.Builder) { addAlgorithm(b, oidSHA256) })
		b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) { b.AddASN1ObjectIdentifier(oidData) })
		b.AddASN1(cbasn1.Tag(0).Constructed().ContextSpecific(), func(b *cryptobyte.Builder) { b.AddBytes(s.Cert.Raw) })
		b.AddASN1(cbasn1.SET, func(b *cryptobyte.Builder) {
			b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
				b.AddASN1Int64(1)
				b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
					b.AddBytes(s.Cert.RawIssuer)
					b.AddASN1BigInt(s.Cert.SerialNumber)
				})
				addAlgorithm(b, oidSHA256)
				addAlgorithm(b, oidRSAEncryption)
				b.AddASN1OctetString(sig)
			})
		})
	})
	return b.Bytes()
}
