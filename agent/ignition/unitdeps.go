package ignition

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/coreos/ignition/v2/config/util"
)

// A unit of the config may order itself around the node's own units and
// pull them in: After=, Before=, Wants=, Requires=, WantedBy= and
// RequiredBy= only start what the node starts anyway, or hold back the
// config's own unit. What it may not do is act on them: stop or restart
// them with its own lifecycle, replace them, trigger them from a timer,
// socket or path, or share their namespaces. lifecycleKeys are the
// settings that do, by systemd.unit(5), systemd.timer(5), systemd.path(5)
// and systemd.socket(5); a protected unit named in any of them is refused
// in every unit and drop-in the config gives, whatever its type.
var lifecycleKeys = []struct{ key, does string }{
	{"Conflicts", "starting it would stop"},
	{"PartOf", "it would be stopped and restarted with"},
	{"BindsTo", "it would be bound to"},
	{"BindTo", "it would be bound to"}, // the old spelling, still read
	{"Requisite", "it would fail without"},
	{"RequisiteOverridable", "it would fail without"},
	{"OnSuccess", "its success would start"},
	{"OnFailure", "its failure would start"},
	{"PropagatesStopTo", "stopping it would stop"},
	{"StopPropagatedFrom", "it would be stopped with"},
	{"PropagatesReloadTo", "reloading it would reload"},
	{"PropagateReloadTo", "reloading it would reload"},
	{"ReloadPropagatedFrom", "it would be reloaded with"},
	{"PropagateReloadFrom", "it would be reloaded with"},
	{"JoinsNamespaceOf", "it would share the namespaces of"},
	{"Upholds", "it would keep restarting"},
	{"UpheldBy", "enabling it would make it restart"},
	{"Unit", "a timer or path would start"},
	{"Service", "a socket would start"},
	{"Sockets", "it would take over the sockets of"},
	{"Alias", "enabling it would make it another name of"},
	{"Also", "enabling it would also enable"},
}

// checkUnitDependencies refuses every unit and drop-in the config gives
// (as systemd units or as files under /etc/systemd/system) that names a
// protected unit, under any name the config gives it, in a lifecycle
// setting. Drop-ins of kubelet.service and containerd.service are left
// to their directive allowlist, which sets no dependency at all.
func checkUnitDependencies(cfg *Config, aliases map[string]string, c *collector) {
	names := protectedUnitNames(aliases)
	dropins := newDropinIndex(aliases)
	for i, u := range cfg.Ignition.Systemd.Units {
		at := []any{"systemd", "units", i}
		if u.Contents != nil {
			checkUnitText(u.Name, *u.Contents, names, sub(at, "contents"), c)
		}
		for j, d := range u.Dropins {
			if g, _, ok := dropins.of(dropinPath(u.Name, d.Name)); ok && g.checked {
				continue
			}
			if d.Contents != nil {
				checkUnitText(u.Name, *d.Contents, names, sub(at, "dropins", j, "contents"), c)
			}
		}
	}
	for i, f := range cfg.Ignition.Storage.Files {
		if i >= len(cfg.files) || !path.IsAbs(f.Path) {
			continue
		}
		p := path.Clean(f.Path)
		if !underDir(p, systemdDir) {
			continue
		}
		if g, _, ok := dropins.of(p); ok && g.checked {
			continue
		}
		at := []any{"storage", "files", i, "contents"}
		unit, _, _ := strings.Cut(strings.TrimPrefix(p, systemdDir+"/"), "/")
		unit = strings.TrimSuffix(unit, ".d")
		if !cfg.files[i].complete() {
			c.addf(at, "%s must be given inline (a data: URL or systemd.units), so that it can be checked for what it does to the node's own units — inline it", p)
			continue
		}
		checkUnitText(unit, string(cfg.files[i].final(nil)), names, at, c)
	}
}

// checkUnitLinks refuses a symbolic link in /etc/systemd/system that
// points anywhere but the image's read-only /usr, /dev/null (a mask) or
// /etc/systemd/system itself (aliases, enable links): systemd would read
// the unit it points to as a linked unit file, and the checks above read
// only units given in the config.
func checkUnitLinks(cfg *Config, links resolver, aliases map[string]string, c *collector) {
	dropins := newDropinIndex(aliases)
	for i, l := range cfg.Ignition.Storage.Links {
		if l.Target == nil || util.IsTrue(l.Hard) || !path.IsAbs(l.Path) || !underDir(path.Clean(l.Path), systemdDir) {
			continue
		}
		t := links.resolve(linkTarget(path.Clean(l.Path), *l.Target))
		if t == "/dev/null" || underDir(t, "/usr") || underDir(t, systemdDir) || !underWritable(t) {
			continue // !underWritable: checkProtected refuses the target
		}
		if _, _, ok := dropins.of(path.Clean(l.Path)); ok {
			continue // checkDropinNode refuses a link among a guarded unit's drop-ins
		}
		c.addf([]any{"storage", "links", i, "target"}, "%q: a link in %s may point only into %s, the image's /usr or /dev/null; systemd would read %s as a unit no check reads — give the unit as a file in %s", *l.Target, systemdDir, systemdDir, t, systemdDir)
	}
}

// protectedUnitNames are the guarded units' names and the aliases the
// config gives them.
func protectedUnitNames(aliases map[string]string) map[string]string {
	out := map[string]string{}
	for _, g := range guardedUnits() {
		for _, n := range unitNames(g.name, aliases) {
			out[n] = g.name
		}
	}
	return out
}

func checkUnitText(unit, text string, names map[string]string, at []any, c *collector) {
	// readSettings reads each setting twice (as systemd would, and line by
	// line): each key naming each protected unit is one problem, the
	// first reading's, which has the line.
	seen := map[string]bool{}
	for _, s := range readSettings(text) {
		key := strings.TrimSpace(s.key)
		i := slices.IndexFunc(lifecycleKeys, func(k struct{ key, does string }) bool { return k.key == key })
		if i < 0 {
			continue
		}
		for _, w := range strings.Fields(cunescapeLoose(s.value)) {
			n := w
			if unitType(n) == "" {
				n += ".service" // systemd's default suffix for a bare name
			}
			g, ok := names[n]
			if !ok || seen[key+"="+n] {
				continue
			}
			seen[key+"="+n] = true
			line := ""
			if s.line > 0 {
				line = fmt.Sprintf(" (line %d)", s.line)
			}
			also := ""
			if n != g {
				also = " (another name of " + g + ")"
			}
			c.addf(at, "%s may not name %s%s in %s=%s: %s %s, which the node runs as it was built — order the unit with After= or Before=, or pull it in with Wants=, instead", unit, n, also, key, line, lifecycleKeys[i].does, g)
			// each name in each setting once: all the author must remove
		}
	}
}
