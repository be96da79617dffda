package debian

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/clearsign"
	pgperrors "github.com/ProtonMail/go-crypto/openpgp/errors"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// Release is the signed description of one suite of the archive.
type Release struct {
	Origin        string
	Label         string
	Suite         string
	Codename      string
	Version       string
	Date          time.Time
	ValidUntil    time.Time // zero when the Release has no Valid-Until
	Architectures []string
	Components    []string
	AcquireByHash bool
	// Files is the SHA256 list: every index file of the suite with its size
	// and hash, relative to dists/<suite>/.
	Files []ReleaseFile
	// SHA256 is the hex sha256 of the whole InRelease file as fetched; the
	// lock pins it.
	SHA256 string
	// SignedBy is the fingerprint (hex, upper case) of the key whose signature
	// verified.
	SignedBy string
	// Data is the InRelease as fetched, signature and all: what the cache
	// keeps under SHA256, so that a build checks the lock against the very
	// Release it was made from after the archive has moved on.
	Data []byte
}

// ReleaseFile is one line of the Release's SHA256 list.
type ReleaseFile struct {
	Path   string
	Size   int64
	SHA256 string
}

// File returns the entry for path (relative to dists/<suite>/).
func (r *Release) File(path string) (ReleaseFile, bool) {
	for _, f := range r.Files {
		if f.Path == path {
			return f, true
		}
	}
	return ReleaseFile{}, false
}

// Name is the suite name used in messages: the codename when there is one.
func (r *Release) Name() string {
	if r.Codename != "" {
		return r.Codename
	}
	return r.Suite
}

// SignatureError reports an InRelease that no key of the keyring verifies.
type SignatureError struct {
	Suite       string   // from the unverified text; for the message only
	KeyringPath string   // filled in by Client, which knows the path
	SignerIDs   []string // issuer key IDs found in the signature block
	Err         error    // the last verification error
	// Expired and Revoked name the keys of the keyring that did make a
	// signature but are expired or revoked at verification time: the
	// signature is refused for that, not for an unknown key.
	Expired, Revoked []string
	Now              time.Time
}

func (e *SignatureError) Error() string {
	ring := "the keyring"
	if e.KeyringPath != "" {
		ring = "keyring " + e.KeyringPath
	}
	suite := e.Suite
	if suite == "" {
		suite = "unknown suite"
	}
	if len(e.Revoked) > 0 {
		return fmt.Sprintf("InRelease for %s is signed by key %s of %s, which is revoked: refused; the archive signs with a new key, whose export must be committed to the trust root (and the revoked one removed), or the mirror serves a forged Release", suite, strings.Join(e.Revoked, ", "), ring)
	}
	if len(e.Expired) > 0 {
		return fmt.Sprintf("InRelease for %s is signed by key %s of %s, which had expired at %s (the build host's clock): refused; check the host's clock, or commit the archive's current key (or the key's extended expiry) to the trust root", suite, strings.Join(e.Expired, ", "), ring, e.Now.UTC().Format(time.RFC1123))
	}
	if len(e.SignerIDs) == 0 {
		return fmt.Sprintf("InRelease for %s: signature does not verify against %s (no issuer key IDs in the signature): check the mirror", suite, ring)
	}
	return fmt.Sprintf("InRelease for %s is signed by key %s, which is not in %s (or its signature does not verify): check the mirror, or add the key to the trust root if it is a new archive key, or pass --keyring for a private mirror", suite, strings.Join(e.SignerIDs, ", "), ring)
}

func (e *SignatureError) Unwrap() error { return e.Err }

// MaxFutureDate is how far a Release's Date may lie ahead of the build
// host's clock: a little skew between the archive's clock and ours is normal,
// a Release from the future is a wrong clock or a forged archive.
const MaxFutureDate = time.Minute

// VerifyInRelease checks the clearsigned InRelease data and parses the signed
// text. InRelease carries one signature per current archive key; it is
// accepted when at least one of them is made by a key of keyring and verifies
// at time now (key expiry and revocation are judged at now). A Release whose
// Valid-Until is before now is refused as stale, one whose Date is after now
// (beyond MaxFutureDate) as coming from the future.
func VerifyInRelease(data []byte, keyring openpgp.EntityList, now time.Time) (*Release, error) {
	rel, err := VerifyPinnedInRelease(data, keyring, now)
	if err != nil {
		return nil, err
	}
	if !rel.ValidUntil.IsZero() && now.After(rel.ValidUntil) {
		return nil, fmt.Errorf("InRelease for %s expired at %s (Valid-Until; now %s): the mirror is stale, use another mirror", rel.Name(), rel.ValidUntil.Format(time.RFC1123), now.UTC().Format(time.RFC1123))
	}
	if rel.Date.After(now.Add(MaxFutureDate)) {
		return nil, fmt.Errorf("InRelease for %s is dated %s, after the build host's clock (%s): check the host's clock, or the mirror is serving a forged Release", rel.Name(), rel.Date.Format(time.RFC1123), now.UTC().Format(time.RFC1123))
	}
	return rel, nil
}

// VerifyPinnedInRelease is VerifyInRelease without the freshness checks:
// for an InRelease its reader pinned by sha256 earlier (a lock's), which
// is old on purpose and whose Valid-Until may have passed. Who signed it
// still counts: the signature must verify against keyring at now.
func VerifyPinnedInRelease(data []byte, keyring openpgp.EntityList, now time.Time) (*Release, error) {
	block, _ := clearsign.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("reading InRelease: no clearsigned message found (is the mirror serving an error page?)")
	}
	// Only for the error message: nothing in the text is trusted yet.
	suite := unverifiedSuite(block.Plaintext)

	sigs, ids, err := splitSignatures(block.ArmoredSignature.Body)
	if err != nil {
		return nil, fmt.Errorf("reading InRelease for %s: signature block: %w", suite, err)
	}
	cfg := &packet.Config{Time: func() time.Time { return now }}
	var signer *openpgp.Entity
	lastErr := errors.New("no signature packets")
	var expired, revoked []string
	for i, sig := range sigs {
		_, ent, err := openpgp.VerifyDetachedSignature(keyring, bytes.NewReader(block.Bytes), bytes.NewReader(sig), cfg)
		if err == nil {
			signer = ent
			break
		}
		lastErr = err
		// A key of the keyring made it, but is no longer valid: say so,
		// rather than "not in the keyring".
		switch {
		case errors.Is(err, pgperrors.ErrKeyRevoked):
			revoked = append(revoked, ids[i])
		case errors.Is(err, pgperrors.ErrKeyExpired), errors.Is(err, pgperrors.ErrSignatureExpired):
			expired = append(expired, ids[i])
		}
	}
	if signer == nil {
		return nil, &SignatureError{Suite: suite, SignerIDs: nonEmpty(ids), Err: lastErr, Expired: expired, Revoked: revoked, Now: now}
	}

	rel, err := ParseRelease(block.Plaintext)
	if err != nil {
		return nil, fmt.Errorf("parsing InRelease for %s: %w", suite, err)
	}
	sum := sha256.Sum256(data)
	rel.SHA256 = hex.EncodeToString(sum[:])
	rel.SignedBy = strings.ToUpper(hex.EncodeToString(signer.PrimaryKey.Fingerprint))
	rel.Data = data
	return rel, nil
}

// splitSignatures returns each signature packet of the block serialized on
// its own, so each can be verified independently (go-crypto stops at the first
// signature whose issuer is in the keyring, even if that one fails), and,
// for messages, each one's issuer key ID ("" when it names none).
func splitSignatures(body io.Reader) ([][]byte, []string, error) {
	var sigs [][]byte
	var ids []string
	r := packet.NewOpaqueReader(body)
	for {
		op, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		var buf bytes.Buffer
		if err := op.Serialize(&buf); err != nil {
			return nil, nil, err
		}
		id := ""
		if p, err := op.Parse(); err == nil {
			if s, ok := p.(*packet.Signature); ok {
				switch {
				case len(s.IssuerFingerprint) > 0:
					id = strings.ToUpper(hex.EncodeToString(s.IssuerFingerprint))
				case s.IssuerKeyId != nil:
					id = fmt.Sprintf("%016X", *s.IssuerKeyId)
				}
			}
		}
		sigs = append(sigs, buf.Bytes())
		ids = append(ids, id)
	}
	return sigs, ids, nil
}

func nonEmpty(ss []string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

func unverifiedSuite(text []byte) string {
	var suite string
	for _, line := range strings.Split(string(text), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || strings.HasPrefix(line, " ") {
			continue
		}
		switch k {
		case "Codename":
			return strings.TrimSpace(v)
		case "Suite":
			suite = strings.TrimSpace(v)
		}
	}
	return suite
}

// ParseRelease parses the text of a Release file (the signed part of
// InRelease). It does not check any signature.
func ParseRelease(text []byte) (*Release, error) {
	rel := &Release{}
	field := ""
	for n, line := range strings.Split(string(text), "\n") {
		line = strings.TrimRight(line, "\r")
		if line == "" {
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			if field == "SHA256" {
				f, err := parseReleaseFile(line)
				if err != nil {
					return nil, fmt.Errorf("line %d: %w", n+1, err)
				}
				rel.Files = append(rel.Files, f)
			}
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("line %d: %q is not a field", n+1, line)
		}
		field = k
		v = strings.TrimSpace(v)
		var err error
		switch k {
		case "Origin":
			rel.Origin = v
		case "Label":
			rel.Label = v
		case "Suite":
			rel.Suite = v
		case "Codename":
			rel.Codename = v
		case "Version":
			rel.Version = v
		case "Date":
			rel.Date, err = parseReleaseTime(v)
		case "Valid-Until":
			rel.ValidUntil, err = parseReleaseTime(v)
		case "Architectures":
			rel.Architectures = strings.Fields(v)
		case "Components":
			rel.Components = strings.Fields(v)
		case "Acquire-By-Hash":
			rel.AcquireByHash = strings.EqualFold(v, "yes")
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: %s: %w", n+1, k, err)
		}
	}
	if rel.Suite == "" && rel.Codename == "" {
		return nil, fmt.Errorf("no Suite or Codename field")
	}
	if len(rel.Files) == 0 {
		return nil, fmt.Errorf("no SHA256 file list")
	}
	return rel, nil
}

func parseReleaseFile(line string) (ReleaseFile, error) {
	f := strings.Fields(line)
	if len(f) != 3 {
		return ReleaseFile{}, fmt.Errorf("SHA256 entry %q: want \"hash size path\"", strings.TrimSpace(line))
	}
	size, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || size < 0 {
		return ReleaseFile{}, fmt.Errorf("SHA256 entry for %s: bad size %q", f[2], f[1])
	}
	if len(f[0]) != 64 {
		return ReleaseFile{}, fmt.Errorf("SHA256 entry for %s: hash %q is not 64 hex digits", f[2], f[0])
	}
	if _, err := hex.DecodeString(f[0]); err != nil {
		return ReleaseFile{}, fmt.Errorf("SHA256 entry for %s: hash %q is not hex", f[2], f[0])
	}
	return ReleaseFile{Path: f[2], Size: size, SHA256: strings.ToLower(f[0])}, nil
}

// releaseTimeLayouts are the forms seen in Release files: Debian writes
// RFC 1123 with "UTC", other tools "+0000", some a one-digit day or no weekday.
var releaseTimeLayouts = []string{
	time.RFC1123Z,
	time.RFC1123,
	"Mon, 2 Jan 2006 15:04:05 -0700",
	"Mon, 2 Jan 2006 15:04:05 MST",
	"2 Jan 2006 15:04:05 -0700",
	"2 Jan 2006 15:04:05 MST",
	"Mon, 2 Jan 2006 15:04:05 -0700 (MST)",
}

func parseReleaseTime(v string) (time.Time, error) {
	v = strings.Join(strings.Fields(v), " ")
	for _, layout := range releaseTimeLayouts {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("unrecognised date %q (want RFC 1123, e.g. \"Sat, 09 Aug 2025 09:27:52 UTC\")", v)
}
