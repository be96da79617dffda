package kmod

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// LoadOrder returns the module files (paths relative to
// /usr/lib/modules/<kver>) to insert, in order, so that each of names is
// loaded: what `modprobe --show-depends` prints for each name in turn, each
// module once, built-in modules left out.
//
// A name is a module name or an alias ('-' and '_' are the same), looked up
// as libkmod does: module names first, then "symbol:" names, then aliases
// (every module an alias matches), then built-in modules. Dependencies come
// before their users, deepest first, in modprobe's order. Soft dependencies
// of every module on the way are followed too, pre: before the module and
// post: after it; like libkmod (kmod issue #33) only the first softdep entry
// of a module counts, and an unknown soft dependency is skipped. A name that
// is neither a module nor built in is an error.
func (idx *Index) LoadOrder(names []string) ([]string, error) {
	var out []string
	added := map[*module]bool{}
	for _, name := range names {
		mods, builtin, err := idx.lookup(name)
		if err != nil {
			return nil, err
		}
		if mods == nil && !builtin {
			return nil, fmt.Errorf("module %q: not a module, alias or built-in module of this kernel: check the name and the kernel package", name)
		}
		for _, m := range mods {
			p := &prober{idx: idx, visited: map[*module]bool{}}
			p.probe(m)
			for _, x := range p.list {
				if !added[x] {
					added[x] = true
					out = append(out, x.path)
				}
			}
		}
	}
	return out, nil
}

// IsBuiltin reports whether name (a module name or alias) is built into the
// kernel rather than shipped as a module.
func (idx *Index) IsBuiltin(name string) bool {
	mods, builtin, err := idx.lookup(name)
	return err == nil && mods == nil && builtin
}

// lookup resolves name the way kmod_module_new_from_lookup does, stopping at
// the first source that knows it. builtin is true when only the kernel
// itself provides it.
func (idx *Index) lookup(name string) (mods []*module, builtin bool, err error) {
	alias, ok := normalizeAlias(name)
	if !ok {
		return nil, false, fmt.Errorf("module %q: unbalanced brackets", name)
	}
	if m := idx.byName[alias]; m != nil {
		return []*module{m}, false, nil
	}
	if sym, ok := strings.CutPrefix(alias, "symbol:"); ok {
		if m := idx.symbols[sym]; m != nil {
			return []*module{m}, false, nil
		}
	}
	for _, m := range idx.modules {
		for _, a := range m.info.Aliases {
			if pat, ok := normalizeAlias(a); ok && fnmatch(pat, alias) && !slices.Contains(mods, m) {
				mods = append(mods, m)
				break
			}
		}
	}
	if mods != nil {
		// libkmod returns alias matches by priority, the module's position.
		slices.SortFunc(mods, func(a, b *module) int { return cmp.Compare(a.idx, b.idx) })
		return mods, false, nil
	}
	if idx.builtinNames[alias] {
		return nil, true, nil
	}
	for _, info := range idx.builtinInfo {
		for _, a := range info.Aliases { // map order is fine: any match will do
			if pat, ok := normalizeAlias(a); ok && fnmatch(pat, alias) {
				return nil, true, nil
			}
		}
	}
	return nil, false, nil
}

// prober is libkmod's kmod_module_get_probe_list for one module.
type prober struct {
	idx     *Index
	visited map[*module]bool
	list    []*module
}

func (p *prober) probe(m *module) {
	if p.visited[m] {
		return
	}
	p.visited[m] = true
	// libkmod reads the modules.dep line back to front, so the deepest
	// dependency comes first; each one brings its soft dependencies, but
	// not its own dependencies again (they are on the same line).
	for i := len(m.all) - 1; i >= 0; i-- {
		p.withSoftdeps(m.all[i])
	}
	p.withSoftdeps(m)
}

func (p *prober) withSoftdeps(m *module) {
	pre, post := p.softdeps(m)
	for _, d := range pre {
		p.probe(d)
	}
	p.list = append(p.list, m)
	for _, d := range post {
		p.probe(d)
	}
}

// softdeps resolves the first softdep entry of m; names that are built in
// or unknown add nothing, as in modprobe.
func (p *prober) softdeps(m *module) (pre, post []*module) {
	for _, kv := range m.info.modinfo {
		if kv.key != "softdep" {
			continue
		}
		preNames, postNames := parseSoftdep(kv.value)
		for _, n := range preNames {
			mods, _, _ := p.idx.lookup(n)
			pre = append(pre, mods...)
		}
		for _, n := range postNames {
			mods, _, _ := p.idx.lookup(n)
			post = append(post, mods...)
		}
		break
	}
	return pre, post
}

// fnmatch is fnmatch(3) without flags, the matcher libkmod applies to alias
// patterns: '*' and '?' match any characters, '[...]' a class ('!' or '^'
// negates, '-' ranges), '\' quotes the next character.
func fnmatch(pat, s string) bool {
	for len(pat) > 0 {
		switch pat[0] {
		case '*':
			for len(pat) > 0 && pat[0] == '*' {
				pat = pat[1:]
			}
			if pat == "" {
				return true
			}
			for i := 0; i <= len(s); i++ {
				if fnmatch(pat, s[i:]) {
					return true
				}
			}
			return false
		case '?':
			if s == "" {
				return false
			}
			pat, s = pat[1:], s[1:]
		case '[':
			if s == "" {
				return false
			}
			ok, rest, valid := matchClass(pat, s[0])
			if !valid {
				// An unterminated '[' is an ordinary character.
				if s[0] != '[' {
					return false
				}
				pat, s = pat[1:], s[1:]
				continue
			}
			if !ok {
				return false
			}
			pat, s = rest, s[1:]
		default:
			c := pat[0]
			if c == '\\' && len(pat) > 1 {
				pat = pat[1:]
				c = pat[0]
			}
			if s == "" || s[0] != c {
				return false
			}
			pat, s = pat[1:], s[1:]
		}
	}
	return s == ""
}

// matchClass matches c against the class at the start of pat ("[...]") and
// returns the pattern after it; valid is false if the class is unterminated.
func matchClass(pat string, c byte) (ok bool, rest string, valid bool) {
	i := 1
	negate := i < len(pat) && (pat[i] == '!' || pat[i] == '^')
	if negate {
		i++
	}
	matched := false
	for first := true; ; first = false {
		if i >= len(pat) {
			return false, "", false
		}
		if pat[i] == ']' && !first {
			i++
			break
		}
		lo := pat[i]
		if lo == '\\' && i+1 < len(pat) {
			i++
			lo = pat[i]
		}
		i++
		hi := lo
		if i+1 < len(pat) && pat[i] == '-' && pat[i+1] != ']' {
			hi = pat[i+1]
			if hi == '\\' && i+2 < len(pat) {
				hi = pat[i+2]
				i++
			}
			i += 2
		}
		if lo <= c && c <= hi {
			matched = true
		}
	}
	return matched != negate, pat[i:], true
}
