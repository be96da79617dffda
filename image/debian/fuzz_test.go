package debian

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/clearsign"
)

// releaseError is how ParseRelease names the place of a problem: the line,
// or the field that is missing from the whole file.
var releaseError = regexp.MustCompile(`^(line [0-9]+: |no Suite or Codename field$|no SHA256 file list$)`)

// formatRelease writes r back as Release text, every field ParseRelease
// reads; it is the renderer the round trip needs (drover never writes one).
func formatRelease(r *Release) string {
	var b strings.Builder
	for _, f := range [][2]string{{"Origin", r.Origin}, {"Label", r.Label}, {"Suite", r.Suite}, {"Codename", r.Codename}, {"Version", r.Version},
		{"Architectures", strings.Join(r.Architectures, " ")}, {"Components", strings.Join(r.Components, " ")}} {
		fmt.Fprintf(&b, "%s: %s\n", f[0], f[1])
	}
	if !r.Date.IsZero() {
		fmt.Fprintf(&b, "Date: %s\n", r.Date.Format(time.RFC1123Z))
	}
	if !r.ValidUntil.IsZero() {
		fmt.Fprintf(&b, "Valid-Until: %s\n", r.ValidUntil.Format(time.RFC1123Z))
	}
	fmt.Fprintf(&b, "Acquire-By-Hash: %s\nSHA256:\n", map[bool]string{true: "yes", false: "no"}[r.AcquireByHash])
	for _, f := range r.Files {
		fmt.Fprintf(&b, " %s %d %s\n", f.SHA256, f.Size, f.Path)
	}
	return b.String()
}

// FuzzParseRelease: a Release comes from a mirror, so parsing must never
// panic; a refusal names the line (or the missing field); and an accepted
// Release written back out parses to the same Release.
func FuzzParseRelease(f *testing.F) {
	f.Add([]byte(sampleRelease))
	f.Add([]byte("Codename: x\nDate: 2 Jan 2006 15:04:05 MST\nValid-Until: Mon, 2 Jan 2006 15:04:05 -0700 (MST)\nSHA256:\n " + strings.Repeat("A", 64) + " +5 p\n"))
	f.Add([]byte("Suite: s\r\nSHA256:\r\n\t" + strings.Repeat("0", 64) + "\t0\tx\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rel, err := ParseRelease(data)
		if err != nil {
			if !releaseError.MatchString(err.Error()) {
				t.Fatalf("error does not name a line or field: %q", err)
			}
			return
		}
		text := formatRelease(rel)
		again, err := ParseRelease([]byte(text))
		if err != nil {
			t.Fatalf("an accepted Release written back out is refused: %v\n%s", err, text)
		}
		if got := formatRelease(again); got != text {
			t.Fatalf("Release changed through its text\nfirst:\n%s\nsecond:\n%s", text, got)
		}
		for _, f := range rel.Files {
			if f.Size < 0 || len(f.SHA256) != 64 || strings.ToLower(f.SHA256) != f.SHA256 {
				t.Fatalf("accepted file entry %+v", f)
			}
		}
	})
}

// FuzzVerifyInRelease: whatever the mirror sends, VerifyInRelease does not
// panic, and it accepts only what the archive key signed: an accepted
// InRelease is signed by that key, pinned by the sha256 of the bytes given,
// and says exactly what the signed original says.
func FuzzVerifyInRelease(f *testing.F) {
	ed, _, _ := testKeys(f)
	signed := clearsignWith(f, sampleRelease, ed)
	f.Add(signed)
	f.Add(bytes.Replace(signed, []byte("Suite: stable"), []byte("Suite: stable "), 1))
	f.Add(bytes.Replace(signed, []byte("Suite: stable"), []byte("Suite: sid"), 1))
	f.Add([]byte("-----BEGIN PGP SIGNED MESSAGE-----\n\n"))
	keyring := openpgp.EntityList{ed}
	want, err := ParseRelease([]byte(sampleRelease))
	if err != nil {
		f.Fatal(err)
	}
	fingerprint := strings.ToUpper(hex.EncodeToString(ed.PrimaryKey.Fingerprint))
	f.Fuzz(func(t *testing.T, data []byte) {
		rel, err := VerifyInRelease(data, keyring, keyNow)
		if err != nil {
			if !strings.Contains(err.Error(), "InRelease") {
				t.Fatalf("error does not say it is about the InRelease: %v", err)
			}
			return
		}
		sum := sha256.Sum256(data)
		if rel.SignedBy != fingerprint || rel.SHA256 != hex.EncodeToString(sum[:]) {
			t.Fatalf("accepted with SignedBy %s SHA256 %s", rel.SignedBy, rel.SHA256)
		}
		if block, _ := clearsign.Decode(data); block == nil {
			t.Fatal("accepted data that is not clearsigned")
		}
		if !bytes.Equal(rel.Data, data) {
			t.Fatal("Data is not the InRelease as given")
		}
		got := *rel
		got.SHA256, got.SignedBy, got.Data = "", "", nil
		if !reflect.DeepEqual(&got, want) {
			t.Fatalf("accepted a Release that differs from what was signed:\n%s\nwant:\n%s", formatRelease(&got), formatRelease(want))
		}
	})
}

// formatIndex writes packages back as a Packages index, every field
// ParseIndex keeps.
func formatIndex(pkgs []Package) string {
	var b strings.Builder
	for _, p := range pkgs {
		for _, f := range [][2]string{{"Package", p.Name}, {"Version", p.Version}, {"Architecture", p.Architecture}, {"Filename", p.Filename},
			{"Size", fmt.Sprint(p.Size)}, {"SHA256", p.SHA256}, {"Source", p.Source}, {"Section", p.Section}, {"Priority", p.Priority},
			{"Essential", map[bool]string{true: "yes", false: "no"}[p.Essential]}, {"Multi-Arch", p.MultiArch},
			{"Installed-Size", fmt.Sprint(p.InstalledSize)}, {"Depends", p.Depends}, {"Pre-Depends", p.PreDepends},
			{"Provides", p.Provides}, {"Conflicts", p.Conflicts}, {"Breaks", p.Breaks}} {
			fmt.Fprintf(&b, "%s: %s\n", f[0], f[1])
		}
		b.WriteString("\n")
	}
	return b.String()
}

// indexError is how ParseIndex names the place of a problem.
var indexError = regexp.MustCompile(`(?s)^(line [0-9]+: |stanza at line [0-9]+ has no Package field$|package .* \(line [0-9]+\) has no Version field$)`)

// FuzzParseIndex: a Packages index is tens of megabytes from a mirror, so
// parsing must never panic; a refusal names the line; an accepted index
// written back out parses to the same packages; and every package is found
// by its name in the resolver's index.
func FuzzParseIndex(f *testing.F) {
	f.Add([]byte(sampleIndex))
	f.Add(syntheticIndex(3))
	f.Add([]byte("Package: a\nVersion: 1\nDepends:\n b,\n c\nSize: 0012\n\n\n"))
	f.Add([]byte("Package: a\r\nVersion: 1\r\nProvides: x (= 1), y:any, , z ( = 2 )\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		pkgs, err := ParseIndex(data)
		if err != nil {
			if !indexError.MatchString(err.Error()) {
				t.Fatalf("error does not name a line: %q", err)
			}
			return
		}
		text := formatIndex(pkgs)
		again, err := ParseIndex([]byte(text))
		if err != nil {
			t.Fatalf("an accepted index written back out is refused: %v\n%s", err, text)
		}
		if len(pkgs) == 0 {
			pkgs = nil // "" and "\n" parse to an empty, not a nil, list
		}
		if len(again) == 0 {
			again = nil
		}
		if !reflect.DeepEqual(pkgs, again) {
			t.Fatalf("packages changed through the index text\nfirst:  %+v\nsecond: %+v\ntext:\n%s", pkgs, again, text)
		}
		idx := NewIndex("fuzz", []string{"main"}, pkgs)
		for _, p := range pkgs {
			found := false
			for _, q := range idx.Lookup(p.Name) {
				found = found || reflect.DeepEqual(p, q)
			}
			if !found {
				t.Fatalf("Lookup(%q) does not find %+v", p.Name, p)
			}
		}
	})
}
