package build

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/drover-os/drover/image/sbomschema"
)

func TestSBOMsValidateAgainstTheOfficialSchemas(t *testing.T) {
	spdxDoc, err := sbom(sbomManifest())
	if err != nil {
		t.Fatal(err)
	}
	if err := sbomschema.SPDX(spdxDoc); err != nil {
		t.Errorf("the SPDX SBOM: %v", err)
	}
	cdxDoc, err := cycloneDX(sbomManifest())
	if err != nil {
		t.Fatal(err)
	}
	if err := sbomschema.CycloneDX(cdxDoc); err != nil {
		t.Errorf("the CycloneDX SBOM: %v", err)
	}
}

// The schema checks can fail: each schema refuses a document broken in a
// way a scanner would trip on.
func TestSchemasRefuseABrokenSBOM(t *testing.T) {
	spdxDoc, _ := sbom(sbomManifest())
	cdxDoc, _ := cycloneDX(sbomManifest())
	for _, tc := range []struct {
		name, want string
		validate   func([]byte) error
		doc        []byte
		edit       func(map[string]any)
	}{
		{"SPDX purpose with a hyphen", "OPERATING_SYSTEM", sbomschema.SPDX, spdxDoc, func(d map[string]any) {
			d["packages"].([]any)[0].(map[string]any)["primaryPackagePurpose"] = "OPERATING-SYSTEM"
		}},
		{"SPDX package without a download location", "downloadLocation", sbomschema.SPDX, spdxDoc, func(d map[string]any) {
			delete(d["packages"].([]any)[1].(map[string]any), "downloadLocation")
		}},
		{"CycloneDX component of an unknown type", "/components/0/type", sbomschema.CycloneDX, cdxDoc, func(d map[string]any) {
			d["components"].([]any)[0].(map[string]any)["type"] = "package"
		}},
		{"CycloneDX timestamp that is not a date-time", "date-time", sbomschema.CycloneDX, cdxDoc, func(d map[string]any) {
			d["metadata"].(map[string]any)["timestamp"] = "yesterday"
		}},
		{"CycloneDX license id not on the SPDX list", "/license/id': value must be one of", sbomschema.CycloneDX, cdxDoc, func(d map[string]any) {
			d["components"].([]any)[0].(map[string]any)["licenses"] = []any{map[string]any{"license": map[string]any{"id": "GPL-2+"}}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d map[string]any
			if err := json.Unmarshal(tc.doc, &d); err != nil {
				t.Fatal(err)
			}
			tc.edit(d)
			broken, _ := json.Marshal(d)
			err := tc.validate(broken)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("schema errors = %v, want one about %s", err, tc.want)
			}
		})
	}
}
