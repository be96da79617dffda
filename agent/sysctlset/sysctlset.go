// Package sysctlset names the kernel settings the node's security rests
// on, with the values that hold it: one list, read by the agent's kernel
// phase (which writes those not held before anything runs), by the drift
// guard (which reports one changed at run time) and by the static policy
// of agent/ignition (which refuses a user-data that sets one, in
// sysctl.d or otherwise). Settings Kubernetes needs to work at all, and
// those the kubelet checks itself (protectKernelDefaults), are elsewhere
// (network.Sysctls, nodeconfig.KubeletSysctls); the bridge ones are here
// too because without them network policy silently stops applying.
package sysctlset

import (
	"fmt"
	"path"
	"strings"
)

// Setting is one kernel setting and the values that hold it.
type Setting struct {
	// Key is the sysctl name with dots, as sysctl(8) and sysctl.d take it.
	Key string
	// Want are the values that hold it; the first is the one the agent
	// writes when the kernel's is none of them. More than one where a
	// stricter value exists that the agent need not force (a one-way
	// setting, or a distribution's extra level).
	Want []string
	// Why is what a change opens up, for messages and docs.
	Why string
}

// Security is the set. Its values are the image's: the Debian cloud
// kernel's defaults where those are strict (unprivileged BPF off, perf
// events to the privileged, dmesg restricted), systemd's sysctl.d for
// the link protections, the agent's own network settings for the bridge;
// kptr_restrict, 0 in the kernel's default, is raised by the agent.
var Security = []Setting{
	{"kernel.unprivileged_bpf_disabled", []string{"2", "1"},
		"unprivileged eBPF is a recurring path to kernel exploits (verifier bugs); 1 is the same, for good"},
	{"kernel.perf_event_paranoid", []string{"3", "2"},
		"perf events let an unprivileged process sample the kernel and other processes; Debian's 3 forbids them to the unprivileged, mainline's highest is 2"},
	{"kernel.kptr_restrict", []string{"1", "2"},
		"kernel addresses in /proc (kallsyms, modules) undo KASLR for an exploit"},
	{"kernel.dmesg_restrict", []string{"1"},
		"the kernel log shows kernel addresses and other pods' events to any process"},
	{"kernel.core_pattern", []string{"core"},
		"a pattern starting with | makes the kernel run that program as root, in the host's namespaces, whenever any process (in any pod) crashes"},
	{"kernel.modprobe", []string{"/sbin/modprobe"},
		"the kernel runs this program as root to load a module on demand (an unknown socket family is enough to ask)"},
	{"net.bridge.bridge-nf-call-iptables", []string{"1"},
		"off, IPv4 traffic between pods on the node's bridge skips iptables: Services and network policy stop applying to it"},
	{"net.bridge.bridge-nf-call-ip6tables", []string{"1"},
		"off, IPv6 traffic between pods on the node's bridge skips ip6tables: Services and network policy stop applying to it"},
	{"fs.protected_symlinks", []string{"1"},
		"off, a symlink in a world-writable directory (/tmp) turns a root process's open into one of the attacker's choosing"},
	{"fs.protected_hardlinks", []string{"1"},
		"off, anyone may hard-link a file they do not own, keeping a setuid binary or a secret reachable under their name"},
}

// Normalize gives a key as Security spells it: sysctl.d's "-" prefix
// (ignore a failure) dropped, and '/' separators (sysctl(8) accepts both)
// turned into dots.
func Normalize(key string) string {
	key = strings.TrimPrefix(strings.TrimSpace(key), "-")
	if strings.Contains(key, "/") {
		key = strings.ReplaceAll(strings.Trim(key, "/"), "/", ".")
	}
	return key
}

// Find returns the setting of a key, in either spelling.
func Find(key string) (Setting, bool) {
	key = Normalize(key)
	for _, s := range Security {
		if s.Key == key {
			return s, true
		}
	}
	return Setting{}, false
}

// Matching lists the settings a sysctl.d key would set: the key itself,
// or every setting a glob (kernel.*, net.bridge.bridge-nf-call-ip?tables)
// matches. Keys are matched in their dotted form, where '*' matches dots
// too: a pattern covers more rather than less. A malformed pattern
// matches nothing here; sysctl.d ignores it too.
func Matching(key string) []Setting {
	key = Normalize(key)
	var out []Setting
	for _, s := range Security {
		if ok, _ := path.Match(key, s.Key); ok || key == s.Key {
			out = append(out, s)
		}
	}
	return out
}

// Path is where the setting lives under /proc/sys.
func (s Setting) Path() string {
	return "/proc/sys/" + strings.ReplaceAll(s.Key, ".", "/")
}

// Holds says whether the kernel's value (as read from /proc/sys, with its
// newline) is one of Want.
func (s Setting) Holds(value string) bool {
	value = strings.TrimSpace(value)
	for _, w := range s.Want {
		if value == w {
			return true
		}
	}
	return false
}

// Broken is a setting not held, with what the kernel had.
type Broken struct {
	Setting
	Got string
}

func (b Broken) String() string {
	return fmt.Sprintf("%s = %s, want %s (%s)", b.Key, b.Got, strings.Join(b.Want, " or "), b.Why)
}

// Check reads every setting through read (the value of a key, e.g. from
// <root>/proc/sys) and lists those not held. A value that cannot be read
// is not held: a setting whose module is gone is not in effect either.
func Check(read func(key string) (string, error)) []Broken {
	var out []Broken
	for _, s := range Security {
		v, err := read(s.Key)
		switch {
		case err != nil:
			out = append(out, Broken{s, "unreadable (" + err.Error() + ")"})
		case !s.Holds(v):
			out = append(out, Broken{s, strings.TrimSpace(v)})
		}
	}
	return out
}

// ToWrite gives the value to write for each setting Check found not held.
func ToWrite(broken []Broken) map[string]string {
	out := make(map[string]string, len(broken))
	for _, b := range broken {
		out[b.Key] = b.Want[0]
	}
	return out
}
