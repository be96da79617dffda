package debian

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestParseReleaseErrorsNameTheLine: a Release that does not parse is
// reported with the line and the entry at fault.
func TestParseReleaseErrorsNameTheLine(t *testing.T) {
	hash := strings.Repeat("a", 64)
	for _, tc := range []struct{ name, text, want string }{
		{"field without a colon", "Codename: trixie\nSuite stable\n", `line 2: "Suite stable" is not a field`},
		{"bad date", "Codename: trixie\n\nDate: yesterday\n", `line 3: Date: unrecognised date "yesterday" (want RFC 1123, e.g. "Sat, 09 Aug 2025 09:27:52 UTC")`},
		{"bad Valid-Until", "Codename: trixie\nValid-Until: soon\n", `line 2: Valid-Until: unrecognised date "soon"`},
		{"negative size", "Codename: trixie\nSHA256:\n " + hash + " 1 a\n " + hash + " -1 x\n", `line 4: SHA256 entry for x: bad size "-1"`},
		{"size not a number", "Codename: trixie\nSHA256:\n " + hash + " 1k x\n", `line 3: SHA256 entry for x: bad size "1k"`},
		{"short hash", "Codename: trixie\nSHA256:\n " + hash[:63] + " 1 x\n", `line 3: SHA256 entry for x: hash "` + hash[:63] + `" is not 64 hex digits`},
		{"long hash", "Codename: trixie\nSHA256:\n " + hash + "a 1 x\n", `is not 64 hex digits`},
		{"hash not hex", "Codename: trixie\nSHA256:\n " + strings.Repeat("g", 64) + " 1 x\n", `line 3: SHA256 entry for x: hash "` + strings.Repeat("g", 64) + `" is not hex`},
		{"two fields", "Codename: trixie\nSHA256:\n " + hash + " 1\n", `line 3: SHA256 entry "` + hash + ` 1": want "hash size path"`},
		{"four fields", "Codename: trixie\nSHA256:\n " + hash + " 1 x y\n", `want "hash size path"`},
		{"no suite", "Origin: Debian\nSHA256:\n " + hash + " 1 x\n", "no Suite or Codename field"},
		{"no files", "Suite: stable\nMD5Sum:\n 0ed6d4c8891eb86358b94bb35d9e4da4 1 x\n", "no SHA256 file list"},
	} {
		_, err := ParseRelease([]byte(tc.text))
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.HasPrefix(tc.want, "line ") && !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: ParseRelease = %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestParseReleaseEntries: an empty index file (size 0) is a valid entry,
// SHA256 lines may be indented with a tab, CRLF is accepted, and the suite
// alone names a Release without a codename.
func TestParseReleaseEntries(t *testing.T) {
	hash := strings.Repeat("A", 64)
	text := "Suite: stable-updates\r\nAcquire-By-Hash: YES\r\nSHA256:\r\n\t" + hash + " 0 main/debian-installer/binary-all/Packages\r\n " +
		strings.ToLower(hash) + " 18 main/i18n/Translation-en\r\nSHA512:\r\n " + strings.Repeat("b", 128) + " 5 main/x\r\n"
	rel, err := ParseRelease([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	want := []ReleaseFile{
		{Path: "main/debian-installer/binary-all/Packages", Size: 0, SHA256: strings.ToLower(hash)},
		{Path: "main/i18n/Translation-en", Size: 18, SHA256: strings.ToLower(hash)},
	}
	if len(rel.Files) != len(want) || rel.Files[0] != want[0] || rel.Files[1] != want[1] {
		t.Errorf("Files = %+v, want %+v", rel.Files, want)
	}
	if rel.Name() != "stable-updates" || !rel.AcquireByHash {
		t.Errorf("Name() = %q, AcquireByHash %v", rel.Name(), rel.AcquireByHash)
	}
	if f, ok := rel.File("main/x"); ok {
		t.Errorf("File(main/x) = %+v from the SHA512 list", f)
	}
	if _, ok := rel.File("main/i18n/Translation-en"); !ok {
		t.Error("File(main/i18n/Translation-en) not found")
	}
}

// TestUnverifiedSuite: the name an unverifiable InRelease is reported
// under is its codename, else its suite; indented lines are not fields.
func TestUnverifiedSuite(t *testing.T) {
	for text, want := range map[string]string{
		"Suite: stable\nCodename: trixie\n":                  "trixie",
		"Codename: trixie\nSuite: stable\n":                  "trixie",
		"Suite: stable\n":                                    "stable",
		"Origin: Debian\n Codename: forged\nSuite: stable\n": "stable",
		"Description: x\n":                                   "",
	} {
		if got := unverifiedSuite([]byte(text)); got != want {
			t.Errorf("unverifiedSuite(%q) = %q, want %q", text, got, want)
		}
	}
}

// TestSignatureErrorMessages: each refusal says why, for the suite and the
// keyring it is about.
func TestSignatureErrorMessages(t *testing.T) {
	now := time.Date(2025, 8, 10, 0, 0, 0, 0, time.UTC)
	inner := errors.New("openpgp: signature made by unknown entity")
	for _, tc := range []struct {
		name string
		e    SignatureError
		want string
	}{
		{"no issuer IDs, no suite", SignatureError{Err: inner},
			"InRelease for unknown suite: signature does not verify against the keyring (no issuer key IDs in the signature): check the mirror"},
		{"unknown signers", SignatureError{Suite: "trixie", KeyringPath: "/k.gpg", SignerIDs: []string{"AA", "BB"}},
			"InRelease for trixie is signed by key AA, BB, which is not in keyring /k.gpg (or its signature does not verify)"},
		{"expired", SignatureError{Suite: "trixie", SignerIDs: []string{"AA"}, Expired: []string{"AA"}, Now: now},
			"InRelease for trixie is signed by key AA of the keyring, which had expired at Sun, 10 Aug 2025 00:00:00 UTC"},
		{"revoked wins over expired", SignatureError{Suite: "trixie", SignerIDs: []string{"AA", "BB"}, Expired: []string{"AA"}, Revoked: []string{"BB"}},
			"InRelease for trixie is signed by key BB of the keyring, which is revoked: refused"},
	} {
		if got := tc.e.Error(); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: %q, want it to start %q", tc.name, got, tc.want)
		}
	}
	if err := error(&SignatureError{Err: inner}); !errors.Is(err, inner) {
		t.Error("SignatureError does not unwrap to the verification error")
	}
}

// TestNonEmpty drops the signatures that named no issuer.
func TestNonEmpty(t *testing.T) {
	if got := strings.Join(nonEmpty([]string{"", "AA", "", "BB"}), ","); got != "AA,BB" {
		t.Errorf("nonEmpty = %q", got)
	}
	if got := nonEmpty([]string{""}); got != nil {
		t.Errorf("nonEmpty of one empty ID = %q, want nil", got)
	}
}
