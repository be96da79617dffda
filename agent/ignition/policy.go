package ignition

import (
	"net/url"
	"path"
	"sort"
	"strings"

	"github.com/coreos/ignition/v2/config/util"
	"github.com/coreos/ignition/v2/config/v3_5/types"
)

// reservedDir holds drover-agent's own state (the stored user-data and the
// digests the guard checks); a config that could rewrite it could also
// rewrite what "immutable" is checked against.
const reservedDir = "/var/lib/drover"

// checkPolicy refuses what an immutable node cannot honour. It is pure: it
// looks only at the config, so drover validate on a build host and
// drover-agent on the node give the same verdict in the same words.
func checkPolicy(cfg types.Config, c *collector) {
	checkIgnitionSection(cfg.Ignition, c)
	checkDiskSections(cfg.Storage, c)
	for i := range cfg.KernelArguments.ShouldExist {
		c.add(msgKernelArgs, "kernelArguments", "shouldExist", i)
	}
	for i := range cfg.KernelArguments.ShouldNotExist {
		c.add(msgKernelArgs, "kernelArguments", "shouldNotExist", i)
	}
	checkPasswd(cfg.Passwd, c)
	checkFiles(cfg.Storage.Files, c)
	for i, d := range cfg.Storage.Directories {
		at := []any{"storage", "directories", i}
		checkNodePath(d.Path, at, c)
		checkMode(d.Mode, at, c)
	}
	for i, l := range cfg.Storage.Links {
		checkNodePath(l.Path, []any{"storage", "links", i}, c)
	}
	checkUnits(cfg.Systemd.Units, c)
	checkCollisions(cfg, c)
	checkProtected(cfg, c)
	checkExtensionPoints(cfg, c)
}

const (
	msgKernelArgs  = "kernel arguments are not supported; the kernel command line is part of the signed boot entry — set it in the image recipe instead"
	msgDiskLayout  = "the disk layout is fixed by the drover image and only /var persists"
	msgNoLogin     = "a drover node has no login"
	msgWholeConfig = "the user-data must be the complete config so the node applies exactly what was validated"
)

func checkIgnitionSection(ig types.Ignition, c *collector) {
	for i := range ig.Config.Merge {
		c.add("merging a remote config is not supported; "+msgWholeConfig+" — inline the merged config instead", "ignition", "config", "merge", i)
	}
	if ig.Config.Replace.Source != nil {
		c.add("replacing the config from a remote source is not supported; "+msgWholeConfig+" — inline the replacement config instead", "ignition", "config", "replace")
	}
	for i := range ig.Security.TLS.CertificateAuthorities {
		c.add("custom certificate authorities are not supported; remote contents are authenticated by verification.hash, not by TLS — remove it and give each http(s) source a verification.hash", "ignition", "security", "tls", "certificateAuthorities", i)
	}
	p := ig.Proxy
	if p.HTTPProxy != nil || p.HTTPSProxy != nil || len(p.NoProxy) > 0 {
		c.add("HTTP proxies are not supported; drover-agent fetches over the instance's own network — serve the contents from a reachable URL or inline them as data: URLs", "ignition", "proxy")
	}
	if ig.Timeouts.HTTPResponseHeaders != nil || ig.Timeouts.HTTPTotal != nil {
		c.add("fetch timeouts are not supported; drover-agent bounds every boot phase itself — remove ignition.timeouts", "ignition", "timeouts")
	}
}

func checkDiskSections(s types.Storage, c *collector) {
	for i := range s.Disks {
		c.add("partitioning disks is not supported; "+msgDiskLayout+" — remove storage.disks", "storage", "disks", i)
	}
	for i := range s.Filesystems {
		c.add("creating or mounting filesystems is not supported; "+msgDiskLayout+" — remove storage.filesystems", "storage", "filesystems", i)
	}
	for i := range s.Raid {
		c.add("RAID arrays are not supported; "+msgDiskLayout+" — remove storage.raid", "storage", "raid", i)
	}
	for i := range s.Luks {
		c.add("LUKS volumes are not supported; "+msgDiskLayout+" — remove storage.luks", "storage", "luks", i)
	}
}

// checkPasswd refuses every user and group: accounts are part of the image
// (build-time finalize writes passwd/group), and with no login there is
// nothing a user-data account could be for.
func checkPasswd(p types.Passwd, c *collector) {
	for i, u := range p.Users {
		at := []any{"passwd", "users", i}
		specific := false
		if u.PasswordHash != nil {
			c.add("passwords are not supported; "+msgNoLogin+" — remove passwordHash and reach the node with kubectl debug node/<name>", sub(at, "passwordHash")...)
			specific = true
		}
		if len(u.SSHAuthorizedKeys) > 0 {
			c.add("SSH keys are not supported; "+msgNoLogin+" and no SSH server — remove sshAuthorizedKeys and reach the node with kubectl debug node/<name>", sub(at, "sshAuthorizedKeys")...)
			specific = true
		}
		if !specific {
			c.addf(at, "creating or changing user %q is not supported; %s and its accounts are fixed by the image — add system users in the image recipe instead", u.Name, msgNoLogin)
		}
	}
	for i, g := range p.Groups {
		c.addf([]any{"passwd", "groups", i}, "creating or changing group %q is not supported; a drover node's accounts are fixed by the image — add groups in the image recipe instead", g.Name)
	}
}

func checkFiles(files []types.File, c *collector) {
	for i, f := range files {
		at := []any{"storage", "files", i}
		checkNodePath(f.Path, at, c)
		checkMode(f.Mode, at, c)
		checkResource(f.Contents, sub(at, "contents"), c)
		for j, a := range f.Append {
			checkResource(a, sub(at, "append", j), c)
		}
		if len(f.Append) > 0 && f.Contents.Source == nil && underDir(path.Clean(f.Path), "/var") {
			c.addf(sub(at, "append"), "appending to %q without contents is not supported; /var persists and the config is re-applied at every boot, so the fragment would be appended again — give the complete contents instead", f.Path)
		}
	}
}

// checkNodePath keeps every managed path inside the two writable trees.
// Ignition has already refused relative and unclean paths; the policy
// still judges the cleaned path so "/etc/../usr" cannot slip through if a
// later Ignition relaxes that rule.
func checkNodePath(p string, at []any, c *collector) {
	if !path.IsAbs(p) {
		return // Ignition: "path not absolute"
	}
	clean := path.Clean(p)
	where := sub(at, "path")
	switch {
	case clean == "/etc" || clean == "/var":
		c.addf(where, "%q is the top of a writable tree, not a path inside it; only paths below /etc and /var can be managed — name a path inside it", p)
	case !underWritable(clean) && clean != p:
		c.addf(where, "%q resolves to %q, which is outside /etc and /var; the root filesystem is read-only — ship it in the image recipe instead", p, clean)
	case !underWritable(clean):
		c.addf(where, "%q is outside /etc and /var; the root filesystem is read-only — ship it in the image recipe instead", p)
	}
}

// checkMode refuses setuid and setgid bits: a privilege-raising binary has
// no business in configuration trees.
func checkMode(mode *int, at []any, c *collector) {
	if mode != nil && *mode&0o6000 != 0 {
		c.addf(sub(at, "mode"), "mode %#o sets setuid or setgid; drover refuses privilege-raising files in /etc and /var — ship such programs in the image recipe instead", *mode)
	}
}

// checkResource admits data: URLs and http(s) URLs that carry a hash.
// Ignition has already refused unknown schemes and malformed hashes.
func checkResource(r types.Resource, at []any, c *collector) {
	if len(r.HTTPHeaders) > 0 {
		c.add("HTTP headers are not supported; drover-agent fetches without credentials and checks verification.hash instead — use a URL that needs no headers", sub(at, "httpHeaders")...)
	}
	if r.Source == nil {
		return
	}
	src := *r.Source
	u, err := url.Parse(src)
	if err != nil {
		return // Ignition: "unable to parse url"
	}
	switch u.Scheme {
	case "s3", "gs", "tftp", "arn":
		c.addf(sub(at, "source"), "%q uses the %s scheme, which drover-agent does not fetch; only data: and http(s) sources are supported — inline the contents as a data: URL or serve them over https with verification.hash", src, u.Scheme)
	case "http", "https":
		if r.Verification.Hash == nil {
			c.addf(sub(at, "source"), "%q has no verification.hash; drover-agent applies only contents it can verify — add \"verification\": {\"hash\": \"sha256-<hex>\"}", src)
		}
	}
}

func checkUnits(units []types.Unit, c *collector) {
	for i, u := range units {
		at := []any{"systemd", "units", i}
		for j, d := range u.Dropins {
			if !plainName(d.Name) {
				c.addf(sub(at, "dropins", j, "name"), "drop-in name %q is not a plain file name; drop-ins are written to /etc/systemd/system/<unit>.d/<name> — use a name without \"/\"", d.Name)
			}
		}
		if !plainName(u.Name) {
			c.addf(sub(at, "name"), "unit name %q is not a plain file name; units are written to /etc/systemd/system/<name> — use a name without \"/\"", u.Name)
			continue
		}
		if util.IsTrue(u.Mask) {
			if u.Contents != nil {
				c.add("a masked unit cannot also have contents; masking makes /etc/systemd/system/"+u.Name+" a link to /dev/null — remove mask or contents", sub(at, "mask")...)
			}
			if util.IsTrue(u.Enabled) {
				c.add("a masked unit cannot also be enabled; a masked unit never starts — remove mask or enabled", sub(at, "mask")...)
			}
			if len(u.Dropins) > 0 {
				c.add("a masked unit cannot also have drop-ins; systemd ignores drop-ins of a masked unit — remove mask or dropins", sub(at, "mask")...)
			}
		}
		if util.IsTrue(u.Enabled) && !util.IsTrue(u.Mask) {
			for _, l := range enableLinks(u, units) {
				rel := strings.TrimPrefix(l.path, systemdDir+"/")
				dir, base, _ := strings.Cut(rel, "/")
				if !plainName(dir) || !plainName(base) {
					c.addf(sub(at, "contents"), "the [Install] section makes the link %q, which is not a plain unit name in a .wants or .requires directory; enable links are created in /etc/systemd/system — fix WantedBy=, RequiredBy= or DefaultInstance=", rel)
				}
			}
		}
		if util.IsTrue(u.Enabled) && isTemplate(u.Name) && defaultInstance(u) == "" {
			c.addf(sub(at, "enabled"), "template unit %q cannot be enabled without an instance; systemd enables instances, not templates — enable %q instead or set DefaultInstance= in [Install]", u.Name, strings.Replace(u.Name, "@.", "@<instance>.", 1))
		}
	}
}

func plainName(n string) bool {
	return n != "" && n != "." && n != ".." && !strings.Contains(n, "/") && !strings.ContainsRune(n, 0)
}

func underWritable(p string) bool {
	p = path.Clean(p)
	return path.IsAbs(p) && (underDir(p, "/etc") || underDir(p, "/var"))
}

// underDir reports whether p lies strictly below dir (both clean).
func underDir(p, dir string) bool {
	return strings.HasPrefix(p, dir+"/")
}

// checkCollisions refuses two entries that would write the same path, or a
// path below a file or link another entry writes: the second would fail
// half-way through the apply, or silently undo the first. Ignition already
// refuses duplicates within storage, storage paths equal to a unit's or a
// drop-in's, and paths below a storage link; what is left involves the
// paths drover derives (mask and enable links) or files used as parents.
func checkCollisions(cfg types.Config, c *collector) {
	nodes := derivedNodes(cfg)
	first := map[string]int{}
	for i, n := range nodes {
		j, ok := first[n.path]
		if !ok {
			first[n.path] = i
			continue
		}
		if n.derived || nodes[j].derived {
			c.addf(n.at, "%q is also written by %s — keep one of them", n.path, jsonPath(nodes[j].at))
		}
	}
	// Sorted, the paths below p follow p+"/" directly: no quadratic scan,
	// however many entries a (decompressed) user-data holds.
	order := make([]int, len(nodes))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return nodes[order[a]].path < nodes[order[b]].path })
	for i, parent := range nodes {
		if parent.dir || first[parent.path] != i {
			continue
		}
		prefix := parent.path + "/"
		k := sort.Search(len(order), func(k int) bool { return nodes[order[k]].path >= prefix })
		for ; k < len(order) && strings.HasPrefix(nodes[order[k]].path, prefix); k++ {
			child := nodes[order[k]]
			if parent.link && !parent.derived && isStorage(child.at) {
				continue // Ignition: "... path includes link in config"
			}
			c.addf(child.at, "%q lies below %q, which %s writes as a file or link — move one of them", child.path, parent.path, jsonPath(parent.at))
		}
	}
}

func isStorage(at []any) bool { return len(at) > 0 && at[0] == "storage" }

// node is a path the plan would write, with the config entry behind it.
type node struct {
	path    string
	dir     bool
	link    bool
	derived bool // a mask or enable link, which Ignition does not check
	at      []any
}

// derivedNodes lists every absolute path a config manages, cleaned, in
// config order.
func derivedNodes(cfg types.Config) []node {
	var out []node
	add := func(n node) {
		if path.IsAbs(n.path) {
			n.path = path.Clean(n.path)
			out = append(out, n)
		}
	}
	for i, d := range cfg.Storage.Directories {
		add(node{path: d.Path, dir: true, at: []any{"storage", "directories", i, "path"}})
	}
	for i, f := range cfg.Storage.Files {
		add(node{path: f.Path, at: []any{"storage", "files", i, "path"}})
	}
	for i, l := range cfg.Storage.Links {
		add(node{path: l.Path, link: true, at: []any{"storage", "links", i, "path"}})
	}
	for i, u := range cfg.Systemd.Units {
		if !plainName(u.Name) {
			continue
		}
		at := []any{"systemd", "units", i}
		switch {
		case util.IsTrue(u.Mask):
			add(node{path: unitPath(u.Name), link: true, derived: true, at: sub(at, "mask")})
		case !util.NilOrEmpty(u.Contents):
			add(node{path: unitPath(u.Name), at: sub(at, "contents")})
		}
		for j, d := range u.Dropins {
			if plainName(d.Name) && !util.NilOrEmpty(d.Contents) {
				add(node{path: dropinPath(u.Name, d.Name), at: sub(at, "dropins", j, "contents")})
			}
		}
		if util.IsTrue(u.Enabled) && !util.IsTrue(u.Mask) {
			for _, l := range enableLinks(u, cfg.Systemd.Units) {
				add(node{path: l.path, link: true, derived: true, at: sub(at, "enabled")})
			}
		}
	}
	return out
}
