package build

import (
	"bytes"
	"strings"
	"testing"

	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdx"
	"github.com/spdx/tools-golang/spdx/v2/common"
	"github.com/spdx/tools-golang/spdxlib"

	"github.com/drover-os/drover/image/gomod"
	"github.com/drover-os/drover/image/lock"
	"github.com/drover-os/drover/image/tree"
)

// The builder is a modified checkout; drover-agent is built from another,
// clean, commit.
const (
	builderRev = "0123456789abcdef0123456789abcdef01234567"
	agentRev   = "89abcdef0123456789abcdef0123456789abcdef"
)

func sbomManifest() *Manifest {
	return &Manifest{Name: "ecs-node", Version: "20261121.091544", BuildID: "0123456789abcdef", Builder: "drover " + builderRev + "+dirty", Epoch: 1795252544,
		RootHash: strings.Repeat("d", 64), Distro: "debian-13",
		// Versions as Debian writes them: an epoch, a binNMU (+b3) of a
		// security update, a backport's "~", a "+" in a package name, and
		// binary packages named or versioned unlike their source package.
		Packages: []Package{
			{Name: "bsdutils", Version: "1:2.75-10+deb13u1+b3", Arch: "amd64", SHA256: strings.Repeat("1", 64),
				Path: "pool/main/u/util-linux/bsdutils_2.75-10+deb13u1+b3_amd64.deb", Suite: "trixie-security",
				Source: "util-linux", SourceVersion: "2.75-10+deb13u1", Depends: []string{"libc6"}},
			{Name: "libc6", Version: "2.41-12", Arch: "amd64", SHA256: strings.Repeat("a", 64), Path: "pool/main/g/glibc/libc6_2.41-12_amd64.deb",
				Source: "glibc", SourceVersion: "2.41-12", Licenses: []string{"LGPL-2.1+", "GPL-2+"}},
			{Name: "libssl3t64", Version: "3.5.4-1~deb13u1", Arch: "amd64", SHA256: strings.Repeat("2", 64),
				Path: "pool/main/o/openssl/libssl3t64_3.5.4-1~deb13u1_amd64.deb", Source: "openssl", SourceVersion: "3.5.4-1~deb13u1",
				Depends: []string{"libc6"}},
			{Name: "libstdc++6", Version: "14.2.0-19", Arch: "amd64", SHA256: strings.Repeat("3", 64),
				Path: "pool/main/g/gcc-14/libstdc++6_14.2.0-19_amd64.deb", Source: "gcc-14", SourceVersion: "14.2.0-19", Depends: []string{"libc6"}},
			{Name: "mawk", Version: "1.3.4-1", Arch: "amd64", SHA256: strings.Repeat("b", 64), Path: "pool/main/m/mawk/mawk_1.3.4-1_amd64.deb",
				Source: "mawk", SourceVersion: "1.3.4-1", Depends: []string{"libc6"}, Licenses: []string{"GPL-2", "BSD-like-Spencer"}},
			{Name: "tzdata", Version: "2025b-4+deb13u1", Arch: "all", SHA256: strings.Repeat("4", 64),
				Path: "pool/main/t/tzdata/tzdata_2025b-4+deb13u1_all.deb", Source: "tzdata", SourceVersion: "2025b-4+deb13u1"},
		},
		Go: []GoComponent{{Name: "kubelet", Module: "k8s.io/kubernetes", Version: "v1.36.3", Package: "k8s.io/kubernetes/cmd/kubelet",
			Install: "/usr/bin/kubelet", SHA256: strings.Repeat("c", 64), GoVersion: "go1.26.8",
			Deps: []string{"github.com/google/cadvisor@v0.52.1 h1:sC8SZ6jio9ds+P2dk51bgbeYeufxo55n0X3tmrpA9as=",
				"github.com/Microsoft/go-winio@v0.6.2 h1:F2VQgta7ecxGYO8k3ZZz3RS8fVIXVxONVUPlNERoyfY=",
				"github.com/docker/cli@v29.7.2+incompatible h1:dlkwallR8XqfeVnA2ELEhdwvb4lsSwuB4IgsG8Q9cLY=",
				"k8s.io/kubernetes@v1.36.3 h1:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="}}},
		Own: []OwnFile{{Path: "/usr/bin/drover-agent", SHA256: strings.Repeat("e", 64), Module: "github.com/drover-os/drover", GoVersion: "go1.26.8",
			Deps:      []string{"github.com/coreos/ignition/v2@v2.24.0 h1:TVcsSWiYvhXihD8Mss3CTRuKaNZM2OIfpoKiudIhrKo="},
			OwnSource: OwnSource{Built: "source", Source: &gomod.Source{Module: "github.com/drover-os/drover", Commit: agentRev}}}},
		URLs: []lock.URL{{Name: "crictl", SHA256: strings.Repeat("f", 64), Size: 3, URL: "https://example.invalid/crictl.tar.gz"}},
		CachedImages: &CachedImages{Root: "/usr/lib/drover/image-cache",
			Images: []CachedImage{
				{Ref: "registry.example.test/team/web:v1.2@sha256:" + strings.Repeat("5", 64), Platform: "linux/amd64", Digest: "sha256:" + strings.Repeat("5", 64),
					Manifest: "sha256:" + strings.Repeat("6", 64), Location: "root", Size: 4096, Layers: []string{"sha256:" + strings.Repeat("7", 64)}},
				{Ref: "registry.example.test:5000/ml/model@sha256:" + strings.Repeat("8", 64), Platform: "linux/amd64", Digest: "sha256:" + strings.Repeat("8", 64),
					Manifest: "sha256:" + strings.Repeat("8", 64), Location: "disk", Size: 1 << 30},
			},
			Disk: &CacheDisk{File: "ecs-node.images.raw", Label: "drover-images", UUID: "0f0f0f0f-0000-4000-8000-000000000000", Size: 1 << 30, SHA256: strings.Repeat("9", 64), Index: strings.Repeat("0", 64)}},
	}
}

// readSBOM reads the document back with the SPDX library and runs its validator.
func readSBOM(t *testing.T, data []byte) *spdx.Document {
	t.Helper()
	doc, err := spdxjson.Read(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the SPDX library cannot read the SBOM: %v", err)
	}
	if err := spdxlib.ValidateDocument(doc); err != nil {
		t.Fatalf("the SPDX library's validator refuses the SBOM: %v", err)
	}
	return doc
}

func TestSBOMIsValidSPDXAndComplete(t *testing.T) {
	data, err := sbom(sbomManifest())
	if err != nil {
		t.Fatal(err)
	}
	doc := readSBOM(t, data)
	if doc.SPDXVersion != "SPDX-2.3" {
		t.Errorf("spdxVersion %q", doc.SPDXVersion)
	}
	byName := map[string]*spdx.Package{}
	idName := map[common.ElementID]string{}
	for _, p := range doc.Packages {
		if byName[p.PackageName] != nil {
			t.Errorf("package %s listed twice", p.PackageName)
		}
		byName[p.PackageName] = p
		idName[p.PackageSPDXIdentifier] = p.PackageName
	}
	libc := byName["libc6"]
	if libc == nil || libc.PackageVersion != "2.41-12" || libc.PackageSourceInfo != "built package from: glibc 2.41-12" ||
		libc.PackageLicenseDeclared != "LGPL-2.1-or-later AND GPL-2.0-or-later" || libc.PackageChecksums[0].Value != strings.Repeat("a", 64) ||
		libc.PackageExternalReferences[0].Locator != "pkg:deb/debian/libc6@2.41-12?arch=amd64&distro=debian-13&upstream=glibc" {
		t.Errorf("libc6 = %+v", libc)
	}
	if m := byName["mawk"]; m.PackageLicenseDeclared != "GPL-2.0-only AND LicenseRef-BSD-like-Spencer" || m.PackageLicenseComments != "debian/copyright states: GPL-2; BSD-like-Spencer" {
		t.Errorf("mawk license %q, comment %q", m.PackageLicenseDeclared, m.PackageLicenseComments)
	}
	if len(doc.OtherLicenses) != 1 || doc.OtherLicenses[0].LicenseIdentifier != "LicenseRef-BSD-like-Spencer" || doc.OtherLicenses[0].ExtractedText == "" {
		t.Errorf("extracted licenses: %+v", doc.OtherLicenses)
	}
	cad := byName["github.com/google/cadvisor"]
	if cad == nil || cad.PackageVersion != "v0.52.1" || cad.PackageComment != "go.sum h1:sC8SZ6jio9ds+P2dk51bgbeYeufxo55n0X3tmrpA9as=" || len(cad.PackageChecksums) != 0 {
		t.Errorf("cadvisor = %+v (the h1 hash is not a file sha256: no checksum)", cad)
	}
	if byName["github.com/coreos/ignition/v2"] == nil || byName["drover-agent"] == nil || byName["crictl"] == nil || byName["kubelet"] == nil {
		t.Errorf("missing packages: have %v", idName)
	}
	rels := map[string]bool{}
	for _, r := range doc.Relationships {
		rels[idName[r.RefA.ElementRefID]+" "+r.Relationship+" "+idName[r.RefB.ElementRefID]] = true
	}
	for _, want := range []string{"ecs-node CONTAINS debian", "debian CONTAINS libc6", "ecs-node CONTAINS kubelet", "ecs-node CONTAINS drover-agent", "ecs-node CONTAINS crictl",
		"mawk DEPENDS_ON libc6", "kubelet DEPENDS_ON github.com/google/cadvisor", "kubelet DEPENDS_ON k8s.io/kubernetes",
		"drover-agent DEPENDS_ON github.com/coreos/ignition/v2"} {
		if !rels[want] {
			t.Errorf("relationship %q missing", want)
		}
	}
	again, _ := sbom(sbomManifest())
	if !bytes.Equal(data, again) {
		t.Error("two SBOMs of the same manifest differ")
	}
}

// The validator the tests rely on can fail: a relationship to a package
// that is not in the document is refused.
func TestSPDXValidatorRefusesADanglingRelationship(t *testing.T) {
	data, _ := sbom(sbomManifest())
	doc := readSBOM(t, data)
	for i, p := range doc.Packages {
		if p.PackageName == "libc6" {
			doc.Packages = append(doc.Packages[:i], doc.Packages[i+1:]...)
			break
		}
	}
	if err := spdxlib.ValidateDocument(doc); err == nil || !strings.Contains(err.Error(), "deb-libc6 used in relationship but no such package exists") {
		t.Fatalf("err = %v", err)
	}
}

func TestSBOMRefusesAModuleWithoutH1(t *testing.T) {
	m := sbomManifest()
	m.Go[0].Deps = append(m.Go[0].Deps, "example.com/local@v0.0.0 ")
	if _, err := sbom(m); err == nil || !strings.Contains(err.Error(), "module example.com/local@v0.0.0 of kubelet has no h1: hash") {
		t.Fatalf("err = %v", err)
	}
}

func TestCopyrightLicenses(t *testing.T) {
	dep5 := "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\nUpstream-Name: x\n\nFiles: *\nCopyright: 2020 A\nLicense: GPL-2+\n\nFiles: lib/*\nLicense: LGPL-2.1+ or MIT\n\nLicense: GPL-2+\n The text.\n"
	got := copyrightLicenses(&tree.Node{Kind: tree.Regular, Data: []byte(dep5)})
	if strings.Join(got, "|") != "GPL-2+|LGPL-2.1+ or MIT" {
		t.Errorf("licenses = %q", got)
	}
	if s, refs := spdxLicense(got); s != "GPL-2.0-or-later AND (LGPL-2.1-or-later OR MIT)" || len(refs) != 0 {
		t.Errorf("SPDX expression = %q, refs %v", s, refs)
	}
	s, refs := spdxLicense([]string{"GPL-2+ or AFL-2.1, and Expat", "BSD-3-clause-Berkeley and ISC", "Apache-2"})
	if s != "LicenseRef-GPL-2-or-AFL-2.1-and-Expat AND (LicenseRef-BSD-3-clause-Berkeley AND ISC) AND Apache-2.0" || len(refs) != 2 ||
		refs["LicenseRef-BSD-3-clause-Berkeley"] != "BSD-3-clause-Berkeley" {
		t.Errorf("SPDX expression = %q, refs %v", s, refs)
	}
	if got := copyrightLicenses(&tree.Node{Kind: tree.Regular, Data: []byte("This package was debianized by …\nLicense: GPL\n")}); got != nil {
		t.Errorf("free-form copyright file: %q, want none", got)
	}
}
