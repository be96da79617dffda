package build

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	cdx "github.com/CycloneDX/cyclonedx-go"

	"github.com/drover-os/drover/image/gomod"
)

// TestDocumentsCarryTheBuilderVersion: the SPDX creator, the CycloneDX tool
// and the provenance builder are the builder's stamped version, and
// drover-agent is the commit it was compiled from, not the builder's.
func TestDocumentsCarryTheBuilderVersion(t *testing.T) {
	m := sbomManifest()
	want := builderRev + "+dirty"

	data, err := sbom(m)
	if err != nil {
		t.Fatal(err)
	}
	doc := readSBOM(t, data)
	if c := doc.CreationInfo.Creators; len(c) != 1 || c[0].CreatorType != "Tool" || c[0].Creator != "drover-"+want {
		t.Errorf("SPDX creators %+v, want Tool: drover-%s", c, want)
	}
	for _, p := range doc.Packages {
		if p.PackageName == "drover-agent" && p.PackageVersion != agentRev {
			t.Errorf("SPDX drover-agent version %q, want its commit %s", p.PackageVersion, agentRev)
		}
	}

	data, err = cycloneDX(m)
	if err != nil {
		t.Fatal(err)
	}
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(bytes.NewReader(data), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		t.Fatal(err)
	}
	if tools := *bom.Metadata.Tools.Components; len(tools) != 1 || tools[0].Name != "drover" || tools[0].Version != want {
		t.Errorf("CycloneDX tools %+v, want drover %s", tools, want)
	}
	for _, c := range *bom.Components {
		if c.Name == "drover-agent" && c.Version != agentRev {
			t.Errorf("CycloneDX drover-agent version %q, want its commit %s", c.Version, agentRev)
		}
	}

	m.RecipeSHA256, m.LockSHA256 = strings.Repeat("a", 64), strings.Repeat("b", 64)
	st, err := Provenance(m, []Subject{{Name: "ecs-node.raw", SHA256: strings.Repeat("0", 64)}})
	if err != nil {
		t.Fatal(err)
	}
	var prov struct {
		Predicate struct {
			RunDetails struct {
				Builder struct {
					Version map[string]string `json:"version"`
				} `json:"builder"`
			} `json:"runDetails"`
		} `json:"predicate"`
	}
	if err := json.Unmarshal(st, &prov); err != nil {
		t.Fatal(err)
	}
	if got := prov.Predicate.RunDetails.Builder.Version["drover"]; got != "drover "+want {
		t.Errorf("provenance builder version %q, want %q", got, "drover "+want)
	}
}

// TestDocumentsCarryTheSourceStates: the builder's source state and each
// own binary's are in the manifest, both SBOMs and the provenance, and a
// state nobody determined reads "unknown", never clean.
func TestDocumentsCarryTheSourceStates(t *testing.T) {
	for _, tc := range []struct {
		builder, agent gomod.SourceState
		commit         string
		want           [2]string // builder, agent
	}{
		{gomod.StateDirty, gomod.StateClean, agentRev, [2]string{"dirty", "clean"}},
		{"", gomod.StateUnknown, "", [2]string{"unknown", "unknown"}},
		{gomod.StateClean, "", agentRev, [2]string{"clean", "unknown"}},
	} {
		m := sbomManifest()
		m.BuilderSource = tc.builder
		m.Own[0].Source = &gomod.Source{Module: DroverModule, Commit: tc.commit, State: tc.agent}
		m.RecipeSHA256, m.LockSHA256 = strings.Repeat("a", 64), strings.Repeat("b", 64)

		var man struct {
			BuilderSource string `json:"builderSource"`
		}
		if err := json.Unmarshal(m.JSON(), &man); err != nil {
			t.Fatal(err)
		}
		if man.BuilderSource != string(tc.builder) {
			t.Errorf("manifest builderSource %q, want %q as recorded", man.BuilderSource, tc.builder)
		}

		data, err := sbom(m)
		if err != nil {
			t.Fatal(err)
		}
		doc := readSBOM(t, data)
		if want := "source whose state is " + tc.want[0]; !strings.Contains(doc.CreationInfo.CreatorComment, want) {
			t.Errorf("SPDX creator comment %q, want %q", doc.CreationInfo.CreatorComment, want)
		}
		for _, p := range doc.Packages {
			if want := "source state " + tc.want[1]; p.PackageName == "drover-agent" && !strings.Contains(p.PackageComment, want) {
				t.Errorf("SPDX drover-agent comment %q, want %q", p.PackageComment, want)
			}
		}

		data, err = cycloneDX(m)
		if err != nil {
			t.Fatal(err)
		}
		var bom cdx.BOM
		if err := cdx.NewBOMDecoder(bytes.NewReader(data), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
			t.Fatal(err)
		}
		prop := func(c cdx.Component, name string) string {
			if c.Properties != nil {
				for _, p := range *c.Properties {
					if p.Name == name {
						return p.Value
					}
				}
			}
			return ""
		}
		if got := prop((*bom.Metadata.Tools.Components)[0], "drover:sourceState"); got != tc.want[0] {
			t.Errorf("CycloneDX tool drover:sourceState %q, want %q", got, tc.want[0])
		}
		for _, c := range *bom.Components {
			if got := prop(c, "drover:sourceState"); c.Name == "drover-agent" && got != tc.want[1] {
				t.Errorf("CycloneDX drover-agent drover:sourceState %q, want %q", got, tc.want[1])
			}
		}

		st, err := Provenance(m, []Subject{{Name: "ecs-node.raw", SHA256: strings.Repeat("0", 64)}})
		if err != nil {
			t.Fatal(err)
		}
		var prov struct {
			Predicate struct {
				RunDetails struct {
					Builder struct {
						Version map[string]string `json:"version"`
					} `json:"builder"`
				} `json:"runDetails"`
			} `json:"predicate"`
		}
		if err := json.Unmarshal(st, &prov); err != nil {
			t.Fatal(err)
		}
		if got := prov.Predicate.RunDetails.Builder.Version["sourceState"]; got != tc.want[0] {
			t.Errorf("provenance builder sourceState %q, want %q", got, tc.want[0])
		}
	}
}
