package ignition

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/coreos/ignition/v2/config/util"
	"github.com/coreos/ignition/v2/config/v3_5/types"

	"github.com/drover-os/drover/agent/nodeconfig"
	"github.com/drover-os/drover/agent/units"
)

// A guarded entry is part of the node's protected surface: what user-data
// may not write, link to or replace, because the node's guarantees rest on
// it (no login, the agent's own behaviour, the credentials and
// configuration it renders). docs/node-config.md lists the surface.
type guarded struct {
	pattern string // a clean absolute path, or a path.Match pattern
	tree    bool   // everything below pattern is guarded too
	why     string // what it is
	instead string // what to do instead
}

const (
	whyAccounts  = "accounts and login are fixed by the image (a drover node has no login)"
	insteadImage = "add system users and their settings in the image recipe; reach the node with kubectl debug node/<name>"
	whyAgent     = "drover-agent's own unit: it provisions the node and guards it against drift"
	insteadAgent = "configure the node through the node file; drover-agent takes no user configuration"
	whyRendered  = "drover-agent renders it from the node file at every boot"
	whyKubelet   = "the kubelet's credentials, written by its TLS bootstrap"
	insteadCreds = "let the kubelet bootstrap with cluster.bootstrapToken; it writes these itself"
)

// protectedSurface lists the surface. The agent-rendered files come from
// nodeconfig's table of what Render writes and the agent's units from the
// image's unit set, so neither can drift from this list.
func protectedSurface() []guarded {
	g := []guarded{}
	for _, p := range []string{"/etc/passwd", "/etc/shadow", "/etc/group", "/etc/gshadow",
		"/etc/passwd-", "/etc/shadow-", "/etc/group-", "/etc/gshadow-"} {
		g = append(g, guarded{p, false, whyAccounts, insteadImage})
	}
	g = append(g,
		guarded{"/etc/sudoers*", true, whyAccounts, insteadImage},
		guarded{"/etc/pam.d", true, "PAM decides who may log in or change identity; " + whyAccounts, insteadImage},
		guarded{"/etc/security", true, "PAM's limits and access rules; " + whyAccounts, insteadImage},
		guarded{reservedDir, true, "drover-agent's own state: the stored user-data and the pinned cluster CA it is checked against", "use another path"},
		// Drop-ins that apply to every service, or to every unit named
		// drover-*, change the agent's unit as surely as its own drop-ins.
		guarded{systemdDir + "/service.d", true, "drop-ins for every service, drover-agent's included", "give drop-ins to the units they are meant for"},
		guarded{systemdDir + "/drover-.service.d", true, "drop-ins for every drover-* unit, drover-agent's included", "give drop-ins to the units they are meant for"},
	)
	g = append(g, guarded{unitPath(kubeletUnit), false,
		"the image's kubelet unit, which starts the kubelet with the flags drover renders (a node without it cannot join)",
		"give kubelet.service a drop-in (one that does not set ExecStart=, EnvironmentFile= or KUBELET_ARGS)"})
	for _, u := range agentUnits() {
		g = append(g,
			guarded{systemdDir + "/" + u, false, whyAgent, insteadAgent},
			guarded{systemdDir + "/" + u + ".d", true, whyAgent + " (drop-ins)", insteadAgent},
			guarded{"/etc/systemd/system.control/" + u + ".d", true, whyAgent + " (systemctl set-property drop-ins)", insteadAgent},
		)
	}
	for _, r := range nodeconfig.RenderedFiles() {
		why, instead := whyRendered, "set "+r.Via+" in the node file ("+nodeconfig.Path+")"
		if r.Instead != "" {
			why, instead = "drover-agent renders it from "+r.Via+" at every boot", r.Instead
		}
		g = append(g, guarded{r.Path, false, why, instead})
	}
	for _, p := range nodeconfig.KubeletCredentials() {
		g = append(g, guarded{p, true, whyKubelet, insteadCreds})
	}
	return append(g, unitSurface()...)
}

// unitSurface follows systemd's unit search path (unitSearchDirs): the
// guarded units' fragments in every search directory, where one earlier
// in the list replaces the image's; every drop-in directory of the
// agent's units; the checked units' drop-in directories under /run,
// which only a program (a tmpfiles.d line) could fill and no check could
// read; and what makes units or accounts without being a unit or an
// account file. These come after the entries above, so a path both
// cover keeps its older, more specific message.
func unitSurface() []guarded {
	var g []guarded
	for _, u := range guardedUnits() {
		why, instead := whyAgent, insteadAgent
		switch u.name {
		case kubeletUnit:
			why = "the image's kubelet unit, which starts the kubelet with the flags drover renders (a node without it cannot join)"
			instead = "give kubelet.service a drop-in (one that does not set ExecStart=, EnvironmentFile= or KUBELET_ARGS)"
		case containerdUnit:
			why = "the image's containerd unit, which starts containerd with the configuration drover renders"
			instead = "give containerd.service a drop-in (one that does not set ExecStart= or EnvironmentFile=)"
		}
		for _, dir := range unitSearchDirs {
			if dir == imageUnitDir || underDir(dir, "/usr") {
				continue
			}
			g = append(g, guarded{dir + "/" + u.name, false, why + "; a unit file of that name in " + dir + " replaces the image's", instead})
			for _, d := range dropinDirNames(u.name) {
				switch {
				case !u.checked:
					g = append(g, guarded{dir + "/" + d, true, whyAgent + " (drop-ins: systemd reads " + d + " for " + u.name + ")", insteadAgent})
				case underDir(dir, "/run") && d != unitType(u.name)+".d":
					g = append(g, guarded{dir + "/" + d, true, u.name + " drop-ins under /run, which only a program could write and no check can read", "give " + u.name + " drop-ins as files in " + systemdDir + "/" + d})
				}
			}
		}
	}
	return append(g,
		guarded{"/etc/sysusers.d", true, "systemd-sysusers would create accounts from it; " + whyAccounts, insteadImage},
		guarded{"/run/sysusers.d", true, "systemd-sysusers would create accounts from it; " + whyAccounts, insteadImage},
		guarded{"/run/tmpfiles.d", true, "tmpfiles.d lines there run as root and no check can read them", "give tmpfiles.d files in " + tmpfilesDir},
		guarded{"/etc/systemd/system-generators", true, whyGenerators, insteadGenerators},
		guarded{"/run/systemd/system-generators", true, whyGenerators, insteadGenerators},
		guarded{"/etc/systemd/system-environment-generators", true, whyGenerators, insteadGenerators},
		guarded{"/run/systemd/system-environment-generators", true, whyGenerators, insteadGenerators},
	)
}

// Of the other directories that root services read from /etc, none is
// written unless extensionPoints lists it: sysctl.d (its keys checked
// against the security set, sysctl.go), modules-load.d (the image's
// modules only) and tmpfiles.d (tmpfiles.go); binfmt.d, udev's rules.d,
// modprobe.d and the rest are refused as not extension points.
const (
	whyGenerators     = "generators run as root at every daemon-reload and write units into /run/systemd/generator*, where no check reaches"
	insteadGenerators = "ship generators in the image recipe; give units and drop-ins as files"
)

// agentUnits are the image's drover-* units (agent/units), e.g.
// drover-agent.service; kubelet.service is an image unit users may give
// drop-ins to.
func agentUnits() []string {
	ents, _ := units.FS.ReadDir(".")
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "drover-") {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

func components(p string) []string { return strings.Split(strings.TrimPrefix(p, "/"), "/") }

// covers reports whether p (clean, absolute) is the entry or, for a tree,
// below it.
func (g guarded) covers(p string) bool {
	pc, gc := components(p), components(g.pattern)
	if len(pc) < len(gc) || (!g.tree && len(pc) != len(gc)) {
		return false
	}
	ok, _ := path.Match(g.pattern, "/"+strings.Join(pc[:len(gc)], "/"))
	return ok
}

// holds reports whether p is a directory above the entry.
func (g guarded) holds(p string) bool {
	pc, gc := components(p), components(g.pattern)
	if len(pc) >= len(gc) {
		return false
	}
	ok, _ := path.Match("/"+strings.Join(gc[:len(pc)], "/"), p)
	return ok
}

// below says which guarded tree p is in, when that is not p itself.
func (g guarded) below(p string) string {
	if g.tree && g.pattern != p {
		return " (it is below " + g.pattern + ")"
	}
	return ""
}

// surface answers questions about one protected surface.
type surface []guarded

func (s surface) covering(p string) (guarded, bool) {
	for _, g := range s {
		if g.covers(p) {
			return g, true
		}
	}
	return guarded{}, false
}

func (s surface) holding(p string) (guarded, bool) {
	for _, g := range s {
		if g.holds(p) {
			return g, true
		}
	}
	return guarded{}, false
}

// checkProtected refuses every entry that writes into the protected
// surface, replaces a directory above it with a file or link, loosens such
// a directory, disables the agent, or links to what the surface guards.
func checkProtected(cfg types.Config, c *collector) {
	s := surface(protectedSurface())
	links := nodeResolver(cfg.Storage.Links)
	aliases := unitAliases(cfg.Storage.Links, links)
	dropins := newDropinIndex(aliases)
	onNode := nodeResolver(nil) // a path below one of the config's links is Ignition's to refuse
	for _, n := range derivedNodes(cfg) {
		if g, ok := s.covering(n.path); ok {
			c.addf(n.at, "%q is protected%s: %s — %s", n.path, g.below(n.path), g.why, g.instead)
			continue
		}
		if p := onNode.resolveParent(n.path); p != n.path {
			if g, ok := s.covering(p); ok {
				c.addf(n.at, "%q is %q on the node, through the node's own symbolic links, and %s is protected: %s — %s", n.path, p, g.pattern, g.why, g.instead)
				continue
			}
		}
		if u, name, ok := dropins.of(n.path); ok && (!u.checked || n.link) {
			checkDropinNode(n, u, name, c)
			continue
		}
		if n.dir {
			continue
		}
		if g, ok := s.holding(n.path); ok {
			c.addf(n.at, "%q would replace the directory that holds %s with a file or link, and %s is protected: %s — %s", n.path, g.pattern, g.pattern, g.why, g.instead)
		}
	}
	for i, d := range cfg.Storage.Directories {
		if d.Mode == nil && d.User.ID == nil && util.NilOrEmpty(d.User.Name) && d.Group.ID == nil && util.NilOrEmpty(d.Group.Name) {
			continue
		}
		if g, ok := s.holding(path.Clean(d.Path)); ok && path.IsAbs(d.Path) {
			c.addf([]any{"storage", "directories", i}, "changing the mode or owner of %q is refused: it holds %s, which is protected (%s) — leave mode, user and group unset", d.Path, g.pattern, g.why)
		}
	}
	for i, u := range cfg.Systemd.Units {
		if u.Enabled != nil && !*u.Enabled && slices.Contains(agentUnits(), u.Name) {
			c.addf([]any{"systemd", "units", i, "enabled"}, "disabling %s is refused: %s — %s", u.Name, whyAgent, insteadAgent)
		}
	}
	for i, l := range cfg.Storage.Links {
		if l.Target == nil || !path.IsAbs(l.Path) {
			continue
		}
		at := []any{"storage", "links", i, "target"}
		kind := "symbolic link"
		if util.IsTrue(l.Hard) {
			kind = "hard link"
		}
		// The target as the node will follow it: through its links and
		// the config's (/var/run/x is /run/x), ".." after each.
		t := linkTarget(path.Clean(l.Path), *l.Target)
		if util.IsTrue(l.Hard) {
			t = links.resolveParent(t)
		} else {
			t = links.resolve(t)
		}
		switch {
		case util.IsTrue(l.Hard) && !underWritable(t):
			c.addf(at, "hard link target %q is not under /etc or /var; a hard link cannot reach into the read-only root filesystem — link to a file under /etc or /var, or write the file itself", *l.Target)
			continue
		case !underWritable(t) && !readOnlyTarget(t):
			c.addf(at, "symbolic link target %q is outside /etc and /var; through it, whatever writes %s would write to %s — link to a file under /etc, /var or the read-only /usr, or write the file itself", *l.Target, l.Path, t)
			continue
		}
		if g, ok := s.covering(t); ok {
			c.addf(at, "%s target %q is protected%s: %s — link to another file", kind, *l.Target, g.below(t), g.why)
			continue
		}
		if g, ok := s.holding(t); ok {
			c.addf(at, "%s target %q holds %s, which is protected (%s); a link to it is a second way in — link to another directory", kind, *l.Target, g.pattern, g.why)
			continue
		}
		if util.IsTrue(l.Hard) {
			continue
		}
		if _, name, ok := inUnitSearchDir(path.Clean(l.Path)); ok {
			if u, ok := aliases[name]; ok && slices.ContainsFunc(guardedUnits(), func(g guardedUnit) bool { return g.name == u }) {
				c.addf(at, "%q would make %s another name of %s (systemd takes a unit symbolic link into a unit directory for an alias): the drop-ins and settings given for that name would apply to %s — give %s its drop-ins under its own name", *l.Target, name, u, u, u)
			}
		}
	}
}

// checkDropinNode refuses an entry in a drop-in directory of a guarded
// unit that the surface does not list: any entry for the agent's units
// (found under another name the config gives them), a link for the
// checked units, whose drop-ins must be files that can be read.
func checkDropinNode(n node, u guardedUnit, name string, c *collector) {
	also := ""
	if name != u.name {
		also = fmt.Sprintf(" (systemd reads %s.d for it, through the config's alias links)", name)
	}
	if !u.checked {
		c.addf(n.at, "%q is a drop-in of %s%s: %s — %s", n.path, u.name, also, whyAgent, insteadAgent)
		return
	}
	if path.Base(n.path) == name+".d" {
		c.addf(n.at, "%q would make a drop-in directory of %s%s a link; systemd would read what it points to, which no check can — give the drop-ins as files with inline contents", n.path, u.name, also)
		return
	}
	c.addf(n.at, "%q is a link in a drop-in directory of %s%s; systemd would read what it points to, which no check can — give the drop-in as a file with inline contents", n.path, u.name, also)
}

// readOnlyTarget admits the symbolic-link targets outside /etc and /var
// that nothing can be written through: the image's dm-verity /usr
// (/etc/localtime -> /usr/share/zoneinfo/..., enabling an image unit by
// linking to /usr/lib/systemd/system/...) and /dev/null (systemd's mask).
// A link into /dev, /proc, /sys, /run or /boot could turn an innocent
// write into one to a device or a kernel knob.
func readOnlyTarget(t string) bool {
	return t == "/dev/null" || underDir(t, "/usr")
}

const kubeletUnit = "kubelet.service"
