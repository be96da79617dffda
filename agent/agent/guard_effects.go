package agent

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/drover-os/drover/agent/guarantee"
	"github.com/drover-os/drover/agent/sysctlset"
)

// What the guard checks by effect beside the kubelet's guarantees: what
// no list of user-data paths can see, because the change need not come
// through a file the static policy or the drift baseline knows (a
// privileged pod writing /proc/sys, a unit of the config running
// sysctl -w, a loader preload dropped into the tmpfs /etc).

// ProcSys reads a sysctl under root's /proc/sys (sysctlset.Check's
// probe).
func ProcSys(root string) func(key string) (string, error) {
	return func(key string) (string, error) {
		b, err := os.ReadFile(filepath.Join(root, "/proc/sys", strings.ReplaceAll(sysctlset.Normalize(key), ".", "/")))
		return string(b), err
	}
}

// hostEffects observes the security sysctls and the preload list. Under a
// root without procfs (a test's directory) the sysctls are not observed;
// on a node, a setting missing from /proc/sys (br_netfilter unloaded) is
// reported as unreadable.
func (a *Agent) hostEffects() guarantee.Host {
	var h guarantee.Host
	if _, err := os.Stat(a.path("/proc/sys/kernel")); err == nil {
		read := ProcSys(a.env.Root)
		h.Sysctls = map[string]string{}
		for _, s := range sysctlset.Security {
			v, err := read(s.Key)
			if err != nil {
				v = "unreadable (" + err.Error() + ")"
			}
			h.Sysctls[s.Key] = strings.TrimSpace(v)
		}
	}
	fi, err := os.Lstat(a.path(guarantee.LDPreload))
	switch {
	case err == nil:
		h.Preload = "present (" + typeName(fi.Mode()) + ")"
		if data, err := os.ReadFile(a.path(guarantee.LDPreload)); err == nil {
			h.Preload = "present: " + strings.Join(strings.Fields(string(data)), " ")
		}
	case !errors.Is(err, fs.ErrNotExist):
		h.Preload = "unknown (" + err.Error() + ")"
	}
	return h
}

// hostDrift is the guard's round of the host effects: each one broken is
// a drift line naming where it lives.
func (a *Agent) hostDrift() []Drift {
	var out []Drift
	for _, v := range guarantee.CheckHost(a.hostEffects()) {
		out = append(out, violationDrift(v))
	}
	return out
}

// agentPID is the process the guard runs in: what drover-agent.service's
// main process must be.
func (a *Agent) agentPID() uint32 { return uint32(os.Getpid()) }

// agentCgroup is the agent's cgroup v2 path, from root's
// /proc/self/cgroup ("0::/system.slice/drover-agent.service"); "" when
// that cannot be read (a test's root has no procfs).
func (a *Agent) agentCgroup() string {
	b, err := os.ReadFile(a.path("/proc/self/cgroup"))
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			return p
		}
	}
	return ""
}
