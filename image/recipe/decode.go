package recipe

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// FieldError is a problem at one place of a YAML document. It names the file,
// the line and the field path so the user can go straight to it.
type FieldError struct {
	File string
	Line int
	Path string
	Msg  string
}

func (e *FieldError) Error() string {
	where := e.File
	if e.Line > 0 {
		where = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	if e.Path == "" {
		return fmt.Sprintf("%s: %s", where, e.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", where, e.Path, e.Msg)
}

// decoder maps a yaml.Node tree onto Go structs strictly: unknown fields and
// wrong types are errors carrying file, line and field path. yaml.v3's own
// KnownFields gives the line but not the path, and stops at the first error.
type decoder struct {
	file string
	tree *tree // the file each node came from, for overlays
	errs []error
}

func (d *decoder) fileOf(n *yaml.Node) string {
	if d.tree == nil {
		return d.file
	}
	return d.tree.fileOf(n, d.file)
}

func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) {
	d.errs = append(d.errs, &FieldError{File: d.fileOf(n), Line: n.Line, Path: path, Msg: fmt.Sprintf(format, args...)})
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "null"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "an alias"
}

func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return
		}
		n = n.Content[0]
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // leave the zero value; required fields are checked later
	}
	switch v.Kind() {
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.fail(n, path, "want a list, got %s", kindName(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, c := range n.Content {
			d.decode(c, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.fail(n, path, "want a mapping, got %s", kindName(n))
			return
		}
		m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			ev := reflect.New(v.Type().Elem()).Elem()
			d.decode(val, ev, join(path, k.Value))
			m.SetMapIndex(reflect.ValueOf(k.Value), ev)
		}
		v.Set(m)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		d.decode(n, p.Elem(), path)
		v.Set(p)
	default:
		d.decodeScalar(n, v, path)
	}
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "want a mapping, got %s", kindName(n))
		return
	}
	fields := map[string]int{}
	var names []string
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
		if tag == "" || tag == "-" {
			continue
		}
		fields[tag] = i
		names = append(names, tag)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		idx, ok := fields[k.Value]
		if !ok {
			name := k.Value
			if name == "" {
				name = `""` // an empty key still needs a name in the error
			}
			d.fail(k, join(path, name), "unknown field (known: %s)", strings.Join(names, ", "))
			continue
		}
		if seen[k.Value] {
			d.fail(k, join(path, k.Value), "field given twice")
			continue
		}
		seen[k.Value] = true
		if lf := v.Field(idx); lf.Kind() == reflect.Int && t.Field(idx).Name == "Line" {
			continue
		}
		d.decode(val, v.Field(idx), join(path, k.Value))
	}
	if f, ok := t.FieldByName("Line"); ok && f.Type.Kind() == reflect.Int {
		v.FieldByIndex(f.Index).SetInt(int64(n.Line))
	}
	if f, ok := t.FieldByName("From"); ok && f.Type.Kind() == reflect.String {
		v.FieldByIndex(f.Index).SetString(d.fileOf(n))
	}
}

func (d *decoder) decodeScalar(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.ScalarNode {
		d.fail(n, path, "want %s, got %s", scalarWant(v), kindName(n))
		return
	}
	switch v.Kind() {
	case reflect.String:
		if n.Tag != "!!str" && n.Tag != "!!int" && n.Tag != "!!float" && n.Tag != "!!bool" {
			d.fail(n, path, "want a string, got %s", kindName(n))
			return
		}
		v.SetString(n.Value)
	case reflect.Bool:
		b, err := strconv.ParseBool(n.Value)
		if n.Tag != "!!bool" || err != nil {
			d.fail(n, path, "want true or false, got %s", kindName(n))
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64, reflect.Uint32, reflect.Uint64:
		// Base 0 so that file modes can be written as 0755 or 0o755.
		i, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64)
		if n.Tag != "!!int" || err != nil || (i < 0 && v.Kind() != reflect.Int && v.Kind() != reflect.Int64) {
			d.fail(n, path, "want a whole number, got %s", kindName(n))
			return
		}
		if v.Kind() == reflect.Uint32 || v.Kind() == reflect.Uint64 {
			if v.OverflowUint(uint64(i)) {
				// SetUint would keep only the low bits: 0x100000644 is not 0644.
				d.fail(n, path, "%s is too large", n.Value)
				return
			}
			v.SetUint(uint64(i))
		} else {
			v.SetInt(i)
		}
	default:
		d.fail(n, path, "unsupported field type %s", v.Type())
	}
}

func scalarWant(v reflect.Value) string {
	switch v.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	default:
		return "a whole number"
	}
}
