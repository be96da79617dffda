package build

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	cdx "github.com/CycloneDX/cyclonedx-go"
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
