package build

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// The rules by which scanners find the operating system in an SBOM, read
// as plain JSON the way they read it:
//
//   - trivy, CycloneDX: every component of type operating-system, the
//     metadata component included, is an OS; with two it warns and takes
//     one at random (older releases fail). The OS's name is the family
//     ("debian"), its version the release; the Debian packages it depends
//     on are scanned against that release. A metadata component of a type
//     it does not know makes it refuse the document.
//   - syft (for grype), CycloneDX: the first operating-system component of
//     the components list is the distro.
//   - trivy, SPDX: the package whose SPDX ID starts with OperatingSystem is
//     the OS when a package CONTAINS it; the packages it CONTAINS are its
//     packages.

type cdxOSView struct {
	Metadata struct {
		Component struct {
			Ref  string `json:"bom-ref"`
			Type string `json:"type"`
		} `json:"component"`
	} `json:"metadata"`
	Components []struct {
		Ref     string `json:"bom-ref"`
		Type    string `json:"type"`
		Name    string `json:"name"`
		Version string `json:"version"`
		PURL    string `json:"purl"`
	} `json:"components"`
	Dependencies []struct {
		Ref       string   `json:"ref"`
		DependsOn []string `json:"dependsOn"`
	} `json:"dependencies"`
}

// cdxOS returns the name, version and bom-ref of the one operating-system
// component, and what the metadata component and the OS depend on.
func cdxOS(t *testing.T, data []byte) (name, version string, fromImage, fromOS []string, v cdxOSView) {
	t.Helper()
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	// Types trivy's CycloneDX decoder accepts for a component.
	if !slices.Contains([]string{"container", "application", "library", "framework", "operating-system", "platform"}, v.Metadata.Component.Type) {
		t.Errorf("metadata component type %q: trivy refuses the document", v.Metadata.Component.Type)
	}
	var oses []string
	if v.Metadata.Component.Type == "operating-system" {
		oses = append(oses, "metadata component "+v.Metadata.Component.Ref)
	}
	ref := ""
	for _, c := range v.Components {
		if c.Type == "operating-system" {
			oses = append(oses, c.Ref)
			if ref == "" { // syft takes the first
				name, version, ref = c.Name, c.Version, c.Ref
			}
		}
	}
	if len(oses) > 1 {
		t.Errorf("%d operating-system components %v: trivy takes one at random", len(oses), oses)
	}
	for _, d := range v.Dependencies {
		switch d.Ref {
		case v.Metadata.Component.Ref:
			fromImage = d.DependsOn
		case ref:
			fromOS = d.DependsOn
		}
	}
	return name, version, fromImage, fromOS, v
}

func TestCycloneDXNamesTheOperatingSystem(t *testing.T) {
	m := sbomManifest()
	data, err := cycloneDX(m)
	if err != nil {
		t.Fatal(err)
	}
	name, version, fromImage, fromOS, v := cdxOS(t, data)
	if name != "debian" || version != "13" {
		t.Fatalf("operating system %q %q, want debian 13", name, version)
	}
	if !slices.Contains(fromImage, "os:debian-13") {
		t.Errorf("the image depends on %v, not on the operating system os:debian-13", fromImage)
	}
	// Every Debian package hangs off the operating system directly: trivy
	// releases before it followed the graph transitively scan only those.
	ref := map[string]string{}
	for _, c := range v.Components {
		ref[c.Name] = c.Ref
	}
	for _, p := range m.Packages {
		if !slices.Contains(fromOS, ref[p.Name]) {
			t.Errorf("the operating system does not depend on %s (%s)", p.Name, ref[p.Name])
		}
		if slices.Contains(fromImage, ref[p.Name]) {
			t.Errorf("the image depends on %s directly, besides through the operating system", p.Name)
		}
	}
	for _, on := range fromOS {
		if !strings.HasPrefix(on, "pkg:deb/debian/") {
			t.Errorf("the operating system depends on %s, not a Debian package", on)
		}
	}
}

type spdxOSView struct {
	Packages []struct {
		ID      string `json:"SPDXID"`
		Name    string `json:"name"`
		Version string `json:"versionInfo"`
		Purpose string `json:"primaryPackagePurpose"`
	} `json:"packages"`
	Relationships []struct {
		A   string `json:"spdxElementId"`
		Typ string `json:"relationshipType"`
		B   string `json:"relatedSpdxElement"`
	} `json:"relationships"`
}

func TestSPDXNamesTheOperatingSystem(t *testing.T) {
	m := sbomManifest()
	data, err := sbom(m)
	if err != nil {
		t.Fatal(err)
	}
	var v spdxOSView
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	idOf, nameOf := map[string]string{}, map[string]string{}
	var oses, osPurpose []string
	for _, p := range v.Packages {
		idOf[p.Name], nameOf[p.ID] = p.ID, p.Name
		if strings.HasPrefix(p.ID, "SPDXRef-OperatingSystem") {
			oses = append(oses, p.ID)
			if p.Name != "debian" || p.Version != "13" || p.Purpose != "OPERATING_SYSTEM" {
				t.Errorf("operating system package %s: %q %q purpose %q, want debian 13 OPERATING_SYSTEM", p.ID, p.Name, p.Version, p.Purpose)
			}
		}
		if p.Purpose == "OPERATING_SYSTEM" {
			osPurpose = append(osPurpose, p.Name)
		}
	}
	if len(oses) != 1 || len(osPurpose) != 1 {
		t.Fatalf("operating system packages by SPDX ID %v, by purpose %v: want one, debian", oses, osPurpose)
	}
	contains := map[string][]string{} // SPDX ID -> names it CONTAINS
	for _, r := range v.Relationships {
		if r.Typ == "CONTAINS" {
			contains[r.A] = append(contains[r.A], nameOf[r.B])
		}
	}
	image := idOf[m.Name]
	if !slices.Contains(contains[image], "debian") {
		t.Errorf("the image CONTAINS %v, not the operating system", contains[image])
	}
	for _, p := range m.Packages {
		if !slices.Contains(contains[oses[0]], p.Name) {
			t.Errorf("the operating system does not CONTAIN %s", p.Name)
		}
		if slices.Contains(contains[image], p.Name) {
			t.Errorf("the image CONTAINS %s directly, besides through the operating system", p.Name)
		}
	}
	if len(contains[oses[0]]) != len(m.Packages) {
		t.Errorf("the operating system CONTAINS %v, want the %d Debian packages", contains[oses[0]], len(m.Packages))
	}
}

// A testing or sid image names no release: no operating system, and the
// Debian packages hang off the image as before.
func TestSBOMsWithoutADistro(t *testing.T) {
	m := sbomManifest()
	m.Distro = ""
	cdxData, err := cycloneDX(m)
	if err != nil {
		t.Fatal(err)
	}
	name, _, fromImage, _, _ := cdxOS(t, cdxData)
	if name != "" || !slices.ContainsFunc(fromImage, func(r string) bool { return strings.HasPrefix(r, "pkg:deb/debian/libc6@") }) {
		t.Errorf("CycloneDX without a distro: operating system %q, the image depends on %v", name, fromImage)
	}
	spdxData, err := sbom(m)
	if err != nil {
		t.Fatal(err)
	}
	doc := readSBOM(t, spdxData)
	for _, p := range doc.Packages {
		if p.PrimaryPackagePurpose == "OPERATING_SYSTEM" || strings.HasPrefix(string(p.PackageSPDXIdentifier), "OperatingSystem") {
			t.Errorf("SPDX without a distro has an operating system package %s", p.PackageSPDXIdentifier)
		}
	}
	found := false
	for _, r := range doc.Relationships {
		found = found || (r.RefA.ElementRefID == "image-ecs-node" && r.Relationship == "CONTAINS" && r.RefB.ElementRefID == "deb-libc6")
	}
	if !found {
		t.Error("SPDX without a distro: the image does not CONTAIN libc6")
	}
}

func TestDistroOS(t *testing.T) {
	for _, tc := range []struct{ distro, name, version string }{
		{"debian-13", "debian", "13"},
		{"ubuntu-24.04", "ubuntu", "24.04"},
		{"opensuse-leap-15.6", "opensuse-leap", "15.6"},
		{"", "", ""},
		{"debian-", "", ""},
		{"-13", "", ""},
		{"debian", "", ""},
	} {
		name, version, ok := distroOS(tc.distro)
		if name != tc.name || version != tc.version || ok != (tc.name != "") {
			t.Errorf("distroOS(%q) = %q %q %v, want %q %q", tc.distro, name, version, ok, tc.name, tc.version)
		}
	}
}
