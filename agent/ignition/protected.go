package ignition

import (
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
	return g
}

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
	for _, n := range derivedNodes(cfg) {
		if g, ok := s.covering(n.path); ok {
			c.addf(n.at, "%q is protected%s: %s — %s", n.path, g.below(n.path), g.why, g.instead)
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
		t := *l.Target
		if !path.IsAbs(t) {
			t = path.Join(path.Dir(path.Clean(l.Path)), t)
		}
		t = path.Clean(t)
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
		}
	}
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

// checkKubeletDropins refuses kubelet.service drop-ins that decide the
// kubelet's command line: ExecStart=, EnvironmentFile= (which can set
// KUBELET_ARGS over /etc/default/kubelet) and an Environment= setting
// KUBELET_ARGS. With them a drop-in could pass --anonymous-auth=true or
// --read-only-port, the flags the node file may not set. Drop-ins given
// as storage files are judged by their inline contents; remote ones are
// refused, since the policy judges the config before anything is fetched.
func checkKubeletDropins(cfg *Config, c *collector) {
	for i, u := range cfg.Ignition.Systemd.Units {
		if u.Name != kubeletUnit {
			continue
		}
		for j, d := range u.Dropins {
			if d.Contents != nil {
				if key := kubeletCommandLineKey(*d.Contents); key != "" {
					c.addf([]any{"systemd", "units", i, "dropins", j, "contents"}, "a kubelet.service drop-in may not set %s: it would decide the kubelet's command line, and with it settings the node file may not lower — set the kubelet's configuration in the node file's kubelet.config", key)
				}
			}
		}
	}
	dir := unitPath(kubeletUnit) + ".d/"
	for i, f := range cfg.Ignition.Storage.Files {
		if i >= len(cfg.files) || !strings.HasPrefix(path.Clean(f.Path), dir) {
			continue
		}
		fc := cfg.files[i]
		if !fc.complete() {
			c.addf([]any{"storage", "files", i, "contents"}, "a kubelet.service drop-in must be given inline (a data: URL or systemd.units dropins), so that it can be checked for ExecStart=, EnvironmentFile= and KUBELET_ARGS — inline it")
			continue
		}
		if key := kubeletCommandLineKey(string(fc.final(nil))); key != "" {
			c.addf([]any{"storage", "files", i, "contents"}, "a kubelet.service drop-in may not set %s: it would decide the kubelet's command line, and with it settings the node file may not lower — set the kubelet's configuration in the node file's kubelet.config", key)
		}
	}
}

// kubeletCommandLineKey names the first setting of a unit text that
// decides the kubelet's command line, or "".
func kubeletCommandLineKey(unit string) string {
	for _, line := range strings.Split(unit, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		switch k = strings.TrimSpace(k); {
		case k == "ExecStart", k == "EnvironmentFile":
			return k + "="
		case k == "Environment" && strings.Contains(v, "KUBELET_ARGS"):
			return "KUBELET_ARGS (Environment=)"
		}
	}
	return ""
}
