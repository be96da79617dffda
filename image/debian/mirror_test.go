package debian

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"
)

func files(kv ...string) fstest.MapFS {
	m := fstest.MapFS{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = &fstest.MapFile{Data: []byte(kv[i+1])}
	}
	return m
}

func TestMirrorFromAPT(t *testing.T) {
	tests := []struct {
		name string
		fs   fstest.MapFS
		want string
	}{
		{
			name: "one-line sources.list, security first",
			fs: files("etc/apt/sources.list", `# comment
deb http://security.example.invalid/debian-security bookworm-security main
deb-src http://src.example.invalid/debian bookworm main
deb http://deb.example.invalid/debian/ bookworm main contrib # trailing comment
`),
			want: "http://deb.example.invalid/debian",
		},
		{
			name: "one-line with options",
			fs: files("etc/apt/sources.list.d/debian.list",
				"deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] https://deb.example.invalid/debian trixie main\n"),
			want: "https://deb.example.invalid/debian",
		},
		{
			name: "deb822 (the bookworm/trixie default)",
			fs: files("etc/apt/sources.list.d/debian.sources", `Types: deb
# http://snapshot.example.invalid/archive/debian/20250101T000000Z
URIs: http://deb.example.invalid/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.example.invalid/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
`),
			want: "http://deb.example.invalid/debian",
		},
		{
			name: "deb822 security stanza first, deb-src and disabled stanzas skipped",
			fs: files("etc/apt/sources.list.d/debian.sources", `Types: deb
URIs: http://sec.example.invalid/debian-security
Suites: trixie-security
Components: main

Types: deb-src
URIs: http://src.example.invalid/debian
Suites: trixie

Types: deb
URIs: http://off.example.invalid/debian
Suites: trixie
Enabled: no

Types: deb deb-src
URIs: http://deb.example.invalid/debian
Suites: trixie
Components: main
`),
			want: "http://deb.example.invalid/debian",
		},
		{
			name: "vendor repository with its own keyring skipped, inline key accepted",
			fs: files(
				"etc/apt/sources.list.d/00vendor.sources", `Types: deb
URIs: https://vendor.example.invalid/apt
Suites: nodistro
Signed-By: /usr/share/keyrings/vendor.gpg
`,
				"etc/apt/sources.list.d/10cloud.list", "deb [signed-by=/usr/share/keyrings/cloud.gpg] https://cloud.example.invalid/apt cloud-sdk main\n",
				"etc/apt/sources.list.d/20debian.sources", `Types: deb
URIs: http://deb.example.invalid/debian
Suites: trixie
Signed-By:
 -----BEGIN PGP PUBLIC KEY BLOCK-----
 .
 xjMEZ...
 -----END PGP PUBLIC KEY BLOCK-----
`),
			want: "http://deb.example.invalid/debian",
		},
		{
			name: "sources.list is read before sources.list.d; disabled files ignored",
			fs: files(
				"etc/apt/sources.list", "deb http://first.example.invalid/debian trixie main\n",
				"etc/apt/sources.list.d/a.list", "deb http://second.example.invalid/debian trixie main\n",
				"etc/apt/sources.list.d/0.list.disabled", "deb http://never.example.invalid/debian trixie main\n",
			),
			want: "http://first.example.invalid/debian",
		},
		{
			name: "sources.list.d in file name order across formats",
			fs: files(
				"etc/apt/sources.list.d/b.list", "deb http://b.example.invalid/debian trixie main\n",
				"etc/apt/sources.list.d/a.sources", "Types: deb\nURIs: http://a.example.invalid/debian\nSuites: trixie\n",
			),
			want: "http://a.example.invalid/debian",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := MirrorFromAPT(tt.fs)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("MirrorFromAPT = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestMirrorFromAPTNone(t *testing.T) {
	for name, fs := range map[string]fstest.MapFS{
		"no sources": {},
		"security only": files("etc/apt/sources.list",
			"deb http://sec.example.invalid/debian-security trixie-security main\n"),
		"file and cdrom only": files("etc/apt/sources.list",
			"deb file:/srv/repo trixie main\ndeb cdrom:[Debian]/ trixie main\n"),
	} {
		_, err := MirrorFromAPT(fs)
		if !errors.Is(err, errNoMirror) {
			t.Errorf("%s: err = %v, want errNoMirror", name, err)
			continue
		}
		if !strings.Contains(err.Error(), "--mirror") || !strings.Contains(err.Error(), MirrorEnv) {
			t.Errorf("%s: error %q does not say what to do", name, err)
		}
	}
}

func TestResolveMirror(t *testing.T) {
	apt := files("etc/apt/sources.list", "deb http://apt.example.invalid/debian trixie main\n")
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == MirrorEnv {
				return v
			}
			return ""
		}
	}
	cases := []struct {
		flag, env, want string
	}{
		{"http://flag.example.invalid/debian/", "http://env.example.invalid/debian", "http://flag.example.invalid/debian"},
		{"", "https://env.example.invalid/debian", "https://env.example.invalid/debian"},
		{"", "", "http://apt.example.invalid/debian"},
	}
	for _, c := range cases {
		got, err := ResolveMirror(c.flag, env(c.env), apt)
		if err != nil || got != c.want {
			t.Errorf("ResolveMirror(%q, env %q) = %q, %v; want %q", c.flag, c.env, got, err, c.want)
		}
	}
	if _, err := ResolveMirror("ftp://x.example.invalid/debian", env(""), apt); err == nil || !strings.Contains(err.Error(), "--mirror") {
		t.Errorf("ftp mirror: err = %v, want a rejection naming --mirror", err)
	}
	if _, err := ResolveMirror("", env("deb.example.invalid"), apt); err == nil || !strings.Contains(err.Error(), MirrorEnv) {
		t.Errorf("schemeless env mirror: err = %v, want a rejection naming %s", err, MirrorEnv)
	}
}

func TestResolveSecurityMirror(t *testing.T) {
	deb822 := files("etc/apt/sources.list.d/debian.sources", `Types: deb
URIs: http://deb.example.invalid/debian
Suites: trixie trixie-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://src.example.invalid/debian-security
Suites: trixie-security

Types: deb
URIs: http://deb.example.invalid/debian-security/
Suites: trixie-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
`)
	oneLine := files("etc/apt/sources.list", "deb http://deb.example.invalid/debian bookworm main\n"+
		"deb [signed-by=/usr/share/keyrings/vendor.gpg] http://vendor.example.invalid/x bookworm-security main\n"+
		"deb http://sec.example.invalid/debian-security bookworm-security main\n")
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == SecurityMirrorEnv {
				return v
			}
			return ""
		}
	}
	for _, tc := range []struct {
		name, flag, env string
		fs              fstest.MapFS
		want, err       string
	}{
		{name: "deb822 security stanza", fs: deb822, want: "http://deb.example.invalid/debian-security"},
		{name: "one-line, vendor entry skipped", fs: oneLine, want: "http://sec.example.invalid/debian-security"},
		{name: "environment over apt", env: "http://env.example.invalid/debian-security", fs: deb822, want: "http://env.example.invalid/debian-security"},
		{name: "flag over environment", flag: "https://flag.example.invalid/ds/", env: "http://env.example.invalid/x", fs: deb822, want: "https://flag.example.invalid/ds"},
		{name: "bad flag", flag: "ftp://x", fs: deb822, err: `mirror "ftp://x" from --security-mirror: want an http:// or https:// URL`},
		{name: "no security entry", fs: files("etc/apt/sources.list", "deb http://deb.example.invalid/debian trixie main\n"),
			err: "no -security suite in the host's apt sources (read /etc/apt/sources.list and /etc/apt/sources.list.d/*.list, *.sources): pass --security-mirror or set DROVER_SECURITY_MIRROR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResolveSecurityMirror(tc.flag, env(tc.env), tc.fs)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	// The main mirror is still the first non-security entry.
	if m, err := MirrorFromAPT(oneLine); err != nil || m != "http://deb.example.invalid/debian" {
		t.Errorf("main mirror %q, %v", m, err)
	}
}
