package debian

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
)

// Index is the merged Packages index of one suite, architecture and set of
// components, with lookups by name and by provided (virtual) name.
type Index struct {
	Suite      string   // for messages, e.g. "trixie"
	Components []string // for messages, e.g. ["main"]
	Packages   []Package

	byName    map[string][]int32
	providers map[string][]provided
}

// provided is one "Provides: name (= version)" entry of Packages[pkg].
type provided struct {
	pkg     int32
	version string // empty for an unversioned provide
}

// NewIndex indexes pkgs (in archive order) for the resolver.
func NewIndex(suite string, components []string, pkgs []Package) *Index {
	idx := &Index{
		Suite:      suite,
		Components: components,
		Packages:   pkgs,
		byName:     make(map[string][]int32, len(pkgs)),
		providers:  map[string][]provided{},
	}
	for i := range pkgs {
		p := &pkgs[i]
		idx.byName[p.Name] = append(idx.byName[p.Name], int32(i))
		if p.Provides != "" {
			for _, pr := range splitProvides(p.Provides) {
				idx.providers[pr.name] = append(idx.providers[pr.name], provided{pkg: int32(i), version: pr.version})
			}
		}
	}
	return idx
}

// Essential returns the names of the packages marked Essential: yes, sorted.
// Debian packages do not declare dependencies on them, so a root filesystem
// normally starts from this set.
func (idx *Index) Essential() []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range idx.Packages {
		if p.Essential && !seen[p.Name] {
			seen[p.Name] = true
			out = append(out, p.Name)
		}
	}
	sort.Strings(out)
	return out
}

// Lookup returns every package named name, in archive order.
func (idx *Index) Lookup(name string) []Package {
	var out []Package
	for _, i := range idx.byName[name] {
		out = append(out, idx.Packages[i])
	}
	return out
}

type provideEntry struct{ name, version string }

// splitProvides parses "a, b (= 1.0), c:any" by hand: it is read for every
// package of the index, so it must be cheap, and its grammar is tiny.
func splitProvides(s string) []provideEntry {
	var out []provideEntry
	for s != "" {
		var item string
		item, s, _ = strings.Cut(s, ",")
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name := item
		var version string
		if i := strings.IndexAny(item, " (:"); i >= 0 {
			name = item[:i]
			if j := strings.IndexByte(item, '('); j >= 0 {
				rel := strings.TrimSuffix(strings.TrimSpace(item[j+1:]), ")")
				rel = strings.TrimSpace(rel)
				if strings.HasPrefix(rel, "=") {
					version = strings.TrimSpace(rel[1:])
				}
			}
		}
		out = append(out, provideEntry{name: name, version: version})
	}
	return out
}

// ParseIndex parses a decompressed Packages file. It is a hand-written line
// scanner rather than a generic deb822 parser because a full index is tens of
// megabytes, most of it descriptions that drover never reads.
func ParseIndex(data []byte) ([]Package, error) {
	pkgs := make([]Package, 0, bytes.Count(data, []byte("\nPackage: "))+1)
	intern := map[string]string{}
	in := func(b []byte) string {
		if s, ok := intern[string(b)]; ok {
			return s
		}
		s := string(b)
		intern[s] = s
		return s
	}

	var (
		cur     Package
		have    bool
		cont    *string // kept field that continuation lines extend
		lineNo  int
		startNo int
	)
	finish := func() error {
		if cur.Name == "" {
			return fmt.Errorf("stanza at line %d has no Package field", startNo)
		}
		if cur.Version == "" {
			return fmt.Errorf("package %s (line %d) has no Version field", cur.Name, startNo)
		}
		pkgs = append(pkgs, cur)
		cur, have, cont = Package{}, false, nil
		return nil
	}

	for len(data) > 0 {
		var line []byte
		if nl := bytes.IndexByte(data, '\n'); nl >= 0 {
			line, data = data[:nl], data[nl+1:]
		} else {
			line, data = data, nil
		}
		lineNo++
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		if len(line) == 0 {
			if have {
				if err := finish(); err != nil {
					return nil, err
				}
			}
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			if cont != nil {
				if v := bytes.TrimSpace(line); len(v) > 0 {
					if *cont != "" { // "Depends:" alone, the list on the lines below
						*cont += " "
					}
					*cont += string(v)
				}
			}
			continue
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			return nil, fmt.Errorf("line %d: %q is not a field", lineNo, truncate(line))
		}
		if !have {
			have, startNo = true, lineNo
		}
		key, val := line[:colon], bytes.TrimSpace(line[colon+1:])
		cont = nil
		var err error
		switch string(key) {
		case "Package":
			cur.Name = string(val)
		case "Version":
			cur.Version = string(val)
		case "Architecture":
			cur.Architecture = in(val)
		case "Filename":
			cur.Filename = string(val)
		case "Size":
			cur.Size, err = atoi(val)
		case "SHA256":
			cur.SHA256 = string(val)
		case "Source":
			cur.Source = in(val)
		case "Section":
			cur.Section = in(val)
		case "Priority":
			cur.Priority = in(val)
		case "Essential":
			cur.Essential = string(val) == "yes"
		case "Multi-Arch":
			cur.MultiArch = in(val)
		case "Installed-Size":
			cur.InstalledSize, err = atoi(val)
		case "Depends":
			cur.Depends, cont = string(val), &cur.Depends
		case "Pre-Depends":
			cur.PreDepends, cont = string(val), &cur.PreDepends
		case "Provides":
			cur.Provides, cont = string(val), &cur.Provides
		case "Conflicts":
			cur.Conflicts, cont = string(val), &cur.Conflicts
		case "Breaks":
			cur.Breaks, cont = string(val), &cur.Breaks
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: %s: %w", lineNo, key, err)
		}
	}
	if have {
		if err := finish(); err != nil {
			return nil, err
		}
	}
	return pkgs, nil
}

func atoi(b []byte) (int64, error) {
	if len(b) == 0 || len(b) > 18 {
		return 0, fmt.Errorf("bad number %q", truncate(b))
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("bad number %q", truncate(b))
		}
		n = n*10 + int64(c-'0')
	}
	return n, nil
}

func truncate(b []byte) string {
	if len(b) > 60 {
		return string(b[:60]) + "…"
	}
	return string(b)
}
