package debian

import (
	"fmt"
	"strings"
	"testing"
)

const sampleIndex = `Package: libc6
Source: glibc
Version: 2.41-12
Installed-Size: 12882
Maintainer: GNU Libc Maintainers <debian-glibc@lists.example.invalid>
Architecture: amd64
Multi-Arch: same
Replaces: libc6-amd64
Depends: libgcc-s1
Recommends: libidn2-0 (>= 2.0.5~)
Suggests: glibc-doc, debconf | debconf-2.0, locales
Breaks: aide (<< 0.17.3-4+b3), busybox (<< 1.30.1-6)
Description: GNU C Library: Shared libraries
 Contains the standard libraries that are used by nearly all programs on
 the system.
 .
 Package: not-a-package
Homepage: https://www.example.invalid/software/libc/libc.html
Description-md5: fc3001b0b90a1c8e6690b283a619d57f
Tag: role::shared-lib
Section: libs
Priority: optional
Filename: pool/main/g/glibc/libc6_2.41-12_amd64.deb
Size: 2851812
MD5sum: 7d0b6d1f2e1e4f2e2a7c6e4b7b5b0f3a
SHA256: 0f2a4c3e9d9f4f2f8c6a0e5b3d1a2c4e6f8a0b2c4d6e8f0a1b3c5d7e9f1a3b5c

Package: systemd
Version: 257.9-1~deb13u1
Architecture: amd64
Essential: no
Priority: important
Section: admin
Pre-Depends: libc6 (>= 2.38),
 libsystemd-shared (= 257.9-1~deb13u1)
Depends: libacl1 (>= 2.2.23), mount
Provides: systemd-sysusers (= 257.9-1~deb13u1), systemd-tmpfiles (= 257.9-1~deb13u1)
Conflicts: consolekit
Filename: pool/main/s/systemd/systemd_257.9-1~deb13u1_amd64.deb
Size: 3063284
SHA256: 1111111111111111111111111111111111111111111111111111111111111111

Package: base-files
Version: 13.8
Essential: yes
Architecture: amd64
Filename: pool/main/b/base-files/base-files_13.8_amd64.deb
Size: 71000
SHA256: 2222222222222222222222222222222222222222222222222222222222222222
`

func TestParseIndex(t *testing.T) {
	for _, eol := range []string{"\n", "\r\n"} {
		pkgs, err := ParseIndex([]byte(strings.ReplaceAll(sampleIndex, "\n", eol)))
		if err != nil {
			t.Fatal(err)
		}
		if len(pkgs) != 3 {
			t.Fatalf("parsed %d packages, want 3", len(pkgs))
		}
		libc := pkgs[0]
		want := Package{
			Name: "libc6", Version: "2.41-12", Architecture: "amd64",
			Filename: "pool/main/g/glibc/libc6_2.41-12_amd64.deb", Size: 2851812,
			SHA256: "0f2a4c3e9d9f4f2f8c6a0e5b3d1a2c4e6f8a0b2c4d6e8f0a1b3c5d7e9f1a3b5c",
			Source: "glibc", Section: "libs", Priority: "optional", MultiArch: "same", InstalledSize: 12882,
			Depends: "libgcc-s1", Breaks: "aide (<< 0.17.3-4+b3), busybox (<< 1.30.1-6)",
		}
		if libc != want {
			t.Errorf("libc6 =\n%+v\nwant\n%+v", libc, want)
		}
		sd := pkgs[1]
		if sd.PreDepends != "libc6 (>= 2.38), libsystemd-shared (= 257.9-1~deb13u1)" {
			t.Errorf("multi-line Pre-Depends = %q", sd.PreDepends)
		}
		if sd.Essential || !pkgs[2].Essential || sd.Conflicts != "consolekit" {
			t.Errorf("Essential/Conflicts: %+v / %+v", sd, pkgs[2])
		}
		if n, v := sd.SourcePackage(); n != "systemd" || v != "257.9-1~deb13u1" {
			t.Errorf("SourcePackage = %s %s", n, v)
		}
		if got := libc.URL("http://m.example.invalid/debian/"); got != "http://m.example.invalid/debian/pool/main/g/glibc/libc6_2.41-12_amd64.deb" {
			t.Errorf("URL = %s", got)
		}
	}
}

func TestParseIndexErrors(t *testing.T) {
	for name, text := range map[string]string{
		"no Package": "Version: 1\n\n",
		"no Version": "Package: a\n\n",
		"bad Size":   "Package: a\nVersion: 1\nSize: 12k\n",
		"not field":  "Package: a\nbogus line\n",
	} {
		if _, err := ParseIndex([]byte(text)); err == nil {
			t.Errorf("%s: ParseIndex succeeded", name)
		}
	}
	if pkgs, err := ParseIndex(nil); err != nil || len(pkgs) != 0 {
		t.Errorf("empty index: %v, %v", pkgs, err)
	}
}

func TestSourcePackageVersioned(t *testing.T) {
	p := Package{Name: "libc6", Version: "2.41-12+b1", Source: "glibc (2.41-12)"}
	if n, v := p.SourcePackage(); n != "glibc" || v != "2.41-12" {
		t.Errorf("SourcePackage = %s %s", n, v)
	}
}

func TestIndexLookupsAndProvides(t *testing.T) {
	pkgs, err := ParseIndex([]byte(sampleIndex))
	if err != nil {
		t.Fatal(err)
	}
	idx := NewIndex("trixie", []string{"main"}, pkgs)
	if got := idx.Lookup("systemd"); len(got) != 1 || got[0].Version != "257.9-1~deb13u1" {
		t.Errorf("Lookup(systemd) = %+v", got)
	}
	if pr := idx.providers["systemd-tmpfiles"]; len(pr) != 1 || pr[0].version != "257.9-1~deb13u1" {
		t.Errorf("providers[systemd-tmpfiles] = %+v", pr)
	}
	if got := idx.Essential(); strings.Join(got, ",") != "base-files" {
		t.Errorf("Essential = %v", got)
	}
}

func TestSplitProvides(t *testing.T) {
	got := splitProvides("awk, mail-transport-agent , python3-foo (= 1.2-3), libfoo:any(=2) ,")
	want := []provideEntry{{"awk", ""}, {"mail-transport-agent", ""}, {"python3-foo", "1.2-3"}, {"libfoo", "2"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("splitProvides = %v, want %v", got, want)
	}
}

// syntheticIndex builds a Packages file shaped like Debian's main index:
// n stanzas with long descriptions and realistic relation fields.
func syntheticIndex(n int) []byte {
	var b strings.Builder
	desc := strings.Repeat(" This line stands for the long descriptions that make up most of a real index.\n", 8)
	for i := range n {
		fmt.Fprintf(&b, "Package: pkg%d\nSource: src%d\nVersion: 1:%d.%d-%d+b1\nInstalled-Size: %d\n", i, i/3, i%97, i%13, i%5, 100+i)
		fmt.Fprintf(&b, "Maintainer: Someone <someone@example.invalid>\nArchitecture: %s\n", []string{"amd64", "all"}[i%2])
		if i%4 == 0 {
			b.WriteString("Multi-Arch: same\n")
		}
		if i > 2 {
			fmt.Fprintf(&b, "Pre-Depends: pkg%d (>= 1:0.1)\nDepends: pkg%d (>= 1.0), pkg%d | virt%d, libc6 (>= 2.38)\n", i-1, i-2, i-3, i%50)
		}
		if i%10 == 0 {
			fmt.Fprintf(&b, "Provides: virt%d (= 1.0), other%d\nBreaks: pkg%d (<< 0.5)\nConflicts: old%d\n", i%50, i, i+1, i)
		}
		fmt.Fprintf(&b, "Recommends: rec%d\nDescription: synthetic package %d\n%sHomepage: https://example.invalid/%d\n", i, i, desc, i)
		fmt.Fprintf(&b, "Description-md5: 0123456789abcdef0123456789abcdef\nTag: role::program, use::testing\nSection: %s\nPriority: optional\n", []string{"libs", "admin", "utils"}[i%3])
		fmt.Fprintf(&b, "Filename: pool/main/p/pkg%d/pkg%d_1.0_amd64.deb\nSize: %d\nMD5sum: 0123456789abcdef0123456789abcdef\n", i, i, 1000+i)
		fmt.Fprintf(&b, "SHA256: %064x\n\n", i)
	}
	return []byte(b.String())
}

func TestParseSyntheticIndex(t *testing.T) {
	pkgs, err := ParseIndex(syntheticIndex(100))
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) != 100 || pkgs[99].Name != "pkg99" || pkgs[99].Size != 1099 || pkgs[10].Provides == "" {
		t.Fatalf("synthetic parse: %d packages, last %+v", len(pkgs), pkgs[len(pkgs)-1])
	}
}

// BenchmarkParseIndex parses an index about the size of Debian main for
// amd64 (~65,000 stanzas) and indexes it, as the warm `drover lock` path does.
func BenchmarkParseIndex(b *testing.B) {
	data := syntheticIndex(65000)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		pkgs, err := ParseIndex(data)
		if err != nil {
			b.Fatal(err)
		}
		NewIndex("synthetic", []string{"main"}, pkgs)
	}
}
