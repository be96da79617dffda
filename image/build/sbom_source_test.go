package build

import (
	"encoding/json"
	"testing"
)

// trivy looks Debian's advisories up by source package and reads it only
// from its own CycloneDX properties (aquasecurity:trivy:Src*, the version
// split into upstream version, revision and epoch) or from an SPDX
// sourceInfo "built package from: <source> <version>"; not from the purl.
func TestSBOMsNameTheSourcePackageTheWayTrivyReadsIt(t *testing.T) {
	m := sbomManifest()
	// A source version with an epoch, and a native one (no revision).
	m.Packages = append(m.Packages,
		Package{Name: "libcap2", Version: "1:2.75-10+b1", Arch: "amd64", SHA256: "5", Path: "pool/main/libc/libcap2/libcap2_2.75-10+b1_amd64.deb",
			Source: "libcap2", SourceVersion: "1:2.75-10"},
		Package{Name: "ca-certificates", Version: "20250419", Arch: "all", SHA256: "6", Path: "pool/main/c/ca-certificates/ca-certificates_20250419_all.deb",
			Source: "ca-certificates", SourceVersion: "20250419"})
	cdxData, err := cycloneDX(m)
	if err != nil {
		t.Fatal(err)
	}
	var bom struct {
		Components []struct {
			Name       string `json:"name"`
			Properties []struct{ Name, Value string }
		} `json:"components"`
	}
	if err := json.Unmarshal(cdxData, &bom); err != nil {
		t.Fatal(err)
	}
	props := map[string]map[string]string{}
	for _, c := range bom.Components {
		props[c.Name] = map[string]string{}
		for _, p := range c.Properties {
			props[c.Name][p.Name] = p.Value
		}
	}
	for _, tc := range []struct{ pkg, name, version, release, epoch string }{
		{"libc6", "glibc", "2.41", "12", ""},
		{"bsdutils", "util-linux", "2.75", "10+deb13u1", ""},
		{"libssl3t64", "openssl", "3.5.4", "1~deb13u1", ""},
		{"libcap2", "libcap2", "2.75", "10", "1"},
		{"ca-certificates", "ca-certificates", "20250419", "", ""},
	} {
		p := props[tc.pkg]
		_, hasRelease := p["aquasecurity:trivy:SrcRelease"]
		_, hasEpoch := p["aquasecurity:trivy:SrcEpoch"]
		if p["aquasecurity:trivy:SrcName"] != tc.name || p["aquasecurity:trivy:SrcVersion"] != tc.version ||
			p["aquasecurity:trivy:SrcRelease"] != tc.release || hasRelease != (tc.release != "") ||
			p["aquasecurity:trivy:SrcEpoch"] != tc.epoch || hasEpoch != (tc.epoch != "") {
			t.Errorf("CycloneDX %s: trivy source properties %v, want %s %s release %q epoch %q", tc.pkg, p, tc.name, tc.version, tc.release, tc.epoch)
		}
	}
	if _, ok := props["kubelet"]["aquasecurity:trivy:SrcName"]; ok {
		t.Error("a Go binary has a Debian source package")
	}

	spdxData, err := sbom(m)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Packages []struct {
			Name       string `json:"name"`
			SourceInfo string `json:"sourceInfo"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(spdxData, &doc); err != nil {
		t.Fatal(err)
	}
	info := map[string]string{}
	for _, p := range doc.Packages {
		info[p.Name] = p.SourceInfo
	}
	for pkg, want := range map[string]string{
		"libc6":    "built package from: glibc 2.41-12",
		"bsdutils": "built package from: util-linux 2.75-10+deb13u1",
		"libcap2":  "built package from: libcap2 1:2.75-10",
	} {
		if info[pkg] != want {
			t.Errorf("SPDX %s sourceInfo %q, want %q", pkg, info[pkg], want)
		}
	}
}
