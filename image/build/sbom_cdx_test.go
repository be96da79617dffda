package build

import (
	"bytes"
	"strings"
	"testing"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

func TestCycloneDX(t *testing.T) {
	data, err := cycloneDX(sbomManifest())
	if err != nil {
		t.Fatal(err)
	}
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(bytes.NewReader(data), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		t.Fatalf("the CycloneDX library cannot read the BOM: %v", err)
	}
	if bom.SpecVersion != cdx.SpecVersion1_6 || !strings.HasPrefix(bom.SerialNumber, "urn:uuid:") || bom.Metadata.Component.Type != cdx.ComponentTypePlatform {
		t.Errorf("spec %v serial %q metadata %+v", bom.SpecVersion, bom.SerialNumber, bom.Metadata.Component)
	}
	refs := map[string]cdx.Component{bom.Metadata.Component.BOMRef: *bom.Metadata.Component}
	for _, c := range *bom.Components {
		if _, dup := refs[c.BOMRef]; dup {
			t.Errorf("bom-ref %s twice", c.BOMRef)
		}
		refs[c.BOMRef] = c
	}
	// Every dependency names components of the BOM.
	edges := map[string]bool{}
	for _, d := range *bom.Dependencies {
		for _, on := range *d.Dependencies {
			if _, ok := refs[d.Ref]; !ok {
				t.Errorf("dependency of unknown ref %s", d.Ref)
			}
			if _, ok := refs[on]; !ok {
				t.Errorf("%s depends on unknown ref %s", d.Ref, on)
			}
			edges[refs[d.Ref].Name+" -> "+refs[on].Name] = true
		}
	}
	for _, want := range []string{"ecs-node -> debian", "debian -> libc6", "mawk -> libc6", "kubelet -> github.com/google/cadvisor", "drover-agent -> github.com/coreos/ignition/v2", "ecs-node -> crictl"} {
		if !edges[want] {
			t.Errorf("dependency %q missing", want)
		}
	}
	cad := refs["pkg:golang/github.com/google/cadvisor@v0.52.1"]
	if cad.Version != "v0.52.1" || cad.Hashes != nil || cad.Properties == nil || (*cad.Properties)[0].Value != "h1:sC8SZ6jio9ds+P2dk51bgbeYeufxo55n0X3tmrpA9as=" {
		t.Errorf("cadvisor = %+v", cad)
	}
	libc := refs["pkg:deb/debian/libc6@2.41-12?arch=amd64&distro=debian-13&upstream=glibc"]
	if libc.Licenses == nil || (*libc.Licenses)[0].Expression != "LGPL-2.1-or-later AND GPL-2.0-or-later" || (*libc.Hashes)[0].Value != strings.Repeat("a", 64) {
		t.Errorf("libc6 = %+v", libc)
	}
	again, _ := cycloneDX(sbomManifest())
	if !bytes.Equal(again, data) {
		t.Error("two BOMs of the same manifest differ")
	}
}
