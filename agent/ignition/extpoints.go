package ignition

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/coreos/ignition/v2/config/util"
	"github.com/coreos/ignition/v2/config/v3_5/types"

	"github.com/drover-os/drover/agent/nodeconfig"
)

// The node judges a user-data by an allowlist: extensionPoints is every
// place it may write, what each is for and what is checked in it. A list
// of forbidden paths (the protected surface) always lags behind what the
// image's root services read from /etc and /var; a review found classes it
// let through (ld.so.preload, system.conf's DefaultEnvironment=, udev and
// modprobe commands, profile.d). An allowlist fails closed: a new class is
// refused until someone decides it is safe and adds a row, and the docs'
// tables are generated from these rows (TestDocsTables), so they cannot
// say otherwise.
//
// The protected surface stays: it is checked first and words the
// refusals of the node's own files more precisely, and it guards what
// lies inside an extension point (drover-agent's units in
// /etc/systemd/system, the agent-rendered timesyncd drop-in).
type extensionPoint struct {
	pattern string   // a clean absolute path or a path.Match pattern
	tree    bool     // the directory and everything below it
	except  []string // trees below pattern that belong to the node
	what    string   // what it is for
	checked string   // what the policy checks in what is written there
	// tmpfiles: a tmpfiles.d line may act there too. Only where nothing
	// is checked in the contents: a line could write a unit, a drop-in or
	// a sysctl.d file the checks of those never read.
	tmpfiles bool
}

const (
	sysctlDir      = "/etc/sysctl.d"
	modulesLoadDir = "/etc/modules-load.d"
)

// extensionPoints is the one table; see docs/node-config.md, "What
// user-data may change". Kept small on purpose: each row is something the
// repo's own user-data (testdata, the smoke harness, drover userdata)
// needs or a launch-template author cannot do otherwise.
func extensionPoints() []extensionPoint {
	return []extensionPoint{
		{pattern: nodeconfig.Path, what: "the node file: cluster, kubelet and containerd settings",
			checked: "agent/nodeconfig: the schema, and the settings it may not lower (see Fields)"},
		{pattern: "/etc/containerd/certs.d", tree: true, tmpfiles: true, what: "registry hosts (hosts.toml) and their CA certificates",
			checked: "nothing: containerd reads them as data"},
		{pattern: "/etc/cni/net.d", tree: true, tmpfiles: true, what: "CNI network configuration, for a network add-on that does not write its own",
			checked: "nothing: the plugins it names are the image's (those the recipe's cni.plugins chose), in the read-only /usr/lib/cni (containerd's bin_dirs)"},
		{pattern: systemdDir, tree: true, what: "new units, their drop-ins, enable links and masks; drop-ins of kubelet.service and containerd.service",
			checked: "every unit and drop-in: no lifecycle dependency on a protected unit (below); kubelet and containerd drop-ins: only the directives below; drover-* units and their drop-ins: refused"},
		{pattern: "/etc/systemd/timesyncd.conf.d/*.conf", what: "time servers (NTP=) after the ones drover-agent renders from the instance metadata",
			checked: "the agent's own 80-drover.conf is refused"},
		{pattern: "/etc/systemd/journald.conf.d/*.conf", what: "journal size and retention",
			checked: "nothing: journald's settings do not reach the node's guarantees"},
		{pattern: sysctlDir + "/*.conf", what: "kernel settings for workloads (vm.max_map_count, net.core.somaxconn, …)",
			checked: "every key, globs and slashes included, against the node's security set (below); inline contents only"},
		{pattern: modulesLoadDir + "/*.conf", what: "kernel modules to load at boot",
			checked: "nothing: only the image's modules, in the read-only /usr/lib/modules, can load"},
		{pattern: tmpfilesDir + "/*.conf", what: "directories, files and links for applications at boot",
			checked: "every line: it may act only on the rows marked \"tmpfiles.d\" and on /tmp (x and X lines anywhere; d, v, q, Q and e without mode, owner or age on a directory above such a row), and on nothing protected; inline contents only"},
		{pattern: "/etc/opt", tree: true, tmpfiles: true, what: "configuration and scripts of the config's own units (/etc/opt/<app>), rebuilt at every boot",
			checked: "nothing: no service of the image reads /etc/opt"},
		{pattern: "/etc/hosts", what: "static host names", checked: "nothing"},
		{pattern: "/etc/localtime", what: "the time zone, as a link into /usr/share/zoneinfo", checked: "a link must point into the read-only /usr"},
		{pattern: "/var/lib/kubelet/config.json", what: "image pull credentials the kubelet reads", checked: "nothing"},
		{pattern: "/var/lib", tree: true, tmpfiles: true, except: nodeVarDirs, what: "application state, scripts and data (/var/lib/<app>)",
			checked: "not the node's own directories: " + strings.Join(nodeVarDirs, ", ")},
		{pattern: "/var/log", tree: true, tmpfiles: true, except: []string{"/var/log/journal"}, what: "application logs (/var/log/<app>)",
			checked: "not /var/log/journal"},
		{pattern: "/var/cache", tree: true, tmpfiles: true, what: "application caches", checked: "nothing"},
		{pattern: "/var/opt", tree: true, tmpfiles: true, what: "state of add-on packages", checked: "nothing"},
		{pattern: "/var/tmp", tree: true, tmpfiles: true, what: "temporary files that survive a reboot", checked: "nothing"},
	}
}

// nodeVarDirs are the node's own directories in /var/lib: the agent's
// state, the kubelet's and containerd's (pods, images, credentials) and
// systemd's (timers' stamps, the random seed). User-data that wrote there
// would change what the node runs behind its back.
var nodeVarDirs = []string{reservedDir, "/var/lib/kubelet", "/var/lib/containerd", "/var/lib/systemd"}

// covers reports whether p (clean, absolute) is in the extension point.
func (e extensionPoint) covers(p string) bool {
	for _, x := range e.except {
		if p == x || underDir(p, x) {
			return false
		}
	}
	g := guarded{pattern: e.pattern, tree: e.tree}
	return g.covers(p)
}

// holds reports whether p is a directory above the extension point.
func (e extensionPoint) holds(p string) bool {
	return guarded{pattern: e.pattern}.holds(p)
}

// extensionPointOf returns the extension point p is in.
func extensionPointOf(p string) (extensionPoint, bool) {
	for _, e := range extensionPoints() {
		if e.covers(p) {
			return e, true
		}
	}
	return extensionPoint{}, false
}

// isTreeRoot reports whether p is the directory of a tree extension
// point: the image's, which what is below it relies on (/var/log holds
// the journal), so its mode and owner are not user-data's.
func isTreeRoot(p string) bool {
	for _, e := range extensionPoints() {
		if e.tree && e.pattern == p {
			return true
		}
	}
	return false
}

func holdsExtensionPoint(p string) bool {
	for _, e := range extensionPoints() {
		if e.holds(p) {
			return true
		}
	}
	return false
}

// checkExtensionPoints refuses every entry that writes outside the
// extension points. Entries the protected surface or the writable-tree
// check already refused are left to their more precise messages.
func checkExtensionPoints(cfg types.Config, c *collector) {
	s := surface(protectedSurface())
	onNode := nodeResolver(nil)
	for _, n := range derivedNodes(cfg) {
		p := n.path
		if !underWritable(p) {
			continue // checkNodePath
		}
		if _, ok := s.covering(p); ok {
			continue // checkProtected
		}
		if q := onNode.resolveParent(p); q != p {
			if _, ok := s.covering(q); ok {
				continue // checkProtected
			}
			p = q // /var/run/x is /run/x on the node
		}
		if n.link && isTreeRoot(p) {
			c.addf(n.at, "%q would make the directory of an extension point a link: what is written there would land where the link points — give files in it instead", n.path)
			continue
		}
		if _, ok := extensionPointOf(p); ok {
			continue
		}
		where := ""
		if p != n.path {
			where = fmt.Sprintf(" (%q on the node, through its own links)", p)
		}
		if _, ok := s.holding(p); n.dir && (ok || holdsExtensionPoint(p)) {
			continue // making sure an image directory exists; its mode is checked below and by checkProtected
		}
		if n.link && p == tmpfilesDir {
			continue // checkTmpfiles says why
		}
		c.addf(n.at, "%q%s is not an extension point of the node: user-data may write only the places listed in docs/node-config.md (What user-data may change) — %s", n.path, where, insteadOf(p))
	}
	for i, d := range cfg.Storage.Directories {
		if !path.IsAbs(d.Path) || (d.Mode == nil && d.User.ID == nil && util.NilOrEmpty(d.User.Name) && d.Group.ID == nil && util.NilOrEmpty(d.Group.Name)) {
			continue
		}
		p := path.Clean(d.Path)
		if _, ok := s.holding(p); ok {
			continue // checkProtected
		}
		if (isTreeRoot(p) || holdsExtensionPoint(p)) && underWritable(p) {
			c.addf([]any{"storage", "directories", i}, "changing the mode or owner of %q is refused: it is the image's directory at or above an extension point, and what is below relies on it — leave mode, user and group unset", d.Path)
		}
	}
}

// insteadOf says what to use instead of a path that is not an extension
// point: a hint by where it is, the table's own pointer otherwise.
func insteadOf(p string) string {
	for _, h := range []struct{ under, instead string }{
		{"/etc/systemd", "give units and drop-ins in " + systemdDir + " and set Environment= in the units that need it"},
		{"/etc/kubernetes", "set the kubelet's settings in the node file (" + nodeconfig.Path + ")"},
		{"/etc/containerd", "set containerd.mirrors in the node file, or give registry hosts in /etc/containerd/certs.d"},
		{"/etc/modprobe.d", "list modules to load in " + modulesLoadDir + "; module options belong in the image recipe"},
		{"/etc/udev", "ship udev rules in the image recipe"},
		{"/etc/ld.so.preload", "ship libraries in the image recipe; a drover node preloads nothing"},
		{"/etc/ld.so.conf.d", "ship libraries in the image recipe"},
		{"/etc/ld.so.cache", "ship libraries in the image recipe"},
		{"/etc/profile.d", "a drover node has no login; set Environment= in the units that need it"},
		{"/etc/environment", "a drover node has no login; set Environment= in the units that need it"},
		{"/var", "keep application state in /var/lib/<app>, /var/log/<app> or /var/cache/<app>"},
	} {
		if p == h.under || underDir(p, h.under) {
			return h.instead
		}
	}
	return "keep application files in /var/lib/<app> and node settings in the node file (" + nodeconfig.Path + "), or ship them in the image recipe"
}

// tmpfilesPlaces are where a tmpfiles.d line may act besides the rows
// marked tmpfiles: /tmp, which user-data cannot write but an application
// may want a directory in at boot.
var tmpfilesPlaces = []extensionPoint{{pattern: "/tmp", tree: true}}

// tmpfilesMayAct reports whether every path p (clean, absolute, maybe a
// glob) can match lies where a tmpfiles.d line may act: the literal
// directory before the first wildcard must be in such a place, and no
// directory the place excepts may be reachable through the wildcard.
func tmpfilesMayAct(p string) bool {
	pc := components(p)
	k := slices.IndexFunc(pc, hasMeta)
	for _, e := range append(extensionPoints(), tmpfilesPlaces...) {
		if !e.tmpfiles && e.pattern != "/tmp" {
			continue
		}
		if k < 0 {
			if e.covers(p) {
				return true
			}
			continue
		}
		base := "/" + strings.Join(pc[:k], "/")
		if !e.tree || !e.covers(base) || base == e.pattern && k == 0 {
			continue
		}
		reaches := slices.ContainsFunc(e.except, func(x string) bool {
			xc := components(x)
			return len(pc) >= len(xc) && componentsOverlap(pc[:len(xc)], xc) || len(pc) < len(xc) && componentsOverlap(pc, xc[:len(pc)])
		})
		if !reaches {
			return true
		}
	}
	return false
}
