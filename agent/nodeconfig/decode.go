package nodeconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// parser walks the yaml.Node tree itself rather than decoding into structs:
// yaml.v3's KnownFields stops at the first error and names no field path,
// and Validate must list every problem with its line and path.
type parser struct {
	source   string
	problems []Problem
	// joined accepts a redacted bootstrap token (ParseJoined).
	joined bool
}

func (p *parser) add(line int, path, format string, args ...any) {
	p.problems = append(p.problems, Problem{Source: p.source, Path: path, Line: line, Message: fmt.Sprintf(format, args...)})
}

// entry is one key of a mapping with the line of its key, which is where a
// problem with the value as a whole (or a missing child) is reported.
type entry struct {
	line int
	val  *yaml.Node
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func parse(data []byte, source string, joined bool) (*Config, []Problem) {
	p := &parser{source: source, joined: joined}
	root, ok := p.document(data)
	if !ok {
		return nil, p.problems
	}
	c := p.config(root)
	if len(p.problems) > 0 {
		return nil, p.problems
	}
	return c, nil
}

// document reads exactly one YAML document.
func (p *parser) document(data []byte) (*yaml.Node, bool) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			p.add(0, "", "the document is empty; see docs/node-config.md for a complete example")
			return nil, false
		}
		p.syntax(err)
		return nil, false
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		p.add(extra.Line, "", "a second YAML document follows; the node file holds exactly one")
		return nil, false
	case !errors.Is(err, io.EOF):
		p.syntax(err)
		return nil, false
	}
	if len(doc.Content) == 0 || isNull(doc.Content[0]) {
		p.add(doc.Line, "", "the document is empty; see docs/node-config.md for a complete example")
		return nil, false
	}
	return doc.Content[0], true
}

func (p *parser) syntax(err error) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	p.add(line, "", "invalid YAML: %s", msg)
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names what a node is, for "must be X, got Y" messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias (YAML aliases are not supported: write the value out)"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str":
			return fmt.Sprintf("the string %q", n.Value)
		case "!!int":
			return fmt.Sprintf("the integer %s", n.Value)
		case "!!float":
			return fmt.Sprintf("the number %s", n.Value)
		case "!!bool":
			return fmt.Sprintf("the boolean %s", n.Value)
		case "!!null":
			return "null"
		default:
			return fmt.Sprintf("%s %q", n.ShortTag(), n.Value)
		}
	}
	return "an unknown node"
}

// fields checks that n is a mapping with string keys, each known and set
// once, and returns the values by key. Unknown and duplicate keys are
// reported at the key's line.
func (p *parser) fields(n *yaml.Node, path string, known ...string) map[string]entry {
	if n.Kind != yaml.MappingNode {
		p.add(n.Line, path, "must be a mapping, got %s", describe(n))
		return nil
	}
	out := make(map[string]entry, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
			p.add(k.Line, path, "field names must be strings, got %s", describe(k))
			continue
		}
		fp := keyPath(path, k.Value)
		if !contains(known, k.Value) {
			p.add(k.Line, fp, "unknown field; known fields here are %s", strings.Join(known, ", "))
			continue
		}
		if prev, dup := out[k.Value]; dup {
			p.add(k.Line, fp, "set twice (first on line %d); keep one", prev.line)
			continue
		}
		out[k.Value] = entry{line: k.Line, val: v}
	}
	return out
}

// set reports whether key is present and not null: an explicit null means
// "not set", as in the Kubernetes API.
func set(m map[string]entry, key string) (entry, bool) {
	e, ok := m[key]
	if !ok || isNull(e.val) {
		return entry{}, false
	}
	return e, true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

// keyPath names a key the document wrote under path. A key that is not a
// plain word (empty, or holding dots, spaces or quotes) is written quoted
// in brackets, so the path still says which key is meant: `"": 1` is at
// [""], not at the document as a whole.
func keyPath(path, key string) string {
	if !plainField.MatchString(key) {
		return fmt.Sprintf("%s[%q]", path, key)
	}
	return join(path, key)
}

var plainField = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// str reads a string scalar. Other scalars are wrong types even though YAML
// could coerce them: a label value of 1.10 silently becoming "1.1" is the
// kind of surprise this file must not have.
func (p *parser) str(n *yaml.Node, path string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		hint := ""
		if n.Kind == yaml.ScalarNode && !isNull(n) {
			hint = fmt.Sprintf(" (quote it: %q)", n.Value)
		}
		p.add(n.Line, path, "must be a string, got %s%s", describe(n), hint)
		return "", false
	}
	return n.Value, true
}

// int reads an integer scalar in [lo, hi].
func (p *parser) int(n *yaml.Node, path string, lo, hi int64) (int64, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		p.add(n.Line, path, "must be an integer, got %s", describe(n))
		return 0, false
	}
	var v int64
	if err := n.Decode(&v); err != nil || v < lo || v > hi {
		p.add(n.Line, path, "must be an integer from %d to %d, got %s", lo, hi, n.Value)
		return 0, false
	}
	return v, true
}

// list reads a sequence, calling each for every item with its path.
func (p *parser) list(n *yaml.Node, path string, each func(item *yaml.Node, path string)) bool {
	if n.Kind != yaml.SequenceNode {
		p.add(n.Line, path, "must be a list, got %s", describe(n))
		return false
	}
	for i, item := range n.Content {
		each(item, fmt.Sprintf("%s[%d]", path, i))
	}
	return true
}

// mapping reads a mapping with free-form string keys (labels, mirrors),
// calling each in document order with the key's line and its path
// (path["key"]: keys may hold dots and slashes).
func (p *parser) mapping(n *yaml.Node, path string, each func(key string, keyLine int, val *yaml.Node, path string)) bool {
	if n.Kind != yaml.MappingNode {
		p.add(n.Line, path, "must be a mapping, got %s", describe(n))
		return false
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
			hint := ""
			if k.Kind == yaml.ScalarNode {
				hint = fmt.Sprintf(" (quote it: %q)", k.Value)
			}
			p.add(k.Line, path, "keys must be strings, got %s%s", describe(k), hint)
			continue
		}
		kp := fmt.Sprintf("%s[%q]", path, k.Value)
		if first, dup := seen[k.Value]; dup {
			p.add(k.Line, kp, "set twice (first on line %d); keep one", first)
			continue
		}
		seen[k.Value] = k.Line
		each(k.Value, k.Line, v, kp)
	}
	return true
}
