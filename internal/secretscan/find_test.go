package secretscan

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
)

// TestFindLaterCopies: a file holds several encoded values and only a later
// one carries the secret; Find names the encoding and offset of that one.
func TestFindLaterCopies(t *testing.T) {
	node := []byte("cluster:\n  bootstrapToken: abcdef." + secret + "\n")
	other := []byte("nothing to see in this one")
	b64 := base64.StdEncoding.EncodeToString
	for _, tc := range []struct {
		name, data, want string
	}{
		{"data: URL at the start, unterminated", "data:;base64," + b64(node), "data: URL at 0 → plain"},
		{"second data: URL", `{"a":"data:,hello","b":"data:;base64,` + b64(node) + `"}`, "data: URL at 24 → plain"},
		{"second gzip stream", "head" + string(gz(other)) + "mid" + string(gz(node)), fmt.Sprintf("gzip at %d → plain", 4+len(gz(other))+3)},
		{"second percent-encoded run", "a=" + escapeAll(other) + " b=" + escapeAll([]byte(secret)), fmt.Sprintf("percent-encoded at %d → plain", 2+3*len(other)+1)},
		{"second base64 run", "a: " + b64(other) + "\nb: " + b64(node) + "\n", fmt.Sprintf("base64 at %d → plain", 3+len(b64(other))+4)},
		// PEM: lines wrapped without indentation make one run, its
		// label's tail ("CERTIFICATE-----") in front.
		{"PEM", "-----BEGIN CERTIFICATE-----\n" + wrap64(b64(append(bytes.Repeat([]byte("x"), 99), node...))) + "\n-----END CERTIFICATE-----\n", "base64 at 11 → plain"},
		// A run may begin with characters that are not part of the
		// encoding (a URL's path before the token).
		{"base64 after a path", "GET https://x.test/join/" + b64(node) + " HTTP/1.1", "base64 at 16 → plain"},
		// A character glued to the end of an encoding (no separator before
		// the next word) does not hide it.
		{"base64 with a stray last character", "t " + base64.RawStdEncoding.EncodeToString(node) + "Q", "base64 at 2 → plain"},
	} {
		if got := Find([]byte(tc.data), []byte(secret)); got != tc.want {
			t.Errorf("%s: Find = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestFindPercentEscapeDigits: an escape's hex digits may be any of 0-9,
// a-f and A-F; each decodes to its own value.
func TestFindPercentEscapeDigits(t *testing.T) {
	bin := []byte{0x00, 0x09, 0x90, 0x99, 0x0a, 0xaf, 0xfa, 0x0a, 0xaf, 0xfa, 0xff, 0x5e}
	data := "key=%00%09%90%99%0a%af%fa%0A%AF%FA%Ff%5E&x=1"
	if got, want := Find([]byte(data), bin), "percent-encoded at 0 → plain"; got != want {
		t.Errorf("Find = %q, want %q", got, want)
	}
	if got, want := string(percentDecode([]byte("a%41%5a%7A%30%39b%2"))), "aAZz09b%2"; got != want {
		t.Errorf("percentDecode = %q, want %q", got, want)
	}
}

// TestFindDepth: Find follows up to maxDepth nested encodings of one kind
// and no further, so hostile input (gzip of gzip of …) is scanned in bounded
// work.
func TestFindDepth(t *testing.T) {
	dataURL := func(b []byte) []byte { return []byte("data:;base64," + base64.StdEncoding.EncodeToString(b)) }
	percent := func(b []byte) []byte { return []byte("q=" + escapeAll(b)) }
	b64 := func(b []byte) []byte { return []byte(base64.StdEncoding.EncodeToString(b)) }
	for _, tc := range []struct {
		name string
		wrap func([]byte) []byte
		step string
	}{
		{"gzip", gz, "gzip at 0"},
		{"base64", b64, "base64 at 0"},
		{"percent", percent, "percent-encoded at 0"},
		{"data: URL", dataURL, "data: URL at 0"},
	} {
		data := []byte("t: " + secret)
		for range maxDepth {
			data = tc.wrap(data)
		}
		want := strings.Repeat(tc.step+" → ", maxDepth) + "plain"
		if got := Find(data, []byte(secret)); got != want {
			t.Errorf("%s ×%d: Find = %q, want %q", tc.name, maxDepth, got, want)
		}
		if got := Find(tc.wrap(data), []byte(secret)); got != "" {
			t.Errorf("%s ×%d: Find = %q, want nothing (deeper than maxDepth)", tc.name, maxDepth+1, got)
		}
	}
}

func TestRawPatterns(t *testing.T) {
	for _, tc := range []struct {
		secret string
		want   []string
	}{
		// Only the plain copy and the aligned encoding are 8 characters
		// or more.
		{"abcdef", []string{"abcdef", "YWJjZGVm"}},
		{"01234567", []string{"01234567", "MDEyMzQ1", "AxMjM0NTY3", "wMTIzNDU2"}},
		{secret, []string{secret, "MDEyMzQ1Njc4OWFiY2Rl", "AxMjM0NTY3ODlhYmNk", "wMTIzNDU2Nzg5YWJjZGVm"}},
		// Each encoding holding + or / also has its URL-alphabet form.
		{"\xfb\xff\xbf-secret", []string{"\xfb\xff\xbf-secret", "+/+/LXNlY3Jl", "-_-_LXNlY3Jl", "v/vy1zZWNy", "v_vy1zZWNy", "7/78tc2VjcmV0", "7_78tc2VjcmV0"}},
	} {
		var got []string
		for _, p := range RawPatterns([]byte(tc.secret)) {
			got = append(got, string(p))
		}
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("RawPatterns(%q) = %q, want %q", tc.secret, got, tc.want)
		}
	}
	// Every pattern is in the encoding of the secret at its alignment.
	for k := range 3 {
		enc := base64.StdEncoding.EncodeToString(append(bytes.Repeat([]byte{0xee}, k), secret...))
		if !strings.Contains(enc, "MDEyMzQ1Njc4OWFiY2Rl") && !strings.Contains(enc, "AxMjM0NTY3ODlhYmNk") && !strings.Contains(enc, "wMTIzNDU2Nzg5YWJjZGVm") {
			t.Errorf("alignment %d: %s holds no pattern", k, enc)
		}
	}
}

// wrap64 breaks s into lines of 64 characters, as PEM does.
func wrap64(s string) string {
	var lines []string
	for len(s) > 64 {
		lines, s = append(lines, s[:64]), s[64:]
	}
	return strings.Join(append(lines, s), "\n")
}
