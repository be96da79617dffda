package build

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/package-url/packageurl-go"

	"github.com/drover-os/drover/image/deb/debtest"
	"github.com/drover-os/drover/image/sources"
	"github.com/drover-os/drover/image/tree"
)

// The purls a scanner matches on, exactly: versions escaped as the purl
// spec says ("+" is %2B, ":" and "~" stay), the distro, and the source
// package as syft writes it in upstream=.
var purlCases = []struct {
	pkg, why                string // in sbomManifest; why the case is here
	want                    string
	name, version, upstream string // what the purl reads back as (upstream unescaped)
}{
	{"bsdutils", "an epoch, a binNMU of a security update, a source package named and versioned otherwise",
		"pkg:deb/debian/bsdutils@1:2.75-10%2Bdeb13u1%2Bb3?arch=amd64&distro=debian-13&upstream=util-linux%402.75-10%2Bdeb13u1",
		"bsdutils", "1:2.75-10+deb13u1+b3", "util-linux@2.75-10+deb13u1"},
	{"libssl3t64", "a tilde; a source package named otherwise, same version",
		"pkg:deb/debian/libssl3t64@3.5.4-1~deb13u1?arch=amd64&distro=debian-13&upstream=openssl",
		"libssl3t64", "3.5.4-1~deb13u1", "openssl"},
	{"libstdc++6", "plus signs in the name",
		"pkg:deb/debian/libstdc%2B%2B6@14.2.0-19?arch=amd64&distro=debian-13&upstream=gcc-14",
		"libstdc++6", "14.2.0-19", "gcc-14"},
	{"tzdata", "its own source package: no upstream",
		"pkg:deb/debian/tzdata@2025b-4%2Bdeb13u1?arch=all&distro=debian-13",
		"tzdata", "2025b-4+deb13u1", ""},
}

func TestDebianPURL(t *testing.T) {
	m := sbomManifest()
	byName := map[string]Package{}
	for _, p := range m.Packages {
		byName[p.Name] = p
	}
	for _, tc := range purlCases {
		got := debianPURL(byName[tc.pkg], m.Distro)
		if got != tc.want {
			t.Errorf("%s (%s):\n got %s\nwant %s", tc.pkg, tc.why, got, tc.want)
		}
		// What a scanner reads back is what the manifest says.
		u, err := packageurl.FromString(got)
		if err != nil {
			t.Errorf("%s: the purl library cannot read %s: %v", tc.pkg, got, err)
			continue
		}
		q := u.Qualifiers.Map()
		if u.Type != "deb" || u.Namespace != "debian" || u.Name != tc.name || u.Version != tc.version || q["distro"] != "debian-13" ||
			q["upstream"] != tc.upstream || (tc.upstream == "" && len(q) != 2) {
			t.Errorf("%s reads back as %+v", got, u)
		}
	}
	// A binNMU of a package named like its source: only the version differs.
	p := Package{Name: "mawk", Version: "1.3.4-1+b1", Arch: "arm64", Source: "mawk", SourceVersion: "1.3.4-1"}
	if got, want := debianPURL(p, "debian-13"), "pkg:deb/debian/mawk@1.3.4-1%2Bb1?arch=arm64&distro=debian-13&upstream=mawk%401.3.4-1"; got != want {
		t.Errorf("binNMU: got %s, want %s", got, want)
	}
	// No distro known (a testing image's os-release has no VERSION_ID): no
	// empty qualifier either.
	if got, want := debianPURL(byName["libc6"], ""), "pkg:deb/debian/libc6@2.41-12?arch=amd64&upstream=glibc"; got != want {
		t.Errorf("without a distro: got %s, want %s", got, want)
	}
}

func TestGoPURL(t *testing.T) {
	for _, tc := range []struct{ path, version, want string }{
		{"github.com/coreos/ignition/v2", "v2.24.0", "pkg:golang/github.com/coreos/ignition/v2@v2.24.0"},
		{"github.com/docker/cli", "v29.7.2+incompatible", "pkg:golang/github.com/docker/cli@v29.7.2%2Bincompatible"},
		{"github.com/Microsoft/go-winio", "v0.6.2", "pkg:golang/github.com/Microsoft/go-winio@v0.6.2"},
		{"k8s.io/kubernetes", "v1.36.3", "pkg:golang/k8s.io/kubernetes@v1.36.3"},
	} {
		if got := goPURL(tc.path, tc.version); got != tc.want {
			t.Errorf("goPURL(%s, %s) = %s, want %s", tc.path, tc.version, got, tc.want)
		}
	}
}

// The documents carry the purls where scanners look: SPDX externalRefs of
// category PACKAGE-MANAGER and type purl; CycloneDX purl, with the purl as
// the bom-ref the dependency graph uses. Read as plain JSON, the way a
// scanner that is not one of our libraries reads it.
func TestSBOMsCarryThePURLs(t *testing.T) {
	m := sbomManifest()
	spdxData, err := sbom(m)
	if err != nil {
		t.Fatal(err)
	}
	var spdxDoc struct {
		Packages []struct {
			Name         string `json:"name"`
			ExternalRefs []struct {
				Category string `json:"referenceCategory"`
				Type     string `json:"referenceType"`
				Locator  string `json:"referenceLocator"`
			} `json:"externalRefs"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(spdxData, &spdxDoc); err != nil {
		t.Fatal(err)
	}
	spdxPURL := map[string]string{}
	for _, p := range spdxDoc.Packages {
		for _, r := range p.ExternalRefs {
			if r.Category == "PACKAGE-MANAGER" && r.Type == "purl" {
				spdxPURL[p.Name] = r.Locator
			}
		}
	}
	cdxData, err := cycloneDX(m)
	if err != nil {
		t.Fatal(err)
	}
	var cdxDoc cdxOSView
	if err := json.Unmarshal(cdxData, &cdxDoc); err != nil {
		t.Fatal(err)
	}
	cdxPURL, cdxRef := map[string]string{}, map[string]string{}
	for _, c := range cdxDoc.Components {
		cdxPURL[c.Name], cdxRef[c.Name] = c.PURL, c.Ref
	}
	for _, tc := range purlCases {
		if spdxPURL[tc.pkg] != tc.want {
			t.Errorf("SPDX purl of %s = %q, want %q", tc.pkg, spdxPURL[tc.pkg], tc.want)
		}
		if cdxPURL[tc.pkg] != tc.want || cdxRef[tc.pkg] != tc.want {
			t.Errorf("CycloneDX %s: purl %q, bom-ref %q, want %q", tc.pkg, cdxPURL[tc.pkg], cdxRef[tc.pkg], tc.want)
		}
	}
	for name, want := range map[string]string{
		"kubelet":                       "pkg:golang/k8s.io/kubernetes@v1.36.3",
		"github.com/docker/cli":         "pkg:golang/github.com/docker/cli@v29.7.2%2Bincompatible",
		"github.com/Microsoft/go-winio": "pkg:golang/github.com/Microsoft/go-winio@v0.6.2",
	} {
		if spdxPURL[name] != want || cdxPURL[name] != want {
			t.Errorf("%s: SPDX purl %q, CycloneDX purl %q, want %q", name, spdxPURL[name], cdxPURL[name], want)
		}
	}
	// bsdutils depends on libc6, by the purls both are listed under.
	libc := "pkg:deb/debian/libc6@2.41-12?arch=amd64&distro=debian-13&upstream=glibc"
	found := false
	for _, d := range cdxDoc.Dependencies {
		if d.Ref == purlCases[0].want {
			for _, on := range d.DependsOn {
				found = found || on == libc
			}
		}
	}
	if !found {
		t.Errorf("CycloneDX: no dependency %s -> %s", purlCases[0].want, libc)
	}
}

func TestImageDistro(t *testing.T) {
	const trixie = "PRETTY_NAME=\"Debian GNU/Linux 13 (trixie)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"13\"\nVERSION=\"13 (trixie)\"\nVERSION_CODENAME=trixie\nDEBIAN_VERSION_FULL=13.2\nID=debian\n"
	const forky = "PRETTY_NAME=\"Debian GNU/Linux forky/sid\"\nNAME=\"Debian GNU/Linux\"\nVERSION_CODENAME=forky\nID=debian\n"
	file := func(p, data string) *tree.Node {
		return &tree.Node{Path: p, Kind: tree.Regular, Mode: 0o644, Data: []byte(data)}
	}
	link := func(p, target string) *tree.Node { return &tree.Node{Path: p, Kind: tree.Symlink, Target: target} }
	for _, tc := range []struct {
		name  string
		nodes []*tree.Node
		want  string
	}{
		{"base-files: /etc/os-release links to /usr/lib", []*tree.Node{file("/usr/lib/os-release", trixie), link("/etc/os-release", "../usr/lib/os-release")}, "debian-13"},
		{"only /usr/lib/os-release", []*tree.Node{file("/usr/lib/os-release", trixie)}, "debian-13"},
		{"/etc/os-release wins", []*tree.Node{file("/usr/lib/os-release", trixie), file("/etc/os-release", "ID=debian\nVERSION_ID='12'\n")}, "debian-12"},
		{"testing has no VERSION_ID", []*tree.Node{file("/usr/lib/os-release", forky)}, ""},
		{"no os-release", nil, ""},
	} {
		tr := tree.New()
		for _, n := range tc.nodes {
			if err := tr.Add(n); err != nil {
				t.Fatal(err)
			}
		}
		if got := imageDistro(tr); got != tc.want {
			t.Errorf("%s: distro %q, want %q", tc.name, got, tc.want)
		}
	}
}

// From the .deb's control file and the root's os-release to the purl: the
// facts the purl is made of are the ones the build records.
func TestPackageFactsFeedThePURL(t *testing.T) {
	dir := t.TempDir()
	debs := map[string]string{}
	for _, c := range []map[string]string{
		{"Package": "bsdutils", "Version": "1:2.75-10+deb13u1+b3", "Architecture": "amd64", "Source": "util-linux (2.75-10+deb13u1)"},
		{"Package": "libstdc++6", "Version": "14.2.0-19", "Architecture": "amd64", "Source": "gcc-14"},
		{"Package": "base-files", "Version": "13.8+deb13u2", "Architecture": "amd64"},
	} {
		data, err := debtest.Build(debtest.Deb{Control: c, Compression: "gz"})
		if err != nil {
			t.Fatal(err)
		}
		debs[c["Package"]] = filepath.Join(dir, c["Package"]+".deb")
		if err := os.WriteFile(debs[c["Package"]], data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tr := tree.New()
	for _, n := range []*tree.Node{
		{Path: "/usr/lib/os-release", Kind: tree.Regular, Mode: 0o644, Data: []byte("ID=debian\nVERSION_ID=\"13\"\nVERSION_CODENAME=trixie\n")},
		{Path: "/etc/os-release", Kind: tree.Symlink, Target: "../usr/lib/os-release"},
	} {
		if err := tr.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	b := &builder{tree: tr, man: &Manifest{Packages: []Package{
		{Name: "base-files", Version: "13.8+deb13u2", Arch: "amd64"},
		{Name: "bsdutils", Version: "1:2.75-10+deb13u1+b3", Arch: "amd64"},
		{Name: "libstdc++6", Version: "14.2.0-19", Arch: "amd64"},
	}}}
	if err := b.packageFacts(&sources.Fetched{Debs: debs}); err != nil {
		t.Fatal(err)
	}
	if b.man.Distro != "debian-13" {
		t.Errorf("manifest distro %q, want debian-13", b.man.Distro)
	}
	for i, want := range []string{
		"pkg:deb/debian/base-files@13.8%2Bdeb13u2?arch=amd64&distro=debian-13",
		"pkg:deb/debian/bsdutils@1:2.75-10%2Bdeb13u1%2Bb3?arch=amd64&distro=debian-13&upstream=util-linux%402.75-10%2Bdeb13u1",
		"pkg:deb/debian/libstdc%2B%2B6@14.2.0-19?arch=amd64&distro=debian-13&upstream=gcc-14",
	} {
		if got := debianPURL(b.man.Packages[i], b.man.Distro); got != want {
			t.Errorf("%s: got %s, want %s", b.man.Packages[i].Name, got, want)
		}
	}
}
