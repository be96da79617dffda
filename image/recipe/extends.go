package recipe

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

// An overlay recipe names its base with `extends: base.yaml` and says only
// what differs. The two YAML trees are merged before decoding, so that one
// decoder and one validator see one recipe and every error still names the
// file and line the offending value was written at. The rules
// (docs/recipes.md, "Overlays"):
//
//   - a scalar in the overlay replaces the base's;
//   - mappings merge key by key;
//   - lists append the overlay's entries to the base's, skipping a scalar
//     entry the base already has;
//   - entries of go and urls (by name), files (by path), exclude (by
//     package) and remove (by glob) that name an
//     entry of the base merge into it by these same rules, in its place.
//
// An overlay cannot remove anything from its base.

// keyedLists are the top-level lists whose entries have an identity.
var keyedLists = map[string]string{"go": "name", "urls": "name", "files": "path", "exclude": "package", "remove": "glob", "images": "ref"}

// maxExtends bounds a chain of overlays; a longer one is surely a mistake.
const maxExtends = 8

// Source is one recipe file that took part in a recipe: the file itself and
// every base it extends, overlay first.
type Source struct {
	Path string
	Raw  []byte
}

// tree is a parsed recipe chain: the merged document and the file each of
// its nodes was written in.
type tree struct {
	doc     *yaml.Node
	origin  map[*yaml.Node]string
	sources []Source
}

func (t *tree) fileOf(n *yaml.Node, fallback string) string {
	if f, ok := t.origin[n]; ok {
		return f
	}
	return fallback
}

// loadTree parses data (the recipe at path) and, recursively, the recipe it
// extends, and merges them. chain holds the overlays above path, to refuse
// cycles.
func loadTree(path string, data []byte, chain []string) (*tree, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if doc.Kind == 0 {
		return nil, &FieldError{File: path, Msg: "empty recipe; it needs at least a name"}
	}
	t := &tree{doc: &doc, origin: map[*yaml.Node]string{}, sources: []Source{{Path: path, Raw: data}}}
	markOrigin(&doc, path, t.origin)
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return t, nil // the decoder reports it
	}
	var ext *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "extends" {
			ext = root.Content[i+1]
		}
	}
	if ext == nil {
		return t, nil
	}
	base, err := extendsPath(path, ext, chain)
	if err != nil {
		return nil, err
	}
	baseData, err := os.ReadFile(base)
	if err != nil {
		return nil, &FieldError{File: path, Line: ext.Line, Path: "extends", Msg: fmt.Sprintf("reading the base recipe: %v", err)}
	}
	bt, err := loadTree(base, baseData, append(chain, path))
	if err != nil {
		return nil, err
	}
	for n, f := range bt.origin {
		t.origin[n] = f
	}
	merged := t.merge(bt.doc.Content[0], root, "")
	t.doc = &yaml.Node{Kind: yaml.DocumentNode, Line: doc.Line, Column: doc.Column, Content: []*yaml.Node{merged}}
	t.sources = append(t.sources, bt.sources...)
	return t, nil
}

// extendsPath checks the extends value of the recipe at path and returns
// the base's path. The base lives beside the overlay, so that files'
// sources and keyrings resolve against one directory.
func extendsPath(path string, ext *yaml.Node, chain []string) (string, error) {
	fail := func(format string, args ...any) error {
		return &FieldError{File: path, Line: ext.Line, Path: "extends", Msg: fmt.Sprintf(format, args...)}
	}
	if ext.Kind != yaml.ScalarNode || ext.Tag != "!!str" || ext.Value == "" {
		return "", fail("want the file name of the base recipe, e.g. ecs-node.yaml, got %s", kindName(ext))
	}
	if strings.ContainsRune(ext.Value, '/') || ext.Value == "." || ext.Value == ".." {
		return "", fail("%q: name a recipe in the same directory (a file name, no path)", ext.Value)
	}
	base := filepath.Join(filepath.Dir(path), ext.Value)
	for i, c := range append(chain, path) {
		if filepath.Clean(c) == filepath.Clean(base) {
			cycle := append(append([]string(nil), chain[i:]...), path, base)
			return "", fail("%q: recipes extend each other in a cycle: %s", ext.Value, strings.Join(cycle, " → "))
		}
	}
	if len(chain)+1 >= maxExtends {
		return "", fail("%q: more than %d recipes in one extends chain", ext.Value, maxExtends)
	}
	return base, nil
}

func markOrigin(n *yaml.Node, file string, origin map[*yaml.Node]string) {
	origin[n] = file
	for _, c := range n.Content {
		markOrigin(c, file, origin)
	}
}

func deref(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		return n.Alias
	}
	return n
}

// merge returns base with over merged in by the rules above; path is the
// field path of the pair, "" at the top.
func (t *tree) merge(base, over *yaml.Node, path string) *yaml.Node {
	base, over = deref(base), deref(over)
	switch {
	case base.Kind == yaml.MappingNode && over.Kind == yaml.MappingNode:
		out := t.like(over)
		out.Content = append(out.Content, base.Content...)
		for i := 0; i+1 < len(over.Content); i += 2 {
			k, v := over.Content[i], over.Content[i+1]
			found := false
			for j := 0; j+1 < len(out.Content); j += 2 {
				if out.Content[j].Value == k.Value {
					out.Content[j], out.Content[j+1] = k, t.merge(out.Content[j+1], v, join(path, k.Value))
					found = true
					break
				}
			}
			if !found {
				out.Content = append(out.Content, k, v)
			}
		}
		return out
	case base.Kind == yaml.SequenceNode && over.Kind == yaml.SequenceNode:
		out := t.like(over)
		out.Content = append(out.Content, base.Content...)
		key := ""
		if path != "" && !strings.Contains(path, ".") {
			key = keyedLists[path]
		}
	next:
		for _, item := range over.Content {
			item = deref(item)
			for j, have := range out.Content {
				have = deref(have)
				switch {
				case key != "" && item.Kind == yaml.MappingNode && have.Kind == yaml.MappingNode &&
					keyValue(item, key) != "" && keyValue(item, key) == keyValue(have, key):
					out.Content[j] = t.merge(have, item, path+"[]")
					continue next
				case item.Kind == yaml.ScalarNode && have.Kind == yaml.ScalarNode && item.Value == have.Value:
					continue next
				}
			}
			out.Content = append(out.Content, item)
		}
		return out
	}
	return over
}

// like is a new node of over's kind, line and file.
func (t *tree) like(over *yaml.Node) *yaml.Node {
	n := &yaml.Node{Kind: over.Kind, Tag: over.Tag, Style: over.Style, Line: over.Line, Column: over.Column}
	t.origin[n] = t.origin[over]
	return n
}

func keyValue(m *yaml.Node, key string) string {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key && m.Content[i+1].Kind == yaml.ScalarNode {
			return m.Content[i+1].Value
		}
	}
	return ""
}
