package ignition

import (
	"path"
	"slices"
	"strings"

	"github.com/coreos/ignition/v2/config/util"

	"github.com/drover-os/drover/agent/network"
	"github.com/drover-os/drover/agent/nodeconfig"
)

// A securityKey is a kernel setting the node owns: a sysctl.d file of the
// config may not set it, or any key whose glob could reach it.
type securityKey struct {
	key string // a sysctl name or a glob of them, with dots
	why string
}

// securitySet is the node's security set: the kernel hardening the node
// keeps (at the kernel's or the image's value), the settings Kubernetes
// networking needs (network.Sysctls) and those the kubelet refuses to
// start without under protectKernelDefaults (nodeconfig.KubeletSysctls).
// A workload that needs another kernel setting gets it in sysctl.d; one
// of these would lower what every pod on the node relies on.
func securitySet() []securityKey {
	const (
		leak = "it keeps kernel addresses and logs from unprivileged processes"
		run  = "the kernel runs the program it names as root"
	)
	out := []securityKey{
		{"kernel.unprivileged_bpf_disabled", "it keeps eBPF from unprivileged processes"},
		{"kernel.perf_event_paranoid", "it keeps perf events from unprivileged processes"},
		{"kernel.kptr_restrict", leak},
		{"kernel.dmesg_restrict", leak},
		{"kernel.yama.ptrace_scope", "it limits which processes may trace others"},
		{"kernel.core_pattern", "a pipe in it makes the kernel run a program as root on every crash"},
		{"kernel.modprobe", run + " to load a module"},
		{"kernel.hotplug", run + " on every device event"},
		{"kernel.poweroff_cmd", run + " on an orderly power-off"},
		{"kernel.modules_disabled", "it decides whether modules can still load"},
		{"kernel.kexec_load_disabled", "it keeps another kernel from being loaded past the signed boot entry"},
		{"kernel.sysrq", "it decides what the magic SysRq key can do"},
		{"kernel.randomize_va_space", "address space layout randomisation"},
		{"kernel.unprivileged_userns_clone", "it decides whether unprivileged processes may create user namespaces"},
		{"user.max_user_namespaces", "it bounds user namespaces, which pods with hostUsers: false need and others must not abuse"},
		{"vm.unprivileged_userfaultfd", "userfaultfd makes kernel races easier to win"},
		{"vm.mmap_min_addr", "it keeps NULL-pointer dereferences in the kernel from being exploitable"},
		{"fs.protected_*", "the link, FIFO and regular-file protections in sticky directories"},
		{"fs.suid_dumpable", "it keeps core dumps of setuid programs from leaking their memory"},
		{"fs.binfmt_misc.*", "a binfmt_misc registration runs an interpreter for every matching binary"},
		{"kernel.panic*", "the kubelet refuses to start when it differs (protectKernelDefaults)"},
	}
	var extra []securityKey
	for _, m := range []struct {
		set map[string]string
		why string
	}{
		{network.Sysctls(), "Kubernetes networking needs it; drover-agent sets it at every boot"},
		{nodeconfig.KubeletSysctls(), "the kubelet refuses to start when it differs (protectKernelDefaults); drover-agent sets it at every boot"},
	} {
		for k := range m.set {
			if !slices.ContainsFunc(out, func(s securityKey) bool { return keysOverlap(s.key, k) }) {
				extra = append(extra, securityKey{k, m.why})
			}
		}
	}
	slices.SortFunc(extra, func(a, b securityKey) int { return strings.Compare(a.key, b.key) })
	return append(out, extra...)
}

// imageSysctlFiles are the sysctl.d files the image ships (systemd's, and
// Debian's protections of links): a file of the same name in /etc/sysctl.d
// replaces the image's whole, setting none of its keys.
var imageSysctlFiles = []string{"50-default.conf", "50-pid-max.conf", "50-coredump.conf", "99-protect-links.conf", "99-sysctl.conf"}

// sysctlKey is one key a sysctl.d line sets, as systemd-sysctl reads it
// (sysctl.d(5)): the line trimmed, '#' and ';' lines skipped, a leading
// '-' (ignore errors) dropped, the key before '=' trimmed; a key whose
// first separator is '/' has its '/' and '.' swapped.
func sysctlKeys(text string) []struct {
	line int
	key  string
} {
	var out []struct {
		line int
		key  string
	}
	for i, l := range systemdLines(text) {
		l = strings.Trim(l, systemdWhitespace)
		if l == "" || l[0] == '#' || l[0] == ';' {
			continue
		}
		k, _, _ := strings.Cut(l, "=")
		k = strings.Trim(strings.TrimLeft(strings.TrimSpace(k), "-!"), systemdWhitespace)
		if k == "" {
			continue
		}
		if j := strings.IndexAny(k, "./"); j >= 0 && k[j] == '/' {
			k = strings.Map(func(r rune) rune {
				switch r {
				case '/':
					return '.'
				case '.':
					return '/'
				}
				return r
			}, k)
		}
		out = append(out, struct {
			line int
			key  string
		}{i + 1, k})
	}
	return out
}

// keysOverlap reports whether two keys (either may be a glob) can name
// the same setting. Two globs are taken to overlap when their literal
// prefixes do: "net.*" reaches "net.ipv4.ip_forward".
func keysOverlap(a, b string) bool {
	if ok, _ := path.Match(a, b); ok {
		return true
	}
	if ok, _ := path.Match(b, a); ok {
		return true
	}
	pa, pb := literalPrefix(a), literalPrefix(b)
	if !hasMeta(a) && !hasMeta(b) {
		return a == b
	}
	if hasMeta(a) && hasMeta(b) {
		return strings.HasPrefix(pa, pb) || strings.HasPrefix(pb, pa)
	}
	// One glob, one name: a '*' in a sysctl.d glob also matches the dots
	// path.Match keeps it from, so compare the literal prefix.
	if hasMeta(a) {
		return strings.HasPrefix(b, pa)
	}
	return strings.HasPrefix(a, pb)
}

func literalPrefix(s string) string {
	if i := strings.IndexAny(s, "*?["); i >= 0 {
		return s[:i]
	}
	return s
}

// checkSysctl refuses sysctl.d files that set a key of the security set,
// that are not given inline, or that take the name of an image file, and
// every link in /etc/sysctl.d (it would mask an image file or point where
// no check reads).
func checkSysctl(cfg *Config, c *collector) {
	set := securitySet()
	for i, f := range cfg.Ignition.Storage.Files {
		if !path.IsAbs(f.Path) || path.Dir(path.Clean(f.Path)) != sysctlDir {
			continue
		}
		p := path.Clean(f.Path)
		if slices.Contains(imageSysctlFiles, path.Base(p)) {
			c.addf([]any{"storage", "files", i, "path"}, "%s would replace the image's sysctl.d file of that name, and with it the node's own settings — give the file another name", p)
			continue
		}
		at := []any{"storage", "files", i, "contents"}
		if i >= len(cfg.files) || !cfg.files[i].complete() {
			c.addf(at, "a sysctl.d file must be given inline (a data: URL), so that its keys can be checked against the node's security set — inline it")
			continue
		}
		for _, k := range sysctlKeys(string(cfg.files[i].final(nil))) {
			for _, s := range set {
				if keysOverlap(k.key, s.key) {
					c.addf(at, "%s line %d sets %s, which is in the node's security set (%s: %s) — remove the line; the node keeps it", p, k.line, k.key, s.key, s.why)
					break
				}
			}
		}
	}
	for i, l := range cfg.Ignition.Storage.Links {
		if path.IsAbs(l.Path) && path.Dir(path.Clean(l.Path)) == sysctlDir {
			kind := "symbolic"
			if util.IsTrue(l.Hard) {
				kind = "hard"
			}
			c.addf([]any{"storage", "links", i, "path"}, "%q: a %s link in %s could mask the image's settings or point where no check reads — give sysctl.d files inline", l.Path, kind, sysctlDir)
		}
	}
}
