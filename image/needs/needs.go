// Package needs checks that nothing installed in an image tree needs, at run
// time, a path the build left out (a file of an excluded package, or a path
// a recipe's remove entry deleted). "Needs" is what can be read off the
// files themselves, without running anything from the image:
//
//   - an ELF file's program interpreter (PT_INTERP) and each DT_NEEDED
//     library, looked up in its DT_RUNPATH/DT_RPATH and the default library
//     directories, as ld.so would;
//   - an executable script's #! interpreter (through /usr/bin/env: the
//     command, looked up in the default PATH);
//   - the Exec*= commands of every systemd unit that is enabled or wanted
//     (a symlink in a .wants/ or .requires/ directory, unless masked), and
//     the PAM service file its PAMName= names;
//   - every PAM module an /etc/pam.d service file names (not "-" lines,
//     which PAM skips when the module is missing).
//
// A need is a problem only when the tree lacks the path and a left-out path
// would have supplied it: what was never in the closure is not this
// check's business.
package needs

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/drover-os/drover/image/tree"
)

// Problem is one installed file that needs a left-out path.
type Problem struct {
	File  string // the installed file that has the need
	Owner string // what installed it (package name, "recipe", …)
	Needs string // what it needs, e.g. "libklibc-….so (DT_NEEDED)"
	Path  string // the left-out path that supplied it
	By    string // what left it out, e.g. "exclude[3] libklibc"
}

func (p Problem) String() string {
	return fmt.Sprintf("%s (from %s) needs %s, which only %s at %s provided: keep it (drop the recipe entry) or leave out %s too",
		p.File, p.Owner, p.Needs, p.By, p.Path, p.File)
}

// Default directories of the dynamic loader and of PATH (systemd's fixed
// search path for Exec*= is the same list).
var (
	libDirs  = []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib", "/usr/lib64"}
	pathDirs = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin"}
	unitDirs = []string{"/etc/systemd/system", "/usr/lib/systemd/system"}
	pamDirs  = []string{"/etc/pam.d", "/usr/lib/pam.d"}
)

// Check returns every need of t's files that only a left-out path met.
// leftOut maps each left-out path (canonical, see tree.Canonical) to what
// left it out. Problems are sorted by file.
func Check(t *tree.Tree, leftOut map[string]string) []Problem {
	c := &checker{t: t, leftOut: leftOut, seen: map[string]bool{}}
	t.Walk(func(n *tree.Node) error {
		if n.Kind == tree.Regular {
			c.file(n)
		}
		return nil
	})
	c.units()
	sort.SliceStable(c.out, func(i, j int) bool { return c.out[i].File < c.out[j].File })
	return c.out
}

type checker struct {
	t       *tree.Tree
	leftOut map[string]string
	out     []Problem
	seen    map[string]bool // file + need, so a need repeated in a file is one problem
}

// need records a problem when none of the candidate paths exists in the
// tree and one of them was left out.
func (c *checker) need(n *tree.Node, what string, candidates ...string) {
	for _, p := range candidates {
		if resolve(c.t, p) != nil {
			return
		}
	}
	for _, p := range candidates {
		if by, ok := c.leftOut[tree.Canonical(p)]; ok {
			key := n.Path + "\x00" + what
			if c.seen[key] {
				return
			}
			c.seen[key] = true
			c.out = append(c.out, Problem{File: n.Path, Owner: n.Owner, Needs: what, Path: tree.Canonical(p), By: by})
			return
		}
	}
}

func (c *checker) file(n *tree.Node) {
	switch {
	case bytes.HasPrefix(n.Data, []byte("\x7fELF")):
		c.elf(n)
	case bytes.HasPrefix(n.Data, []byte("#!")) && n.Mode&0o111 != 0:
		c.script(n)
	case strings.HasPrefix(n.Path, "/etc/pam.d/") || strings.HasPrefix(n.Path, "/usr/lib/pam.d/"):
		c.pam(n)
	}
}

func (c *checker) elf(n *tree.Node) {
	f, err := elf.NewFile(bytes.NewReader(n.Data))
	if err != nil {
		return // not an ELF the loader could run either
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err == nil {
				interp := string(bytes.TrimRight(b, "\x00"))
				c.need(n, interp+" (PT_INTERP)", interp)
			}
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil || len(libs) == 0 {
		return
	}
	var dirs []string
	for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
		vals, _ := f.DynString(tag)
		for _, v := range vals {
			for _, d := range strings.Split(v, ":") {
				dirs = append(dirs, strings.ReplaceAll(d, "$ORIGIN", path.Dir(n.Path)))
			}
		}
	}
	dirs = append(dirs, libDirs...)
	for _, lib := range libs {
		if strings.Contains(lib, "/") {
			c.need(n, lib+" (DT_NEEDED)", lib)
			continue
		}
		var cands []string
		for _, d := range dirs {
			cands = append(cands, path.Join(d, lib))
		}
		c.need(n, lib+" (DT_NEEDED)", cands...)
	}
}

func (c *checker) script(n *tree.Node) {
	line, _, _ := bytes.Cut(n.Data, []byte("\n"))
	fields := strings.Fields(strings.TrimPrefix(string(line), "#!"))
	if len(fields) == 0 {
		return
	}
	interp := fields[0]
	c.need(n, interp+" (#! interpreter)", interp)
	if path.Base(interp) == "env" {
		for _, a := range fields[1:] {
			if !strings.HasPrefix(a, "-") && !strings.Contains(a, "=") {
				c.command(n, a, "#!"+interp+" "+a)
				break
			}
		}
	}
}

// command needs an executable: an absolute path, or a name looked up in
// the default PATH.
func (c *checker) command(n *tree.Node, cmd, how string) {
	if path.IsAbs(cmd) {
		c.need(n, cmd+" ("+how+")", cmd)
		return
	}
	var cands []string
	for _, d := range pathDirs {
		cands = append(cands, path.Join(d, cmd))
	}
	c.need(n, cmd+" ("+how+")", cands...)
}

func (c *checker) pam(n *tree.Node) {
	sc := bufio.NewScanner(bytes.NewReader(n.Data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 || strings.HasPrefix(f[0], "#") || strings.HasPrefix(f[0], "-") || strings.HasPrefix(f[0], "@") {
			continue
		}
		rest := f[2:]
		if strings.HasPrefix(f[1], "[") { // control [value=action ...] spans fields
			for len(rest) > 0 && !strings.HasSuffix(f[1], "]") {
				f[1], rest = f[1]+" "+rest[0], rest[1:]
			}
		}
		if len(rest) == 0 || !strings.HasSuffix(rest[0], ".so") {
			continue
		}
		mod := rest[0]
		if !path.IsAbs(mod) {
			var cands []string
			for _, d := range libDirs {
				cands = append(cands, path.Join(d, "security", mod))
			}
			c.need(n, mod+" (PAM module)", cands...)
			continue
		}
		c.need(n, mod+" (PAM module)", mod)
	}
}

// units checks every enabled or wanted unit that is not masked.
func (c *checker) units() {
	names := map[string]bool{}
	for _, d := range unitDirs {
		for _, p := range append(c.t.Glob(d+"/*.wants/*"), c.t.Glob(d+"/*.requires/*")...) {
			names[path.Base(p)] = true
		}
	}
	for _, name := range sortedKeys(names) {
		unit := c.unitFile(name)
		if unit == nil {
			continue
		}
		files := []*tree.Node{unit}
		for _, d := range unitDirs {
			for _, p := range c.t.Glob(d + "/" + name + ".d/*.conf") {
				if n := resolve(c.t, p); n != nil && n.Kind == tree.Regular {
					files = append(files, n)
				}
			}
		}
		for _, f := range files {
			c.unitNeeds(f)
		}
	}
}

// unitFile finds name (or its template, for an instance) in the unit
// directories; nil when it is missing or masked.
func (c *checker) unitFile(name string) *tree.Node {
	cands := []string{name}
	if at := strings.Index(name, "@"); at > 0 && !strings.HasPrefix(name[at:], "@.") {
		cands = append(cands, name[:at+1]+name[strings.LastIndex(name, "."):])
	}
	for _, cand := range cands {
		for _, d := range unitDirs {
			p := d + "/" + cand
			if l := c.t.Get(p); l != nil && l.Kind == tree.Symlink && l.Target == "/dev/null" {
				return nil // masked
			}
			if n := resolve(c.t, p); n != nil && n.Kind == tree.Regular {
				return n
			}
		}
	}
	return nil
}

var execKeys = []string{"ExecCondition", "ExecStartPre", "ExecStart", "ExecStartPost", "ExecReload", "ExecStop", "ExecStopPost"}

func (c *checker) unitNeeds(n *tree.Node) {
	sc := bufio.NewScanner(bytes.NewReader(n.Data))
	for sc.Scan() {
		key, val, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if !ok {
			continue
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if key == "PAMName" && val != "" {
			var cands []string
			for _, d := range pamDirs {
				cands = append(cands, d+"/"+val)
			}
			c.need(n, val+" (PAMName=)", cands...)
			continue
		}
		isExec := false
		for _, k := range execKeys {
			isExec = isExec || key == k
		}
		if !isExec {
			continue
		}
		cmd := strings.TrimLeft(firstField(val), "@-:+!|")
		if cmd != "" && !strings.HasPrefix(cmd, "$") {
			c.command(n, cmd, key+"=")
		}
	}
}

func firstField(s string) string {
	f := strings.Fields(s)
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// resolve follows symlinks (also in directory components) the way the
// kernel would inside the image; nil when the path does not exist.
func resolve(t *tree.Tree, p string) *tree.Node {
	for hops := 0; hops < 40; hops++ {
		p = tree.Canonical(path.Clean(p))
		parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
		cur := "/"
		redirected := false
		for i, part := range parts {
			next := path.Join(cur, part)
			n := t.Get(next)
			if n == nil {
				return nil
			}
			if n.Kind == tree.Symlink {
				target := n.Target
				if !path.IsAbs(target) {
					target = path.Join(cur, target)
				}
				p = path.Join(append([]string{target}, parts[i+1:]...)...)
				redirected = true
				break
			}
			cur = next
		}
		if !redirected {
			return t.Get(cur)
		}
	}
	return nil // a symlink loop
}
