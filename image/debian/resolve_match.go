package debian

import (
	"fmt"
	"sort"
	"strings"

	"pault.ag/go/debian/dependency"
	"pault.ag/go/debian/version"
)

type resolver struct {
	idx      *Index
	arch     string
	native   *dependency.Arch
	roots    map[string]bool
	selected map[string]int32 // package name → index into idx.Packages
	order    []int32          // selection order
	why      map[string]string
	parent   map[string]string // package name → who pulled it in ("" for roots)
	choices  []Choice
	deferred []pendingRel // relations that offer a choice, in the order met
	versions map[int32]version.Version
}

func newResolver(idx *Index, arch string) *resolver {
	native, err := dependency.ParseArch(arch)
	if err != nil {
		native = &dependency.Arch{CPU: arch}
	}
	return &resolver{
		idx:      idx,
		arch:     arch,
		native:   native,
		roots:    map[string]bool{},
		selected: map[string]int32{},
		why:      map[string]string{},
		parent:   map[string]string{},
		versions: map[int32]version.Version{},
	}
}

func (r *resolver) where() string {
	return fmt.Sprintf("%s (components: %s)", r.idx.Suite, strings.Join(r.idx.Components, " "))
}

// ver parses a package's version once. A version dpkg would reject still
// compares sensibly as a plain upstream string, so it is not fatal here.
func (r *resolver) ver(pi int32) version.Version {
	if v, ok := r.versions[pi]; ok {
		return v
	}
	raw := r.idx.Packages[pi].Version
	v, err := version.Parse(raw)
	if err != nil {
		v = version.Version{Version: raw}
	}
	r.versions[pi] = v
	return v
}

func parseVersionLoose(raw string) version.Version {
	v, err := version.Parse(raw)
	if err != nil {
		return version.Version{Version: raw}
	}
	return v
}

func versionEqual(v version.Version, raw string) bool {
	return version.Compare(v, parseVersionLoose(raw)) == 0
}

// versionOK reports whether v satisfies the relation; nil means unversioned.
func versionOK(v version.Version, rel *dependency.VersionRelation) bool {
	if rel == nil {
		return true
	}
	c := version.Compare(v, parseVersionLoose(rel.Number))
	switch rel.Operator {
	case "<<":
		return c < 0
	case "<=", "<": // "<" and ">" are the obsolete spellings of "<=" and ">="
		return c <= 0
	case "=":
		return c == 0
	case ">=", ">":
		return c >= 0
	case ">>":
		return c > 0
	}
	return false
}

// candidates returns the eligible packages named name, highest version first
// (ties keep archive order).
func (r *resolver) candidates(name string) []int32 {
	var out []int32
	for _, pi := range r.idx.byName[name] {
		a := r.idx.Packages[pi].Architecture
		if a == r.arch || a == "all" {
			out = append(out, pi)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return version.Compare(r.ver(out[i]), r.ver(out[j])) > 0 })
	return out
}

// applies reports whether a possibility concerns this architecture: an
// "[!amd64]"-style restriction can exclude it.
func (r *resolver) applies(o dependency.Possibility) bool {
	if o.Substvar {
		return false
	}
	if o.Architectures == nil || len(o.Architectures.Architectures) == 0 {
		return true
	}
	return o.Architectures.Matches(r.native)
}

// archOK checks a package's architecture against the possibility's
// qualifier. The index holds one architecture plus "all", so ":any" (which
// dpkg limits to Multi-Arch: allowed packages on multi-arch systems) accepts
// any package here, and ":native" or no qualifier accept the native one and
// "all".
func (r *resolver) archOK(o dependency.Possibility, pkgArch string) bool {
	q := ""
	if o.Arch != nil {
		q = o.Arch.String()
	}
	switch q {
	case "any":
		return true
	case "", "native":
		return pkgArch == r.arch || pkgArch == "all"
	default:
		return pkgArch == q || (q == r.arch && pkgArch == "all")
	}
}

// providerOK reports whether a Provides entry satisfies o: a versioned
// dependency needs a versioned provide that matches.
func (r *resolver) providerOK(o dependency.Possibility, pr provided) bool {
	if !r.archOK(o, r.idx.Packages[pr.pkg].Architecture) {
		return false
	}
	if o.Version == nil {
		return true
	}
	return pr.version != "" && versionOK(parseVersionLoose(pr.version), o.Version)
}

// satisfiedBySelected returns the selected package that satisfies o.
func (r *resolver) satisfiedBySelected(o dependency.Possibility) (int32, bool) {
	return r.matchesSelected(o, "")
}

// matchesSelected is satisfiedBySelected ignoring the package named self (a
// package may conflict with a virtual name it provides itself).
func (r *resolver) matchesSelected(o dependency.Possibility, self string) (int32, bool) {
	if pi, ok := r.selected[o.Name]; ok && o.Name != self {
		p := r.idx.Packages[pi]
		if r.archOK(o, p.Architecture) && versionOK(r.ver(pi), o.Version) {
			return pi, true
		}
	}
	for _, pr := range r.idx.providers[o.Name] {
		p := r.idx.Packages[pr.pkg]
		if p.Name == self {
			continue
		}
		if sel, ok := r.selected[p.Name]; ok && sel == pr.pkg && r.providerOK(o, pr) {
			return pr.pkg, true
		}
	}
	return -1, false
}

// pickReal returns the highest eligible version of the package named o.Name
// that satisfies o, unless another version of it is already selected.
func (r *resolver) pickReal(o dependency.Possibility) (int32, bool) {
	if _, taken := r.selected[o.Name]; taken {
		return -1, false
	}
	for _, pi := range r.candidates(o.Name) {
		if r.archOK(o, r.idx.Packages[pi].Architecture) && versionOK(r.ver(pi), o.Version) {
			return pi, true
		}
	}
	return -1, false
}

// pickProvider chooses among the packages that provide o.Name: the only one,
// else the lexicographically first name (recorded as a Choice); for a name,
// its highest version.
func (r *resolver) pickProvider(o dependency.Possibility, forWhom string) (int32, bool) {
	best := map[string]int32{}
	for _, pr := range r.idx.providers[o.Name] {
		p := r.idx.Packages[pr.pkg]
		if _, taken := r.selected[p.Name]; taken {
			continue // another version of it is selected and does not qualify
		}
		if p.Architecture != r.arch && p.Architecture != "all" {
			continue
		}
		if !r.providerOK(o, pr) {
			continue
		}
		if cur, ok := best[p.Name]; !ok || version.Compare(r.ver(pr.pkg), r.ver(cur)) > 0 {
			best[p.Name] = pr.pkg
		}
	}
	if len(best) == 0 {
		return -1, false
	}
	names := make([]string, 0, len(best))
	for n := range best {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) > 1 {
		r.choices = append(r.choices, Choice{Virtual: o.Name, Chosen: names[0], Candidates: names, For: forWhom})
	}
	return best[names[0]], true
}

// unsatisfiable explains a relation nothing in the archive satisfies: what
// each alternative has, and the chain that pulled the package in.
func (r *resolver) unsatisfiable(p *Package, field string, rel dependency.Relation, poss []dependency.Possibility) error {
	var have []string
	for _, o := range poss {
		have = append(have, r.describe(o))
	}
	return fmt.Errorf("cannot satisfy %q (%s of %s) in %s: %s; %s was %s: check the recipe's packages or pin other versions",
		rel.String(), field, p, r.idx.Suite, strings.Join(have, "; "), p.Name, r.chain(p.Name))
}

func (r *resolver) describe(o dependency.Possibility) string {
	var parts []string
	if pi, ok := r.selected[o.Name]; ok {
		parts = append(parts, fmt.Sprintf("%s is already selected (%s)", r.idx.Packages[pi], r.why[o.Name]))
	}
	if c := r.candidates(o.Name); len(c) > 0 {
		parts = append(parts, fmt.Sprintf("%s has %s", o.Name, r.versionList(c)))
	}
	var provs []string
	for _, pr := range r.idx.providers[o.Name] {
		p := r.idx.Packages[pr.pkg]
		if pr.version != "" {
			provs = append(provs, fmt.Sprintf("%s (= %s)", p, pr.version))
		} else {
			provs = append(provs, p.String()+" (unversioned)")
		}
	}
	if len(provs) > 0 {
		parts = append(parts, fmt.Sprintf("%s is provided by %s", o.Name, strings.Join(provs, ", ")))
	}
	if len(parts) == 0 {
		return fmt.Sprintf("%s has no package named %s", r.idx.Suite, o.Name)
	}
	return strings.Join(parts, ", ")
}

func (r *resolver) versionList(cands []int32) string {
	var vs []string
	for _, c := range cands {
		p := r.idx.Packages[c]
		vs = append(vs, p.Version+" ("+p.Architecture+")")
	}
	if len(vs) == 1 {
		return "version " + vs[0]
	}
	return "versions " + strings.Join(vs, ", ")
}

// chain is "required by b 1 (Depends: a) ← required by c 2 (Depends: b) ←
// requested by the recipe". Parents form a tree (a package is selected once),
// so the walk ends at a root.
func (r *resolver) chain(name string) string {
	var steps []string
	for n := name; n != ""; n = r.parent[n] {
		steps = append(steps, r.why[n])
		if len(steps) > 64 {
			break
		}
	}
	return strings.Join(steps, " ← ")
}
