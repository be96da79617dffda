package debian

import (
	"fmt"
	"strings"
	"testing"
)

// TestParseOneLineSources: "deb [ key=value ... ] uri suite [component ...]",
// components optional; anything else on a line is not an entry.
func TestParseOneLineSources(t *testing.T) {
	text := strings.Join([]string{
		"deb http://a.example.invalid/debian trixie",
		"deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://b.example.invalid/debian trixie",
		"deb [ arch=amd64 Signed-By=/k/vendor.gpg ] http://c.example.invalid/x cloud main",
		"deb http://d.example.invalid/debian", // no suite
		"deb [arch=amd64] http://e.example.invalid/debian",
		"deb [arch=amd64 signed-by=/k/x.gpg", // never closed
		"deb-src http://f.example.invalid/debian trixie main",
		"#deb http://g.example.invalid/debian trixie main",
		"  deb   http://h.example.invalid/debian   trixie-security  main # comment",
		"",
	}, "\n")
	got := parseOneLineSources("etc/apt/sources.list", text)
	want := []sourceEntry{
		{file: "etc/apt/sources.list", uris: []string{"http://a.example.invalid/debian"}, suites: []string{"trixie"}},
		{file: "etc/apt/sources.list", uris: []string{"http://b.example.invalid/debian"}, suites: []string{"trixie"}, signedBy: "/usr/share/keyrings/debian-archive-keyring.gpg"},
		{file: "etc/apt/sources.list", uris: []string{"http://c.example.invalid/x"}, suites: []string{"cloud"}, signedBy: "/k/vendor.gpg"},
		{file: "etc/apt/sources.list", uris: []string{"http://h.example.invalid/debian"}, suites: []string{"trixie-security"}},
	}
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
		t.Errorf("parseOneLineSources =\n%+v\nwant\n%+v", got, want)
	}
}

// TestParseDeb822Sources: a Signed-By may continue on the lines below its
// name, a continuation line before any field belongs to none, and comments
// do not end a stanza.
func TestParseDeb822Sources(t *testing.T) {
	text := " stray continuation\n" +
		"Types: deb\r\nURIs: http://a.example.invalid/x http://b.example.invalid/x\r\nSuites: cloud\r\n" +
		"Signed-By:\r\n /usr/share/keyrings/vendor.gpg\r\n\r\n" +
		"\n\n" +
		"Types: deb\n# a comment inside a stanza\nURIs: http://c.example.invalid/debian\nSuites: trixie trixie-updates\nEnabled: yes\n" +
		"Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n" +
		"\n" +
		"Types: deb\nURIs: http://d.example.invalid/debian\nSuites: trixie\nEnabled: No\n" +
		"\n" +
		"Types: deb-src\nURIs: http://e.example.invalid/debian\nSuites: trixie\n" +
		"\n" +
		"not a field\n"
	got := parseDeb822Sources("x.sources", text)
	want := []sourceEntry{
		{file: "x.sources", uris: []string{"http://a.example.invalid/x", "http://b.example.invalid/x"}, suites: []string{"cloud"}, signedBy: "\n/usr/share/keyrings/vendor.gpg"},
		{file: "x.sources", uris: []string{"http://c.example.invalid/debian"}, suites: []string{"trixie", "trixie-updates"}, signedBy: "/usr/share/keyrings/debian-archive-keyring.gpg"},
	}
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Errorf("parseDeb822Sources =\n%q\nwant\n%q", got, want)
	}
}

// TestSignedByDebian: a Signed-By allows a Debian archive unless it names
// only key files none of which is a Debian archive keyring.
func TestSignedByDebian(t *testing.T) {
	for v, want := range map[string]bool{
		"":   true,
		"  ": true,
		"/usr/share/keyrings/debian-archive-keyring.gpg":                                   true,
		"/usr/share/keyrings/debian-archive-trixie-automatic.gpg":                          true,
		"/usr/share/keyrings/vendor.gpg":                                                   false,
		"/usr/share/keyrings/vendor.gpg,/usr/share/keyrings/debian-archive-keyring.gpg":    true,
		"/usr/share/keyrings/vendor.gpg /usr/share/keyrings/debian-archive-keyring.gpg":    true,
		"/usr/share/keyrings/vendor.gpg\t/usr/share/keyrings/debian-archive-keyring.gpg":   true,
		"\n/usr/share/keyrings/vendor.gpg\n/usr/share/keyrings/debian-archive-keyring.gpg": true,
		"/usr/share/keyrings/vendor.gpg,/usr/share/keyrings/other.gpg":                     false,
		"/debian-archive/vendor.gpg":                                                       false,
		"A7236886F3CCCAAD148A27F80E98404D386FA1D9":                                         true,
		"/usr/share/keyrings/vendor.gpg,A7236886F3CCCAAD148A27F80E98404D386FA1D9":          true,
		"-----BEGIN PGP PUBLIC KEY BLOCK-----\n.\n/x.gpg":                                  true,
		",": true,
	} {
		if got := signedByDebian(v); got != want {
			t.Errorf("signedByDebian(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestMirrorFromAPTSkips: a flat repository, a vendor key given on a
// continuation line, and an entry whose URI has no host are passed over for
// the first usable Debian entry.
func TestMirrorFromAPTSkips(t *testing.T) {
	fs := files(
		"etc/apt/sources.list", "deb http:///debian trixie main\ndeb http://flat.example.invalid/repo ./\n"+
			"deb http://sub.example.invalid/repo trixie/updates main\n",
		"etc/apt/sources.list.d/a.sources", "Types: deb\nURIs: http://vendor.example.invalid/x\nSuites: cloud\nSigned-By:\n /usr/share/keyrings/vendor.gpg\n",
		"etc/apt/sources.list.d/b.sources", "Types: deb\nURIs: ftp://old.example.invalid/debian https://deb.example.invalid/debian/\nSuites: trixie-security trixie\n",
	)
	got, err := MirrorFromAPT(fs)
	if err != nil || got != "https://deb.example.invalid/debian" {
		t.Errorf("MirrorFromAPT = %q, %v; want https://deb.example.invalid/debian", got, err)
	}
	// An entry with no URI at all names no mirror.
	if got, err := MirrorFromAPT(files("etc/apt/sources.list.d/a.sources", "Types: deb\nSuites: trixie trixie-security\n")); err == nil {
		t.Errorf("MirrorFromAPT without URIs = %q", got)
	}
	if got, err := ResolveSecurityMirror("", func(string) string { return "" },
		files("etc/apt/sources.list.d/a.sources", "Types: deb\nSuites: trixie-security\n")); err == nil {
		t.Errorf("ResolveSecurityMirror without URIs = %q", got)
	}
}

// TestNormalizeMirror: the archive root is an http(s) URL with a host,
// returned without trailing slashes.
func TestNormalizeMirror(t *testing.T) {
	for raw, want := range map[string]string{
		" http://deb.example.invalid/debian// ": "http://deb.example.invalid/debian",
		"https://deb.example.invalid":           "https://deb.example.invalid",
		"http:///debian":                        "",
		"deb.example.invalid/debian":            "",
		"file:/srv/debian":                      "",
		"http://[::1/":                          "",
	} {
		got, err := normalizeMirror(raw, "--mirror")
		if got != want || (want == "") != (err != nil) {
			t.Errorf("normalizeMirror(%q) = %q, %v; want %q", raw, got, err, want)
		}
		if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("mirror %q from --mirror", raw)) {
			t.Errorf("normalizeMirror(%q): error %q does not name the value and its origin", raw, err)
		}
	}
}
