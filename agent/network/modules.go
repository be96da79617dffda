package network

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// RequiredModules are the kernel modules Kubernetes networking needs:
// overlay for containerd's overlayfs snapshotter, br_netfilter so bridged pod
// traffic passes through iptables (kube-proxy, network policy).
func RequiredModules() []string {
	return []string{"overlay", "br_netfilter"}
}

// ModuleIndex is the text module index of one kernel: modules.dep and
// modules.builtin, keyed by module name.
type ModuleIndex struct {
	Deps    map[string]ModuleDep
	Builtin map[string]bool
}

// ModuleDep is one line of modules.dep: a module file and every module it
// needs, as paths relative to the kernel's module directory.
type ModuleDep struct {
	Path string
	Deps []string
}

// ModuleFile is one step of a load order.
type ModuleFile struct {
	Name    string
	Path    string // relative to the module directory; "" when Builtin
	For     string // the requested module that needs this one
	Builtin bool   // part of the kernel image: nothing to load
}

// ModuleName is the name of the module in file p: the base name without
// ".ko" and a compression suffix, with '-' written '_' as the kernel does.
func ModuleName(p string) string {
	base := path.Base(p)
	if i := strings.Index(base, ".ko"); i >= 0 {
		base = base[:i]
	}
	return strings.ReplaceAll(base, "-", "_")
}

// ParseModuleIndex reads modules.dep ("path: dep1 dep2 …" per line) and
// modules.builtin (one path per line); builtin may be nil.
func ParseModuleIndex(dep, builtin io.Reader) (ModuleIndex, error) {
	ix := ModuleIndex{Deps: map[string]ModuleDep{}, Builtin: map[string]bool{}}
	n := 0
	err := eachLine(dep, func(line string) error {
		n++
		p, deps, ok := strings.Cut(line, ":")
		p = strings.TrimSpace(p)
		if !ok || p == "" {
			return fmt.Errorf("modules.dep line %d %q: want \"path: dependencies\"", n, line)
		}
		name := ModuleName(p)
		if _, dup := ix.Deps[name]; !dup { // modprobe uses the first entry too
			ix.Deps[name] = ModuleDep{Path: p, Deps: strings.Fields(deps)}
		}
		return nil
	})
	if err != nil {
		return ModuleIndex{}, fmt.Errorf("reading modules.dep: %w", err)
	}
	if builtin != nil {
		err = eachLine(builtin, func(line string) error {
			ix.Builtin[ModuleName(line)] = true
			return nil
		})
		if err != nil {
			return ModuleIndex{}, fmt.Errorf("reading modules.builtin: %w", err)
		}
	}
	return ix, nil
}

// eachLine calls f on every line of r that is neither blank nor a comment.
func eachLine(r io.Reader, f func(string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := f(line); err != nil {
			return err
		}
	}
	return sc.Err()
}

// LoadOrder lists what loading names takes, dependencies before the modules
// that need them and each module once. modules.dep lists a module's whole
// dependency closure with the most basic last, but each dependency's own line
// is followed as well so the order does not rely on that.
func (ix ModuleIndex) LoadOrder(names ...string) ([]ModuleFile, error) {
	const visiting, done = 1, 2
	state := map[string]int{}
	var out []ModuleFile
	var visit func(name, req string) error
	visit = func(name, req string) error {
		switch state[name] {
		case done:
			return nil
		case visiting:
			return fmt.Errorf("kernel module %s: modules.dep has a dependency cycle through %s", req, name)
		}
		if ix.Builtin[name] {
			state[name] = done
			out = append(out, ModuleFile{Name: name, For: req, Builtin: true})
			return nil
		}
		e, ok := ix.Deps[name]
		if !ok {
			if name == req {
				return fmt.Errorf("kernel module %s is in neither modules.dep nor modules.builtin", name)
			}
			return fmt.Errorf("kernel module %s needs %s, which is in neither modules.dep nor modules.builtin", req, name)
		}
		state[name] = visiting
		for i := len(e.Deps) - 1; i >= 0; i-- {
			if err := visit(ModuleName(e.Deps[i]), req); err != nil {
				return err
			}
		}
		state[name] = done
		out = append(out, ModuleFile{Name: name, Path: e.Path, For: req})
		return nil
	}
	for _, n := range names {
		n = ModuleName(n)
		if err := visit(n, n); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Modules loads kernel modules from the module directory of a kernel under a
// root, without modprobe.
type Modules struct {
	Root    string // "/" on a node
	Release string // kernel release (uname -r); the running kernel's when empty
	// Insert loads one module file given its full path; finit_module(2) when
	// nil. An error wrapping EEXIST means it is already loaded.
	Insert func(path string) error
	Logf   Logf
}

// LoadModules loads names and their dependencies for the running kernel from
// root's module directory.
func LoadModules(root string, names ...string) error {
	return Modules{Root: root}.Load(names...)
}

// Load loads names and their dependencies. A module already loaded or built
// into the kernel is fine.
func (m Modules) Load(names ...string) error {
	release := m.Release
	if release == "" {
		var u unix.Utsname
		if err := unix.Uname(&u); err != nil {
			return fmt.Errorf("network: loading kernel modules %s: uname: %w", strings.Join(names, ", "), err)
		}
		release = unix.ByteSliceToString(u.Release[:])
	}
	dir, ix, err := m.index(release)
	if err != nil {
		return fmt.Errorf("network: loading kernel modules %s: %w", strings.Join(names, ", "), err)
	}
	order, err := ix.LoadOrder(names...)
	if err != nil {
		return fmt.Errorf("network: loading kernel modules for kernel %s from %s: %w: build the image with a kernel that provides it",
			release, dir, err)
	}
	insert := m.Insert
	if insert == nil {
		insert = finitModule
	}
	for _, f := range order {
		what := f.Name
		if f.For != f.Name {
			what += " (needed by " + f.For + ")"
		}
		if f.Builtin {
			m.Logf.printf("network: kernel module %s is built in", what)
			continue
		}
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		if path.IsAbs(f.Path) { // depmod of old kmod wrote absolute paths
			p = filepath.Join(m.Root, filepath.FromSlash(f.Path))
		}
		switch err := insert(p); {
		case errors.Is(err, unix.EEXIST):
			m.Logf.printf("network: kernel module %s already loaded", what)
		case err != nil:
			return fmt.Errorf("network: loading kernel module %s from %s: %w", what, p, err)
		default:
			m.Logf.printf("network: loaded kernel module %s", what)
		}
	}
	return nil
}

// index finds the module directory of release under the root (merged /usr
// first) and reads its text index.
func (m Modules) index(release string) (string, ModuleIndex, error) {
	var dir string
	for _, d := range []string{"usr/lib/modules", "lib/modules"} {
		c := filepath.Join(m.Root, d, release)
		if _, err := os.Stat(filepath.Join(c, "modules.dep")); err == nil {
			dir = c
			break
		}
	}
	if dir == "" {
		return "", ModuleIndex{}, fmt.Errorf("no modules.dep for kernel %s under %s: the image's kernel is not the running kernel, or its module index was not built",
			release, filepath.Join(m.Root, "usr/lib/modules", release))
	}
	dep, err := os.Open(filepath.Join(dir, "modules.dep"))
	if err != nil {
		return "", ModuleIndex{}, err
	}
	defer dep.Close()
	var builtin io.Reader
	b, err := os.Open(filepath.Join(dir, "modules.builtin"))
	switch {
	case err == nil:
		defer b.Close()
		builtin = b
	case !errors.Is(err, fs.ErrNotExist):
		return "", ModuleIndex{}, err
	}
	ix, err := ParseModuleIndex(dep, builtin)
	if err != nil {
		return "", ModuleIndex{}, fmt.Errorf("%s: %w", dir, err)
	}
	return dir, ix, nil
}

// finitModule loads the module file at p. Compressed modules are handed to
// the kernel as they are (MODULE_INIT_COMPRESSED_FILE), so the agent needs no
// xz or zstd code.
func finitModule(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	flags := 0
	compressed := strings.HasSuffix(p, ".xz") || strings.HasSuffix(p, ".zst") || strings.HasSuffix(p, ".gz")
	if compressed {
		flags |= unix.MODULE_INIT_COMPRESSED_FILE
	}
	err = unix.FinitModule(int(f.Fd()), "", flags)
	if compressed && errors.Is(err, unix.EOPNOTSUPP) {
		return fmt.Errorf("finit_module: the kernel cannot decompress modules (CONFIG_MODULE_DECOMPRESS): %w", err)
	}
	if err != nil {
		return fmt.Errorf("finit_module: %w", err)
	}
	return nil
}
