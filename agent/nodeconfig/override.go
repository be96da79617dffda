package nodeconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	kubeletConfType = reflect.TypeFor[kubeletv1beta1.KubeletConfiguration]()
)

// kubeletOverrides checks kubelet.config against KubeletConfiguration and
// returns it as a JSON object. The check walks the type itself, case-
// sensitively, so that a misspelt field is reported at its own line; a leaf
// value is checked by decoding it strictly into its Go type, which runs the
// type's own parser (durations, quantities).
func (p *parser) kubeletOverrides(n *yaml.Node, path string) json.RawMessage {
	if n.Kind != yaml.MappingNode {
		p.add(n.Line, path, "must be a mapping of KubeletConfiguration fields, got %s", describe(n))
		return nil
	}
	before := len(p.problems)
	known := jsonFields(kubeletConfType)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
			continue
		}
		// A name the type does not have is left to checkKubeletValue,
		// which reports it as unknown (a misspelling, most likely).
		_, isField := known[k.Value]
		if f, drovers := droverKubeletField(k.Value); isField && drovers {
			p.droverField(k, n.Content[i+1], keyPath(path, k.Value), f)
		}
	}
	if len(p.problems) > before {
		return nil
	}
	p.checkKubeletValue(n, kubeletConfType, path)
	if len(p.problems) > before {
		return nil
	}
	v, err := toJSONValue(n)
	if err != nil {
		p.nodeProblem(err, n, path)
		return nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		p.add(n.Line, path, "cannot be expressed as JSON: %v", err)
		return nil
	}
	return raw
}

// droverField reports a drover field: at each value set below it when it
// is a mapping (kubelet.config.authentication.anonymous.enabled names
// what the user wrote), else at its key.
func (p *parser) droverField(k, v *yaml.Node, path string, f kubeletField) {
	if v.Kind != yaml.MappingNode || len(v.Content) == 0 {
		p.add(k.Line, path, "%s", f.message())
		return
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		p.droverField(v.Content[i], v.Content[i+1], keyPath(path, v.Content[i].Value), f)
	}
}

// nodeError is a problem toJSONValue found at a line below the node it was
// given.
type nodeError struct {
	line int
	msg  string
}

func (e *nodeError) Error() string { return e.msg }

func (p *parser) nodeProblem(err error, n *yaml.Node, path string) {
	var ne *nodeError
	if errors.As(err, &ne) {
		p.add(ne.line, path, "%s", ne.msg)
		return
	}
	p.add(n.Line, path, "%v", err)
}

func (p *parser) checkKubeletValue(n *yaml.Node, t reflect.Type, path string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t.Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		p.checkLeaf(n, t, path)
		return
	}
	if n.Kind != yaml.MappingNode {
		p.add(n.Line, path, "must be a mapping, got %s", describe(n))
		return
	}
	fields := jsonFields(t)
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
			p.add(k.Line, path, "field names must be strings, got %s", describe(k))
			continue
		}
		fp := keyPath(path, k.Value)
		if first, dup := seen[k.Value]; dup {
			p.add(k.Line, fp, "set twice (first on line %d); keep one", first)
			continue
		}
		seen[k.Value] = k.Line
		ft, ok := fields[k.Value]
		if !ok {
			p.add(k.Line, fp, "unknown field of %s; see https://kubernetes.io/docs/reference/config-api/kubelet-config.v1beta1/", t.Name())
			continue
		}
		p.checkKubeletValue(v, ft, fp)
	}
}

// checkLeaf decodes one value strictly into a fresh t.
func (p *parser) checkLeaf(n *yaml.Node, t reflect.Type, path string) {
	v, err := toJSONValue(n)
	if err != nil {
		p.nodeProblem(err, n, path)
		return
	}
	raw, err := json.Marshal(v)
	if err != nil {
		p.add(n.Line, path, "cannot be expressed as JSON: %v", err)
		return
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(reflect.New(t).Interface()); err != nil {
		p.add(n.Line, path, "%s", jsonProblem(err, t))
	}
}

func jsonProblem(err error, t reflect.Type) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		want := te.Type.String()
		if te.Field != "" {
			return fmt.Sprintf("wrong type at %s: got a JSON %s, want %s", te.Field, te.Value, want)
		}
		return fmt.Sprintf("wrong type: got a JSON %s, want %s", te.Value, want)
	}
	return fmt.Sprintf("invalid %s: %s", t.String(), strings.TrimPrefix(err.Error(), "json: "))
}

// jsonFields maps the JSON names of t's fields to their types, following
// inline and embedded structs as encoding/json does.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		if name == "" && (f.Anonymous || strings.Contains(opts, "inline")) && ft.Kind() == reflect.Struct {
			for k, v := range jsonFields(ft) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = ft
	}
	return out
}

// toJSONValue turns a YAML node into the value encoding/json would make of
// the same document. Aliases are refused rather than expanded: expansion is
// how a few bytes of YAML become gigabytes.
func toJSONValue(n *yaml.Node) (any, error) {
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
				return nil, &nodeError{k.Line, "keys must be strings, got " + describe(k)}
			}
			v, err := toJSONValue(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			m[k.Value] = v
		}
		return m, nil
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for _, item := range n.Content {
			v, err := toJSONValue(item)
			if err != nil {
				return nil, err
			}
			s = append(s, v)
		}
		return s, nil
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str", "!!int", "!!float", "!!bool", "!!null":
			var v any
			if err := n.Decode(&v); err != nil {
				return nil, &nodeError{n.Line, err.Error()}
			}
			return v, nil
		}
		return nil, &nodeError{n.Line, "unsupported YAML tag " + n.ShortTag() + "; use a string, number, boolean, list or mapping"}
	}
	return nil, &nodeError{n.Line, "must be a value, got " + describe(n)}
}
