package ignition

import (
	"path"
	"slices"
	"strings"

	"github.com/coreos/ignition/v2/config/util"
	"github.com/coreos/ignition/v2/config/v3_5/types"
)

// unitSearchDirs is systemd's search path for system units, highest
// priority first (path-lookup.c, lookup_paths_init for the system
// manager). A unit file in an earlier directory replaces the one of the
// same name in a later one, and every directory is searched for drop-ins.
// Only the /etc ones can be written by user-data; the /run ones are
// reachable by a tmpfiles.d line; /usr is the read-only image.
var unitSearchDirs = []string{
	"/etc/systemd/system.control",
	"/run/systemd/system.control",
	"/run/systemd/transient",
	"/run/systemd/generator.early",
	systemdDir,
	"/etc/systemd/system.attached",
	"/run/systemd/system",
	"/run/systemd/system.attached",
	"/run/systemd/generator",
	"/usr/local/lib/systemd/system",
	imageUnitDir,
	"/run/systemd/generator.late",
}

// writableUnitDirs are the search directories under /etc.
func writableUnitDirs() []string {
	var out []string
	for _, d := range unitSearchDirs {
		if underDir(d, "/etc") {
			out = append(out, d)
		}
	}
	return out
}

// inUnitSearchDir splits p into the search directory it is directly in
// and its name there.
func inUnitSearchDir(p string) (dir, name string, ok bool) {
	dir, name = path.Split(p)
	dir = strings.TrimSuffix(dir, "/")
	return dir, name, slices.Contains(unitSearchDirs, dir)
}

// unitTypes are the unit suffixes systemd knows.
var unitTypes = []string{"service", "socket", "target", "device", "mount", "automount", "swap", "timer", "path", "slice", "scope"}

// unitType returns the suffix of a unit name ("service"), or "".
func unitType(name string) string {
	dot := strings.LastIndexByte(name, '.')
	if dot <= 0 || !slices.Contains(unitTypes, name[dot+1:]) {
		return ""
	}
	return name[dot+1:]
}

// dropinDirNames lists the drop-in directory names systemd reads for a
// unit name, as unit_file_find_dirs does (src/shared/dropin.c): the name's
// own "<name>.d", the template's for an instance ("foo@.service.d"), one
// per dash prefix ("foo-bar-baz.service" also reads "foo-bar-.service.d"
// and "foo-.service.d"), and the type's ("service.d").
func dropinDirNames(name string) []string {
	typ := unitType(name)
	if typ == "" {
		return nil
	}
	var out []string
	var walk func(n string)
	walk = func(n string) {
		out = append(out, n+".d")
		prefix := strings.TrimSuffix(n, "."+typ)
		instance := ""
		if at := strings.IndexByte(prefix, '@'); at >= 0 {
			prefix, instance = prefix[:at], prefix[at+1:]
			if instance != "" {
				out = append(out, prefix+"@."+typ+".d")
			}
		}
		// The next shorter dash prefix: cut after the last dash; a
		// trailing dash is dropped once first, a leading one ends it.
		p := prefix
		chopped := false
		for {
			dash := strings.LastIndexByte(p, '-')
			if dash <= 0 {
				return
			}
			if dash != len(p)-1 || chopped {
				p = p[:dash+1]
				break
			}
			p, chopped = p[:dash], true
		}
		next := p + "." + typ
		if instance != "" {
			next = p + "@" + instance + "." + typ
		}
		walk(next)
	}
	walk(name)
	out = append(out, typ+".d")
	slices.Sort(out)
	return slices.Compact(out)
}

// unitAliases maps each name that the config's links in a unit search
// directory make another name of a unit, to the unit it ends at. systemd
// (unit_file_build_name_map, src/shared/unit-file.c) takes a symlink
// there whose target lies in a search directory as an alias for the
// target's file name, and one pointing elsewhere as a linked unit file;
// for the policy both mean "this name is that unit", so both count.
// Chains are followed as systemd does, up to 8 hops.
func unitAliases(links []types.Link, r resolver) map[string]string {
	direct := map[string]string{}
	for _, l := range links {
		if l.Target == nil || util.IsTrue(l.Hard) || !path.IsAbs(l.Path) {
			continue
		}
		p := path.Clean(l.Path)
		_, name, ok := inUnitSearchDir(p)
		if !ok || unitType(name) == "" {
			continue
		}
		t := r.resolve(linkTarget(p, *l.Target))
		if dst := path.Base(t); dst != name && unitType(dst) != "" {
			direct[name] = dst
		}
	}
	out := map[string]string{}
	for name := range direct {
		end := name
		for hops := 0; hops < 8; hops++ {
			next, ok := direct[end]
			if !ok {
				break
			}
			end = next
		}
		out[name] = end
	}
	return out
}

// linkTarget is where a symbolic link at p (clean, absolute) points, before
// any link on the way is followed.
func linkTarget(p, target string) string {
	if path.IsAbs(target) {
		return target
	}
	return path.Dir(p) + "/" + target
}

// guardedUnit is an image unit whose fragment, drop-ins and names the
// policy follows wherever systemd would find them.
type guardedUnit struct {
	name string
	// checked: drop-ins are allowed but read for keys that would undo
	// the node's guarantees (checkedKeys); otherwise none are allowed.
	checked bool
}

const containerdUnit = "containerd.service"

func guardedUnits() []guardedUnit {
	out := []guardedUnit{{kubeletUnit, true}, {containerdUnit, true}}
	for _, u := range agentUnits() {
		out = append(out, guardedUnit{u, false})
	}
	return out
}

// maxAliasNames bounds the aliases of one unit that are followed for
// drop-ins: each alias link of a guarded unit is refused on its own, so
// more would only cost time on a hostile config.
const maxAliasNames = 16

// unitNames is the unit's own name and the aliases the config gives it.
func unitNames(unit string, aliases map[string]string) []string {
	out := []string{unit}
	for a, u := range aliases {
		if u == unit {
			out = append(out, a)
		}
	}
	slices.Sort(out[1:])
	return out[:min(len(out), 1+maxAliasNames)]
}

// dropinIndex maps the drop-in directory names of the guarded units,
// under all their names, to the unit and the name. The type-level
// "service.d" is left out: the surface guards it whole, as it applies to
// every service.
type dropinIndex map[string]dropinFor

type dropinFor struct {
	unit guardedUnit
	name string
}

func newDropinIndex(aliases map[string]string) dropinIndex {
	ix := dropinIndex{}
	for _, g := range guardedUnits() {
		for _, n := range unitNames(g.name, aliases) {
			for _, d := range dropinDirNames(n) {
				if _, seen := ix[d]; !seen && d != unitType(n)+".d" {
					ix[d] = dropinFor{g, strings.TrimSuffix(d, ".d")}
				}
			}
		}
	}
	return ix
}

// of says which guarded unit a path is a drop-in (or a drop-in
// directory) of, in any search directory, and the name the directory is
// for ("kube.service" for kube.service.d/x.conf).
func (ix dropinIndex) of(p string) (guardedUnit, string, bool) {
	for _, dir := range unitSearchDirs {
		rest, ok := strings.CutPrefix(p, dir+"/")
		if !ok {
			continue
		}
		d, _, _ := strings.Cut(rest, "/")
		f, ok := ix[d]
		return f.unit, f.name, ok
	}
	return guardedUnit{}, "", false
}

// dropinOf is newDropinIndex(aliases).of(p), for tests.
func dropinOf(p string, aliases map[string]string) (guardedUnit, string, bool) {
	return newDropinIndex(aliases).of(p)
}
