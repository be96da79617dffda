// Package sbomschema validates SPDX 2.3 and CycloneDX 1.6 JSON documents
// against the official schemas, embedded so that validation is offline. The
// tests use it: the unit tests on the SBOMs image/build writes from a
// hand-made manifest, the end-to-end tier on a real build's.
package sbomschema

import (
	"bytes"
	"embed"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The official schemas, byte for byte; schemas/README.md says where each
// comes from.
//
//go:embed schemas/*.json
var schemaFS embed.FS

// A schema is compiled on first use and kept: compiling the CycloneDX one
// (with the SPDX license list it references) is the slow part.
type schema struct {
	name  string   // what a valid document is, for errors
	files []string // the root schema first, then those its $refs name

	once     sync.Once
	compiled *jsonschema.Schema
	err      error
}

var (
	spdx      = &schema{name: "SPDX 2.3", files: []string{"spdx-2.3.json"}}
	cycloneDX = &schema{name: "CycloneDX 1.6", files: []string{"bom-1.6.schema.json", "spdx.schema.json", "jsf-0.82.schema.json"}}
)

// SPDX returns nil if data is a valid SPDX 2.3 JSON document, else an error
// listing the schema's complaints.
func SPDX(data []byte) error { return spdx.validate(data) }

// CycloneDX returns nil if data is a valid CycloneDX 1.6 JSON document, else
// an error listing the schema's complaints.
func CycloneDX(data []byte) error { return cycloneDX.validate(data) }

func (s *schema) validate(data []byte) error {
	s.once.Do(func() { s.compiled, s.err = compile(s.files) })
	if s.err != nil {
		return fmt.Errorf("validating a %s document: %w", s.name, s.err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("validating a %s document: it is not JSON: %w", s.name, err)
	}
	if err := s.compiled.Validate(doc); err != nil {
		return fmt.Errorf("not a valid %s document (schema %s): %w", s.name, s.files[0], err)
	}
	return nil
}

// compile compiles the first of files. Each file is added under its own
// $id, so that references between them (the CycloneDX schema's to
// spdx.schema.json and jsf-0.82.schema.json) resolve to the embedded copies
// and nothing is fetched.
func compile(files []string) (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.AssertFormat() // date-time, uri, iri-reference: a scanner parses them too
	var root string
	for i, f := range files {
		data, err := schemaFS.ReadFile("schemas/" + f)
		if err != nil {
			return nil, fmt.Errorf("reading schema %s: %w", f, err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("reading schema %s: %w", f, err)
		}
		id, _ := doc.(map[string]any)["$id"].(string)
		if id == "" {
			return nil, fmt.Errorf("reading schema %s: it has no $id", f)
		}
		if err := c.AddResource(id, doc); err != nil {
			return nil, fmt.Errorf("adding schema %s: %w", f, err)
		}
		if i == 0 {
			root = id
		}
	}
	compiled, err := c.Compile(root)
	if err != nil {
		return nil, fmt.Errorf("compiling schema %s: %w", files[0], err)
	}
	return compiled, nil
}
