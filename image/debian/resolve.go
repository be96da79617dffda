package debian

import (
	"fmt"
	"sort"
	"strings"

	"pault.ag/go/debian/dependency"
)

// Closure is the result of Resolve: every package to install, and why.
type Closure struct {
	Packages []Package // sorted by name, one version per name
	// Why says for each package name why it is in the closure, e.g.
	// "requested by the recipe" or
	// "required by systemd 257.9-1 (Depends: libc6 (>= 2.38))".
	Why map[string]string
	// Choices records each virtual package that several real packages
	// provide and for which the resolver had to pick one, in the order made.
	Choices []Choice
}

// Choice is one pick among several providers of a virtual package.
type Choice struct {
	Virtual    string   // the provided name, e.g. "mail-transport-agent"
	Chosen     string   // the package picked
	Candidates []string // every package that could have been picked, sorted
	For        string   // who needed it: "systemd 257.9-1 (Depends: …)" or "the recipe"
}

func (c Choice) String() string {
	return fmt.Sprintf("%s: chose %s among %s (for %s); list one of them in the recipe to choose another",
		c.Virtual, c.Chosen, strings.Join(c.Candidates, ", "), c.For)
}

// TotalSize is the sum of the .deb sizes, in bytes.
func (c *Closure) TotalSize() int64 {
	var n int64
	for _, p := range c.Packages {
		n += p.Size
	}
	return n
}

const requestedByRecipe = "requested by the recipe"

// Resolve computes the closure of roots over Pre-Depends and Depends in idx
// (Recommends and Suggests are ignored: an image carries only what is needed).
// A root is "name" (highest version) or "name=version". For arch, packages of
// that architecture and of "all" are eligible.
//
// The resolver is greedy and never backtracks, which is enough within one
// consistent suite. Definite dependencies are followed first; a relation that
// offers a choice (alternatives, or a virtual name with several providers)
// waits until they are exhausted. Then an alternative already selected (roots
// are selected first) wins, else the first satisfiable alternative; a real
// package beats a provider of the same name; among several providers of a
// virtual name the lexicographically first is taken and recorded in
// Closure.Choices. The result
// depends only on idx and the set of roots, never on map iteration order.
// Conflicts and Breaks among the selected packages are checked at the end.
func Resolve(idx *Index, arch string, roots []string) (*Closure, error) {
	r := newResolver(idx, arch)
	if err := r.selectRoots(roots); err != nil {
		return nil, err
	}
	// The queue grows while it is walked: breadth-first, in selection order.
	// Relations that offer a choice wait until every definite dependency
	// has been followed, so that the choice can fall on a package something
	// else needs anyway instead of adding a second one.
	next := 0
	for {
		for ; next < len(r.order); next++ {
			if err := r.expand(r.order[next]); err != nil {
				return nil, err
			}
		}
		if len(r.deferred) == 0 {
			break
		}
		d := r.deferred[0]
		r.deferred = r.deferred[1:]
		if err := r.choose(d); err != nil {
			return nil, err
		}
	}
	c := &Closure{Why: r.why, Choices: r.choices}
	for _, pi := range r.order {
		c.Packages = append(c.Packages, idx.Packages[pi])
	}
	sort.Slice(c.Packages, func(i, j int) bool { return c.Packages[i].Name < c.Packages[j].Name })
	if err := r.checkConflicts(c.Packages); err != nil {
		return nil, err
	}
	return c, nil
}

// rootSpec is one parsed entry of the roots list.
type rootSpec struct{ name, version string }

func (r *resolver) selectRoots(roots []string) error {
	specs := map[string]rootSpec{}
	for _, raw := range roots {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		name, ver, _ := strings.Cut(raw, "=")
		s := rootSpec{name: strings.TrimSpace(name), version: strings.TrimSpace(ver)}
		if prev, ok := specs[s.name]; ok && prev != s {
			return fmt.Errorf("package %q is listed twice in the recipe with different versions (%q and %q): keep one", s.name, prev.version, s.version)
		}
		specs[s.name] = s
		r.roots[s.name] = true
	}
	names := make([]string, 0, len(specs))
	for n := range specs {
		names = append(names, n)
	}
	sort.Strings(names)

	// Real packages first, so a virtual root can see which providers the
	// recipe lists.
	var virtual []rootSpec
	for _, n := range names {
		s := specs[n]
		cands := r.candidates(s.name)
		if len(cands) == 0 {
			if s.version == "" && len(r.idx.providers[s.name]) > 0 {
				virtual = append(virtual, s)
				continue
			}
			return fmt.Errorf("package %q is not in %s; check the recipe's packages list", s.name, r.where())
		}
		pick := int32(-1)
		if s.version == "" {
			pick = cands[0]
		} else {
			for _, c := range cands {
				if versionEqual(r.ver(c), s.version) {
					pick = c
					break
				}
			}
			if pick < 0 {
				return fmt.Errorf("package %q has no version %q in %s (it has %s); check the recipe's packages list",
					s.name, s.version, r.where(), r.versionList(cands))
			}
		}
		r.selectPkg(pick, requestedByRecipe, "")
	}
	for _, s := range virtual {
		poss := dependency.Possibility{Name: s.name}
		if _, ok := r.satisfiedBySelected(poss); ok {
			continue
		}
		pick, ok := r.pickProvider(poss, "the recipe")
		if !ok {
			return fmt.Errorf("package %q is not in %s; check the recipe's packages list", s.name, r.where())
		}
		r.selectPkg(pick, fmt.Sprintf("provides %s, %s", s.name, requestedByRecipe), "")
	}
	return nil
}

// expand selects what package pi needs.
func (r *resolver) expand(pi int32) error {
	p := &r.idx.Packages[pi]
	for _, f := range []struct{ field, raw string }{{"Pre-Depends", p.PreDepends}, {"Depends", p.Depends}} {
		if strings.TrimSpace(f.raw) == "" {
			continue
		}
		dep, err := dependency.Parse(f.raw)
		if err != nil {
			return fmt.Errorf("parsing %s of %s in %s: %w", f.field, p, r.idx.Suite, err)
		}
		for _, rel := range dep.Relations {
			if err := r.satisfy(p, f.field, rel); err != nil {
				return err
			}
		}
	}
	return nil
}

// pendingRel is a dependency relation of a selected package.
type pendingRel struct {
	pkg   *Package
	field string
	rel   dependency.Relation
	poss  []dependency.Possibility // the alternatives that apply to this architecture
}

func (r *resolver) satisfy(p *Package, field string, rel dependency.Relation) error {
	d := pendingRel{pkg: p, field: field, rel: rel}
	for _, o := range rel.Possibilities {
		if r.applies(o) {
			d.poss = append(d.poss, o)
		}
	}
	if len(d.poss) == 0 {
		return nil // restricted to other architectures
	}
	if r.satisfied(d) {
		return nil
	}
	if !r.definite(d) {
		r.deferred = append(r.deferred, d)
		return nil
	}
	return r.choose(d)
}

func (r *resolver) satisfied(d pendingRel) bool {
	for _, o := range d.poss {
		if _, ok := r.satisfiedBySelected(o); ok {
			return true
		}
	}
	return false
}

// definite reports whether d leaves nothing to choose: one alternative,
// naming a real package or a virtual one with at most one provider.
func (r *resolver) definite(d pendingRel) bool {
	if len(d.poss) != 1 {
		return false
	}
	name := d.poss[0].Name
	if len(r.idx.byName[name]) > 0 {
		return true
	}
	provs := r.idx.providers[name]
	for _, pr := range provs[min(1, len(provs)):] {
		if r.idx.Packages[pr.pkg].Name != r.idx.Packages[provs[0].pkg].Name {
			return false
		}
	}
	return true
}

// choose selects the first satisfiable alternative of d, unless something
// selected since d was deferred satisfies it already.
func (r *resolver) choose(d pendingRel) error {
	if r.satisfied(d) {
		return nil
	}
	p := d.pkg
	rel := d.rel.String()
	reason := fmt.Sprintf("required by %s (%s: %s)", p, d.field, rel)
	for _, o := range d.poss {
		if pick, ok := r.pickReal(o); ok {
			r.selectPkg(pick, reason, p.Name)
			return nil
		}
		if pick, ok := r.pickProvider(o, fmt.Sprintf("%s (%s: %s)", p, d.field, rel)); ok {
			r.selectPkg(pick, fmt.Sprintf("provides %s, %s", o.Name, reason), p.Name)
			return nil
		}
	}
	return r.unsatisfiable(p, d.field, d.rel, d.poss)
}

func (r *resolver) selectPkg(pi int32, why, parent string) {
	name := r.idx.Packages[pi].Name
	r.selected[name] = pi
	r.order = append(r.order, pi)
	r.why[name] = why
	r.parent[name] = parent
}

// checkConflicts fails on the first Conflicts or Breaks relation (in package
// name order) that another selected package matches.
func (r *resolver) checkConflicts(pkgs []Package) error {
	for _, p := range pkgs {
		for _, f := range []struct{ field, raw string }{{"Conflicts", p.Conflicts}, {"Breaks", p.Breaks}} {
			if strings.TrimSpace(f.raw) == "" {
				continue
			}
			dep, err := dependency.Parse(f.raw)
			if err != nil {
				return fmt.Errorf("parsing %s of %s in %s: %w", f.field, p, r.idx.Suite, err)
			}
			for _, rel := range dep.Relations {
				for _, o := range rel.Possibilities {
					if !r.applies(o) {
						continue
					}
					other, ok := r.matchesSelected(o, p.Name)
					if !ok {
						continue
					}
					q := r.idx.Packages[other]
					return fmt.Errorf("packages conflict in %s: %s (%s: %s) and %s are both selected (%s: %s; %s: %s): remove one from the recipe's packages or pin other versions",
						r.idx.Suite, p, f.field, o.String(), q, p.Name, r.why[p.Name], q.Name, r.why[q.Name])
				}
			}
		}
	}
	return nil
}
