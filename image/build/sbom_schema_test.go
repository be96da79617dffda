package build

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The official schemas, committed under testdata/schemas (see its README).
// Each is added to the compiler under its own $id, so that the CycloneDX
// schema's references to spdx.schema.json and jsf-0.82.schema.json resolve
// to the committed files and nothing is fetched.
var (
	spdxSchemaFiles      = []string{"spdx-2.3.json"}
	cycloneDXSchemaFiles = []string{"bom-1.6.schema.json", "spdx.schema.json", "jsf-0.82.schema.json"}
)

// compileSchema compiles the first of files, with the others available to
// its references.
func compileSchema(t *testing.T, files []string) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat() // date-time, uri, iri-reference: a scanner parses them too
	var root string
	for i, f := range files {
		doc := readJSON(t, filepath.Join("testdata", "schemas", f))
		id, _ := doc.(map[string]any)["$id"].(string)
		if id == "" {
			t.Fatalf("schema %s has no $id", f)
		}
		if err := c.AddResource(id, doc); err != nil {
			t.Fatalf("schema %s: %v", f, err)
		}
		if i == 0 {
			root = id
		}
	}
	s, err := c.Compile(root)
	if err != nil {
		t.Fatalf("compiling %s: %v", files[0], err)
	}
	return s
}

func readJSON(t *testing.T, path string) any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// schemaErrors validates a document and returns the schema's complaints,
// one a line, or "" when it is valid.
func schemaErrors(t *testing.T, s *jsonschema.Schema, data []byte) string {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the document is not JSON: %v", err)
	}
	if err := s.Validate(doc); err != nil {
		return err.Error()
	}
	return ""
}

func TestSBOMsValidateAgainstTheOfficialSchemas(t *testing.T) {
	spdxDoc, err := sbom(sbomManifest())
	if err != nil {
		t.Fatal(err)
	}
	if msg := schemaErrors(t, compileSchema(t, spdxSchemaFiles), spdxDoc); msg != "" {
		t.Errorf("the SPDX SBOM is not valid SPDX 2.3:\n%s", msg)
	}
	cdxDoc, err := cycloneDX(sbomManifest())
	if err != nil {
		t.Fatal(err)
	}
	if msg := schemaErrors(t, compileSchema(t, cycloneDXSchemaFiles), cdxDoc); msg != "" {
		t.Errorf("the CycloneDX SBOM is not valid CycloneDX 1.6:\n%s", msg)
	}
}

// The schema checks can fail: each schema refuses a document broken in a
// way a scanner would trip on.
func TestSchemasRefuseABrokenSBOM(t *testing.T) {
	spdxDoc, _ := sbom(sbomManifest())
	cdxDoc, _ := cycloneDX(sbomManifest())
	for _, tc := range []struct {
		name, want string
		files      []string
		doc        []byte
		edit       func(map[string]any)
	}{
		{"SPDX purpose with a hyphen", "OPERATING_SYSTEM", spdxSchemaFiles, spdxDoc, func(d map[string]any) {
			d["packages"].([]any)[0].(map[string]any)["primaryPackagePurpose"] = "OPERATING-SYSTEM"
		}},
		{"SPDX package without a download location", "downloadLocation", spdxSchemaFiles, spdxDoc, func(d map[string]any) {
			delete(d["packages"].([]any)[1].(map[string]any), "downloadLocation")
		}},
		{"CycloneDX component of an unknown type", "type", cycloneDXSchemaFiles, cdxDoc, func(d map[string]any) {
			d["components"].([]any)[0].(map[string]any)["type"] = "package"
		}},
		{"CycloneDX timestamp that is not a date-time", "date-time", cycloneDXSchemaFiles, cdxDoc, func(d map[string]any) {
			d["metadata"].(map[string]any)["timestamp"] = "yesterday"
		}},
		{"CycloneDX license id not on the SPDX list", "/license/id': value must be one of", cycloneDXSchemaFiles, cdxDoc, func(d map[string]any) {
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
			if msg := schemaErrors(t, compileSchema(t, tc.files), broken); msg == "" || !strings.Contains(msg, tc.want) {
				t.Errorf("schema errors = %q, want one about %s", msg, tc.want)
			}
		})
	}
}
