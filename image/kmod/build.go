package kmod

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// Index is the module graph of one kernel: what depmod computes before it
// writes its files.
type Index struct {
	modules []*module          // depmod's order: modules.order, then the rest by path
	byName  map[string]*module // module name ('_' form) → module
	symbols map[string]*module // exported symbol → the module depmod credits it to

	builtin      []byte           // modules.builtin as given
	builtinNames map[string]bool  // from modules.builtin and modules.builtin.modinfo
	builtinRuns  []*Info          // one per run of modules.builtin.modinfo strings, in file order
	builtinInfo  map[string]*Info // built-in module name → its first run, all libkmod reads

	files map[string][]byte // rendered by Build
}

// module is one module file and its place in the graph.
type module struct {
	path    string // relative to /usr/lib/modules/<kver>, as in modules.dep
	name    string // from the file name, '-' turned into '_', as depmod names it
	info    *Info
	idx     int       // position in Index.modules; the priority in the .bin files
	deps    []*module // direct dependencies, in the order their symbols were met
	users   int       // how many modules depend directly on this one
	depSort int       // position in depmod's topological sort; users come first
	all     []*module // every dependency, sorted by depSort, as modules.dep lists them
}

// moduleExts are the file names depmod treats as modules.
var moduleExts = []string{".ko", ".ko.xz", ".ko.zst", ".ko.gz"}

// Build parses every module in files using up to parallel goroutines
// (≤ 0: one per CPU), computes the dependency graph and renders the index
// files. Keys of files are clean paths relative to /usr/lib/modules/<kver>;
// files other than modules (*.ko, *.ko.xz, *.ko.zst, *.ko.gz outside build/
// and source/) are ignored, except modules.order, which fixes the module
// order as it does for depmod. builtin and builtinModinfo are the kernel
// package's modules.builtin and modules.builtin.modinfo, nil if it has none.
func Build(files map[string][]byte, builtin, builtinModinfo []byte, parallel int) (*Index, error) {
	return BuildCached(files, builtin, builtinModinfo, parallel, nil)
}

// BuildCached is Build keeping the modules' parsed contents in c (nil: no
// cache); the result is the same either way.
func BuildCached(files map[string][]byte, builtin, builtinModinfo []byte, parallel int, c Cache) (*Index, error) {
	idx := &Index{
		byName:  map[string]*module{},
		symbols: map[string]*module{},
		builtin: builtin,
	}
	if err := idx.collect(files); err != nil {
		return nil, err
	}
	if err := idx.parseCached(files, parallel, c); err != nil {
		return nil, err
	}
	idx.sortByOrder(files["modules.order"])
	idx.resolve()
	if err := idx.toposort(); err != nil {
		return nil, err
	}
	idx.builtinNames = parseBuiltin(builtin)
	var err error
	if idx.builtinRuns, err = parseBuiltinModinfo(builtinModinfo); err != nil {
		return nil, err
	}
	idx.builtinInfo = map[string]*Info{}
	for _, info := range idx.builtinRuns {
		if idx.builtinInfo[info.Name] == nil {
			idx.builtinInfo[info.Name] = info
		}
		idx.builtinNames[info.Name] = true
	}
	if err := idx.checkDepends(); err != nil {
		return nil, err
	}
	if idx.files, err = idx.render(); err != nil {
		return nil, err
	}
	return idx, nil
}

// Info returns what the module called name ('-' and '_' alike) says about
// itself: from its file, or for a built-in module from
// modules.builtin.modinfo (Builtin set); nil if the kernel has no such
// module.
func (idx *Index) Info(name string) *Info {
	name = strings.ReplaceAll(name, "-", "_")
	if m := idx.byName[name]; m != nil {
		return m.info
	}
	if info := idx.builtinInfo[name]; info != nil {
		return info
	}
	if idx.builtinNames[name] {
		return &Info{Name: name, Builtin: true}
	}
	return nil
}

// collect picks the module files. Two files of one module name are resolved
// as depmod does with no depmod.d configuration: one under updates/ wins;
// otherwise the first by path (depmod takes the first its readdir returns,
// which is not reproducible).
func (idx *Index) collect(files map[string][]byte) error {
	var paths []string
	for p := range files {
		if !isModulePath(p) {
			continue
		}
		if path.IsAbs(p) || p != path.Clean(p) {
			return fmt.Errorf("building module index: module path %q is not a clean path relative to /usr/lib/modules/<kver>", p)
		}
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		m := &module{path: p, name: modName(p)}
		if old := idx.byName[m.name]; old != nil {
			if !strings.HasPrefix(p, "updates/") || strings.HasPrefix(old.path, "updates/") {
				continue
			}
			i := slices.Index(idx.modules, old)
			idx.modules = slices.Delete(idx.modules, i, i+1)
		}
		idx.byName[m.name] = m
		idx.modules = append(idx.modules, m)
	}
	return nil
}

// isModulePath reports whether depmod would read p as a module: a module
// extension, and no "build" or "source" directory on the way (those are
// links to kernel headers in a real tree).
func isModulePath(p string) bool {
	dir, base := path.Split(p)
	for _, d := range strings.Split(strings.TrimSuffix(dir, "/"), "/") {
		if d == "build" || d == "source" {
			return false
		}
	}
	for _, ext := range moduleExts {
		if strings.HasSuffix(base, ext) && len(base) > len(ext) {
			return true
		}
	}
	return false
}

// modName is libkmod's module name for a path: the file name up to its
// first dot, with '-' turned into '_'.
func modName(p string) string {
	base := path.Base(p)
	if i := strings.IndexByte(base, '.'); i >= 0 {
		base = base[:i]
	}
	return strings.ReplaceAll(base, "-", "_")
}

// uncompressedPath is p without its compression suffix, the form
// modules.order uses.
func uncompressedPath(p string) string {
	for _, ext := range []string{".xz", ".zst", ".gz"} {
		if s, ok := strings.CutSuffix(p, ".ko"+ext); ok {
			return s + ".ko"
		}
	}
	return p
}

// parseCached reads the modules from c when it holds this exact tree, and
// parses and stores them otherwise. A cache that fails only costs the parse.
func (idx *Index) parseCached(files map[string][]byte, parallel int, c Cache) error {
	if c == nil {
		return idx.parse(files, parallel)
	}
	key := idx.cacheKey(files)
	if data, ok := c.Get(key); ok && decodeInfos(data, idx.modules) {
		return nil
	}
	if err := idx.parse(files, parallel); err != nil {
		return err
	}
	if data, err := encodeInfos(idx.modules); err == nil {
		c.Put(key, data)
	}
	return nil
}

// parse reads every module in parallel; decompression dominates the time.
// Results land by index, so the outcome does not depend on scheduling.
func (idx *Index) parse(files map[string][]byte, parallel int) error {
	if parallel <= 0 {
		parallel = runtime.GOMAXPROCS(0)
	}
	errs := make([]error, len(idx.modules))
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(parallel, len(idx.modules)) {
		wg.Go(func() {
			for i := range work {
				m := idx.modules[i]
				info, err := ModInfo(files[m.path])
				if err != nil {
					errs[i] = fmt.Errorf("reading module %s: %w", m.path, err)
					continue
				}
				m.info = info
			}
		})
	}
	for i := range idx.modules {
		work <- i
	}
	close(work)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// sortByOrder puts the modules named in modules.order first, in that order,
// as depmod does; the others keep their path order after them.
func (idx *Index) sortByOrder(order []byte) {
	byPath := make(map[string]*module, len(idx.modules))
	for _, m := range idx.modules {
		byPath[uncompressedPath(m.path)] = m
	}
	rank := map[*module]int{}
	lines := strings.Split(strings.TrimSuffix(string(order), "\n"), "\n")
	for i, line := range lines {
		// A module listed twice takes its last position, as in depmod.
		if m := byPath[line]; m != nil && line != "" {
			rank[m] = i - len(lines)
		}
	}
	slices.SortStableFunc(idx.modules, func(a, b *module) int {
		return cmp.Compare(rank[a], rank[b])
	})
	for i, m := range idx.modules {
		m.idx = i
	}
}

// resolve credits each exported symbol to a module (a later module wins a
// symbol exported twice, as in depmod's hash table) and turns every needed
// symbol into a dependency on its exporter.
func (idx *Index) resolve() {
	for _, m := range idx.modules {
		for _, s := range m.info.Exports {
			idx.symbols[s] = m
		}
	}
	for _, m := range idx.modules {
		for _, s := range m.info.Needs {
			owner := idx.symbols[strings.TrimPrefix(s, ".")]
			if owner == nil || slices.Contains(m.deps, owner) {
				continue
			}
			m.deps = append(m.deps, owner)
			owner.users++
		}
	}
}

// toposort numbers the modules so that users come before what they use, with
// depmod's exact tie-breaking (a LIFO of modules whose users are all
// numbered, seeded in module order), then lists every module's transitive
// dependencies in that numbering.
func (idx *Index) toposort() error {
	users := make([]int, len(idx.modules))
	var stack []int
	for i, m := range idx.modules {
		users[i] = m.users
		if m.users == 0 {
			stack = append(stack, i)
		}
	}
	sorted := 0
	for len(stack) > 0 {
		m := idx.modules[stack[len(stack)-1]]
		stack = stack[:len(stack)-1]
		m.depSort = sorted
		sorted++
		for _, d := range m.deps {
			users[d.idx]--
			if users[d.idx] == 0 {
				stack = append(stack, d.idx)
			}
		}
	}
	if sorted < len(idx.modules) {
		var cyc []string
		for i, n := range users {
			if n > 0 {
				cyc = append(cyc, idx.modules[i].name)
			}
		}
		return fmt.Errorf("building module index: %d modules are in dependency cycles (%s): the kernel package is broken, use another version", len(cyc), strings.Join(cyc, " "))
	}
	for _, m := range idx.modules {
		seen := map[*module]bool{}
		var walk func(*module)
		walk = func(x *module) {
			for _, d := range x.deps {
				if !seen[d] {
					seen[d] = true
					m.all = append(m.all, d)
					walk(d)
				}
			}
		}
		walk(m)
		slices.SortFunc(m.all, func(a, b *module) int { return cmp.Compare(a.depSort, b.depSort) })
	}
	return nil
}

// checkDepends refuses a module whose depends= names a module the tree does
// not have: a recipe's remove glob took it, and modprobe would fail on the
// node. modpost writes depends= from the symbols a module uses that other
// loadable modules export (the kernel's own are not modules), so every
// name must be a module file. depmod only warns about unknown symbols, and
// resolve cannot tell them from the kernel's exports, which it does not see.
func (idx *Index) checkDepends() error {
	var errs []error
	for _, m := range idx.modules {
		for _, d := range m.info.Depends {
			d = strings.ReplaceAll(d, "-", "_")
			if idx.byName[d] == nil {
				errs = append(errs, fmt.Errorf("module %s depends on %s (its modinfo depends=), which the image does not have: keep %s, or remove %s too", m.path, d, d, m.path))
			}
		}
	}
	return errors.Join(errs...)
}

// parseBuiltin reads modules.builtin: one path per line.
func parseBuiltin(data []byte) map[string]bool {
	names := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		if line != "" {
			names[modName(line)] = true
		}
	}
	return names
}

// parseBuiltinModinfo reads modules.builtin.modinfo, NUL-separated
// "module.key=value" strings, into one Info per run of strings of one module
// (libkmod's unit; a module normally has a single run).
func parseBuiltinModinfo(data []byte) ([]*Info, error) {
	var out []*Info
	var name string
	var strs []string
	flush := func() {
		if strs != nil {
			info := &Info{Builtin: true}
			info.setModinfo(strs)
			// The prefix is what libkmod goes by, whatever name= says.
			info.Name = strings.ReplaceAll(name, "-", "_")
			out = append(out, info)
		}
		strs = nil
	}
	for s := range bytes.SplitSeq(data, []byte{0}) {
		if len(s) == 0 {
			continue
		}
		n, kv, ok := strings.Cut(string(s), ".")
		if !ok {
			return nil, fmt.Errorf("reading modules.builtin.modinfo: string %q has no module prefix: the kernel package is broken", s)
		}
		if n != name {
			flush()
			name = n
		}
		strs = append(strs, kv)
	}
	flush()
	return out, nil
}
