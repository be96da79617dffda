package sbomschema

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"regexp"
	"strings"
	"testing"
)

const minimalSPDX = `{
  "spdxVersion": "SPDX-2.3",
  "dataLicense": "CC0-1.0",
  "SPDXID": "SPDXRef-DOCUMENT",
  "name": "minimal",
  "documentNamespace": "https://example.com/minimal",
  "creationInfo": {"created": "2024-01-02T03:04:05Z", "creators": ["Tool: test"]},
  "packages": [{"SPDXID": "SPDXRef-Package-a", "name": "a", "downloadLocation": "NOASSERTION", "primaryPackagePurpose": "OPERATING_SYSTEM"}]
}`

const minimalCycloneDX = `{
  "bomFormat": "CycloneDX",
  "specVersion": "1.6",
  "version": 1,
  "metadata": {"timestamp": "2024-01-02T03:04:05Z"},
  "components": [{"type": "operating-system", "name": "debian", "licenses": [{"license": {"id": "GPL-2.0-or-later"}}]}]
}`

func TestValidatorsAcceptAMinimalDocument(t *testing.T) {
	if err := SPDX([]byte(minimalSPDX)); err != nil {
		t.Errorf("SPDX refuses a minimal valid document: %v", err)
	}
	if err := CycloneDX([]byte(minimalCycloneDX)); err != nil {
		t.Errorf("CycloneDX refuses a minimal valid document: %v", err)
	}
}

// Each validator can fail, and says which document and what the schema
// complains about.
func TestValidatorsRefuseAnInvalidDocument(t *testing.T) {
	for _, tc := range []struct {
		name     string
		validate func([]byte) error
		doc      string
		want     []string
	}{
		{"SPDX purpose with a hyphen", SPDX, strings.Replace(minimalSPDX, "OPERATING_SYSTEM", "OPERATING-SYSTEM", 1),
			[]string{"SPDX 2.3", "spdx-2.3.json", "/packages/0/primaryPackagePurpose"}},
		{"SPDX without creationInfo", SPDX, regexp.MustCompile(`(?m)^  "creationInfo".*\n`).ReplaceAllString(minimalSPDX, ""),
			[]string{"SPDX 2.3", "creationInfo"}},
		{"SPDX given a CycloneDX document", SPDX, minimalCycloneDX, []string{"SPDX 2.3", "spdxVersion"}},
		{"CycloneDX component of an unknown type", CycloneDX, strings.Replace(minimalCycloneDX, `"operating-system"`, `"package"`, 1),
			[]string{"CycloneDX 1.6", "bom-1.6.schema.json", "/components/0/type"}},
		{"CycloneDX timestamp that is not a date-time", CycloneDX, strings.Replace(minimalCycloneDX, "2024-01-02T03:04:05Z", "yesterday", 1),
			[]string{"CycloneDX 1.6", "/metadata/timestamp", "date-time"}},
		{"CycloneDX license id not on the SPDX list", CycloneDX, strings.Replace(minimalCycloneDX, "GPL-2.0-or-later", "GPL-2+", 1),
			[]string{"CycloneDX 1.6", "/components/0/licenses/0/license/id"}},
		{"CycloneDX given an SPDX document", CycloneDX, minimalSPDX, []string{"CycloneDX 1.6", "bomFormat"}},
		{"SPDX not JSON", SPDX, `{"spdxVersion": `, []string{"SPDX 2.3", "not JSON"}},
		{"CycloneDX not JSON", CycloneDX, ``, []string{"CycloneDX 1.6", "not JSON"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.validate([]byte(tc.doc))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}

// The embedded schemas are the published files the README lists, unedited.
func TestSchemasAreTheREADMEsCopies(t *testing.T) {
	readme, err := os.ReadFile("schemas/README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile("(?m)^\\| `([^`]+)` \\|.*\\| `([0-9a-f]{64})` \\|$").FindAllStringSubmatch(string(readme), -1)
	entries, err := schemaFS.ReadDir("schemas")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(entries) {
		t.Errorf("README lists %d schemas, %d are embedded", len(rows), len(entries))
	}
	for _, r := range rows {
		data, err := schemaFS.ReadFile("schemas/" + r[1])
		if err != nil {
			t.Errorf("README lists %s: %v", r[1], err)
			continue
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != r[2] {
			t.Errorf("%s: sha256 %x, README says %s", r[1], sum, r[2])
		}
	}
}
