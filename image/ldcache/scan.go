package ldcache

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"path"
	"strings"

	"github.com/drover-os/drover/image/tree"
)

// systemDirs are the directories Debian's ldconfig always scans after those
// of /etc/ld.so.conf (`ldconfig -v` prints them as "from <builtin>"), per
// image architecture.
var systemDirs = map[string][]string{
	"amd64": {"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib", "/usr/lib"},
	"arm64": {"/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib", "/usr/lib"},
}

// archOf is the ELF machine of each image architecture and the entry flags
// ldconfig gives its libraries (64-bit libraries are always libc6).
var archOf = map[string]struct {
	machine elf.Machine
	flags   int32
}{
	"amd64": {elf.EM_X86_64, FlagELFLibc6 | FlagX8664Lib64},
	"arm64": {elf.EM_AARCH64, FlagELFLibc6 | FlagAArch64},
}

// Build scans t as `ldconfig -X -r ROOT` would — the directories of
// /etc/ld.so.conf (with its include globs), then the system directories,
// each real directory once under the first name it was reached by — and
// returns the cache entries in the dynamic linker's order, plus the
// directories scanned.
func Build(t *tree.Tree, arch string) ([]Entry, []string, error) {
	sys, ok := systemDirs[arch]
	if !ok {
		return nil, nil, fmt.Errorf("ld.so.cache: no dynamic linker layout known for architecture %q (known: amd64, arm64)", arch)
	}
	dirs := append(confDirs(t, "/etc/ld.so.conf", 0), sys...)
	seen := map[string]bool{}
	var scanned []string
	var entries []Entry
	for _, d := range dirs {
		real, n := resolve(t, d)
		if n == nil || n.Kind != tree.Dir || seen[real] {
			continue
		}
		seen[real] = true
		scanned = append(scanned, d)
		es, err := scanDir(t, d, real, arch)
		if err != nil {
			return nil, nil, err
		}
		entries = append(entries, es...)
	}
	Sort(entries)
	return entries, scanned, nil
}

// confDirs reads an ld.so.conf: one directory a line, '#' comments,
// "include GLOB..." lines read in glob order.
func confDirs(t *tree.Tree, file string, depth int) []string {
	n := t.Get(file)
	if n == nil || n.Kind != tree.Regular || depth > 8 {
		return nil
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(n.Data))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		line = strings.TrimSpace(line)
		switch {
		case line == "":
		case strings.HasPrefix(line, "include") && len(line) > 7 && (line[7] == ' ' || line[7] == '\t'):
			for _, pat := range strings.Fields(line[8:]) {
				if !path.IsAbs(pat) {
					pat = path.Join(path.Dir(file), pat)
				}
				for _, f := range t.Glob(tree.Canonical(pat)) {
					out = append(out, confDirs(t, f, depth+1)...)
				}
			}
		case strings.HasPrefix(strings.ToLower(line), "hwcap") && len(line) > 5 && (line[5] == ' ' || line[5] == '\t'):
			// ignored by ldconfig too
		default:
			out = append(out, strings.TrimRight(path.Clean(line), "/"))
		}
	}
	return out
}

type lib struct {
	name, soname string
	isLink       bool
}

// scanDir does ldconfig's search_dir for one directory (named dir, real
// path real): every "lib*" or "ld-*" name containing ".so" that is an ELF
// shared object of the image's architecture, one per soname, a file
// preferred to a link and otherwise the highest version.
func scanDir(t *tree.Tree, dir, real, arch string) ([]Entry, error) {
	want := archOf[arch]
	var libs []*lib
	for _, p := range t.Glob(real + "/*") {
		name := path.Base(p)
		n := t.Get(p)
		if name == "glibc-hwcaps" && n.Kind == tree.Dir {
			return nil, fmt.Errorf("ld.so.cache: %s/glibc-hwcaps holds optimised library variants, which drover's cache generator does not support: remove them from the image or teach image/ldcache the hwcaps extension", dir)
		}
		if !(strings.HasPrefix(name, "lib") || strings.HasPrefix(name, "ld-")) || !strings.Contains(name, ".so") ||
			strings.HasSuffix(name, ".#prelink#") || strings.Contains(name, ".#prelink#.") {
			continue
		}
		isLink := n.Kind == tree.Symlink
		_, target := resolve(t, p)
		if target == nil || target.Kind != tree.Regular {
			continue // dangling, or not a file
		}
		soname, ok := sharedObject(target.Data, want.machine)
		if !ok {
			continue
		}
		if soname == "" {
			soname = name
		}
		// A link named after the soname, or the development link
		// libfoo.so for soname libfoo.so.1, stands for itself; any other
		// link is treated like the file it points to.
		if isLink && name != soname && !(strings.HasSuffix(name, ".so") && strings.HasPrefix(soname, name)) {
			isLink = false
		}
		if isLink {
			soname = name
		}
		var found *lib
		for _, l := range libs {
			if l.soname == soname {
				found = l
				break
			}
		}
		if found == nil {
			libs = append(libs, &lib{name: name, soname: soname, isLink: isLink})
			continue
		}
		if (!isLink && found.isLink) || (isLink == found.isLink && LibCompare(found.name, name) < 0) {
			found.name, found.isLink = name, isLink
		}
	}
	out := make([]Entry, 0, len(libs))
	for _, l := range libs {
		out = append(out, Entry{Soname: l.soname, Path: dir + "/" + l.soname, Flags: want.flags})
	}
	return out, nil
}

// sharedObject reports whether data is an ELF shared object (ET_DYN with a
// dynamic section) for machine, and its DT_SONAME.
func sharedObject(data []byte, machine elf.Machine) (string, bool) {
	if len(data) < 4 || string(data[:4]) != elf.ELFMAG {
		return "", false // e.g. a linker script such as libc.so
	}
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return "", false
	}
	defer f.Close()
	if f.Class != elf.ELFCLASS64 || f.Machine != machine || f.Type != elf.ET_DYN {
		return "", false
	}
	hasDynamic := false
	for _, p := range f.Progs {
		if p.Type == elf.PT_DYNAMIC && p.Filesz > 0 {
			hasDynamic = true
		}
	}
	if !hasDynamic {
		return "", false
	}
	names, err := f.DynString(elf.DT_SONAME)
	if err != nil || len(names) == 0 {
		return "", true
	}
	return names[0], true
}

// resolve follows symlinks in t (relative and absolute, through
// merged-/usr aliases) and returns the final path and node, or nil.
func resolve(t *tree.Tree, p string) (string, *tree.Node) {
	p = tree.Canonical(p)
	for hops := 0; hops < 40; hops++ {
		// Resolve the parents first: a directory on the way may be a link.
		parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
		cur := "/"
		changed := false
		for i, part := range parts {
			next := tree.Canonical(path.Join(cur, part))
			n := t.Get(next)
			if n == nil {
				return p, nil
			}
			if n.Kind == tree.Symlink {
				target := n.Target
				if !path.IsAbs(target) {
					target = path.Join(cur, target)
				}
				p = tree.Canonical(path.Join(append([]string{target}, parts[i+1:]...)...))
				changed = true
				break
			}
			cur = next
		}
		if !changed {
			return p, t.Get(p)
		}
	}
	return p, nil
}
