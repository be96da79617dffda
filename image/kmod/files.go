package kmod

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// Files returns the index files depmod writes into /usr/lib/modules/<kver>,
// keyed by file name: modules.dep, modules.alias, modules.symbols and their
// .bin tries, modules.softdep, modules.weakdep, modules.devname,
// modules.builtin.bin and modules.builtin.alias.bin. They are byte-identical
// to what trixie's depmod (kmod 34) writes for the same tree; kmod 30 writes
// the same text files and the same tries in an older layout, and no
// modules.weakdep. The caller owns the returned map and slices.
func (idx *Index) Files() map[string][]byte {
	out := make(map[string][]byte, len(idx.files))
	for name, data := range idx.files {
		out[name] = bytes.Clone(data)
	}
	return out
}

// render produces the files once, in Build, so that a key the index format
// cannot hold is reported there.
func (idx *Index) render() (map[string][]byte, error) {
	out := map[string][]byte{
		"modules.dep":     idx.depText(),
		"modules.alias":   idx.modinfoText("# Aliases extracted from modules themselves.\n", "alias", aliasLine),
		"modules.softdep": idx.modinfoText("# Soft dependencies extracted from modules themselves.\n", "softdep", depLine("softdep")),
		"modules.weakdep": idx.modinfoText("# Weak dependencies extracted from modules themselves.\n", "weakdep", depLine("weakdep")),
		"modules.symbols": idx.symbolsText(),
		"modules.devname": idx.devnameText(),
	}
	tries := []struct {
		name  string
		build func(*trie) error
	}{
		{"modules.dep.bin", idx.depTrie},
		{"modules.alias.bin", idx.aliasTrie},
		{"modules.symbols.bin", idx.symbolsTrie},
	}
	for _, tr := range tries {
		t := &trie{}
		if err := tr.build(t); err != nil {
			return nil, fmt.Errorf("writing %s: %w", tr.name, err)
		}
		out[tr.name] = t.bytes()
	}
	var err error
	if out["modules.builtin.bin"], err = idx.builtinBin(); err != nil {
		return nil, fmt.Errorf("writing modules.builtin.bin: %w", err)
	}
	if out["modules.builtin.alias.bin"], err = idx.builtinAliasBin(); err != nil {
		return nil, fmt.Errorf("writing modules.builtin.alias.bin: %w", err)
	}
	return out, nil
}

// depLine is "path: dep dep…", the modules.dep line and the dep.bin value.
func (m *module) depLine() string {
	var b strings.Builder
	b.WriteString(m.path)
	b.WriteByte(':')
	for _, d := range m.all {
		b.WriteByte(' ')
		b.WriteString(d.path)
	}
	return b.String()
}

func (idx *Index) depText() []byte {
	var b strings.Builder
	for _, m := range idx.modules {
		b.WriteString(m.depLine())
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

func (idx *Index) depTrie(t *trie) error {
	for _, m := range idx.modules {
		if err := t.insert(m.name, m.depLine(), uint32(m.idx)); err != nil {
			return err
		}
	}
	return nil
}

func aliasLine(m *module, value string) string { return "alias " + value + " " + m.name }

func depLine(kind string) func(*module, string) string {
	return func(m *module, value string) string { return kind + " " + m.name + " " + value }
}

// modinfoText writes one line per modinfo entry of key, modules in order.
func (idx *Index) modinfoText(header, key string, line func(*module, string) string) []byte {
	var b strings.Builder
	b.WriteString(header)
	for _, m := range idx.modules {
		for _, kv := range m.info.modinfo {
			if kv.key == key {
				b.WriteString(line(m, kv.value))
				b.WriteByte('\n')
			}
		}
	}
	return []byte(b.String())
}

func (idx *Index) aliasTrie(t *trie) error {
	for _, m := range idx.modules {
		for _, kv := range m.info.modinfo {
			if kv.key != "alias" {
				continue
			}
			// depmod skips an alias with unbalanced brackets with a warning.
			if a, ok := normalizeAlias(kv.value); ok {
				if err := t.insert(a, m.name, uint32(m.idx)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// normalizeAlias is libkmod's alias_normalize: '-' becomes '_' except inside
// a [...] character class; false for unbalanced brackets.
func normalizeAlias(s string) (string, bool) {
	b := []byte(s)
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '-':
			b[i] = '_'
		case ']':
			return "", false
		case '[':
			j := strings.IndexByte(s[i:], ']')
			if j < 0 {
				return "", false
			}
			i += j
		}
	}
	return string(b), true
}

// symbolNames returns the credited symbols in depmod's hash order.
func (idx *Index) symbolNames() []string {
	names := make([]string, 0, len(idx.symbols))
	for s := range idx.symbols {
		names = append(names, s)
	}
	hashOrder(names)
	return names
}

func (idx *Index) symbolsText() []byte {
	var b strings.Builder
	b.WriteString("# Aliases for symbols, used by symbol_request().\n")
	for _, s := range idx.symbolNames() {
		fmt.Fprintf(&b, "alias symbol:%s %s\n", s, idx.symbols[s].name)
	}
	return []byte(b.String())
}

func (idx *Index) symbolsTrie(t *trie) error {
	for _, s := range idx.symbolNames() {
		m := idx.symbols[s]
		if err := t.insert("symbol:"+s, m.name, uint32(m.idx)); err != nil {
			return err
		}
	}
	return nil
}

// devnameText lists modules that declare a device node (devname: alias plus
// a char-major-M-N or block-major-M-N alias), which systemd-tmpfiles creates
// so that opening the node loads the module.
func (idx *Index) devnameText() []byte {
	var b strings.Builder
	b.WriteString("# Device nodes to trigger on-demand module loading.\n")
	for _, m := range idx.modules {
		var devname, node string
		for _, kv := range m.info.modinfo {
			if kv.key != "alias" {
				continue
			}
			if d, ok := strings.CutPrefix(kv.value, "devname:"); ok {
				devname = d
			} else if n, ok := majorMinor(kv.value, "char-major-", 'c'); ok {
				node = n
			} else if n, ok := majorMinor(kv.value, "block-major-", 'b'); ok {
				node = n
			}
			if devname != "" && node != "" {
				break
			}
		}
		// depmod drops a devname without major:minor (with an error).
		if devname != "" && node != "" {
			fmt.Fprintf(&b, "%s %s %s\n", m.name, devname, node)
		}
	}
	return []byte(b.String())
}

// majorMinor parses prefix + "M-N" as sscanf("%u-%u") does (trailing text
// ignored) and returns "cM:N" or "bM:N".
func majorMinor(s, prefix string, kind byte) (string, bool) {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok {
		return "", false
	}
	maj, rest, ok := leadingUint(rest)
	if !ok || !strings.HasPrefix(rest, "-") {
		return "", false
	}
	minor, _, ok := leadingUint(rest[1:])
	if !ok {
		return "", false
	}
	return fmt.Sprintf("%c%d:%d", kind, maj, minor), true
}

func leadingUint(s string) (uint32, string, bool) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	n, err := strconv.ParseUint(s[:i], 10, 32)
	if err != nil {
		return 0, s, false
	}
	return uint32(n), s[i:], true
}

// builtinBin indexes modules.builtin by module name. depmod writes an empty
// file when the kernel has no modules.builtin, and so do we.
func (idx *Index) builtinBin() ([]byte, error) {
	if idx.builtin == nil {
		return []byte{}, nil
	}
	t := &trie{}
	for _, line := range strings.Split(strings.TrimSuffix(string(idx.builtin), "\n"), "\n") {
		// depmod rejects lines that do not start with a letter.
		if line == "" || !isAlpha(line[0]) {
			continue
		}
		if err := t.insert(modName(line), "", 0); err != nil {
			return nil, err
		}
	}
	return t.bytes(), nil
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// builtinAliasBin indexes the aliases of built-in modules (their names are
// in modules.builtin.bin). Like kmod 30, every run of strings in
// modules.builtin.modinfo counts as a module and contributes the aliases of
// its name's first run; with no strings the file is empty.
func (idx *Index) builtinAliasBin() ([]byte, error) {
	if len(idx.builtinRuns) == 0 {
		return []byte{}, nil
	}
	t := &trie{}
	for _, run := range idx.builtinRuns {
		info := idx.builtinInfo[run.Name]
		for _, kv := range info.modinfo {
			if kv.key != "alias" {
				continue
			}
			if a, ok := normalizeAlias(kv.value); ok {
				if err := t.insert(a, info.Name, 0); err != nil {
					return nil, err
				}
			}
		}
	}
	return t.bytes(), nil
}
