// Package guarantee judges the node's security guarantees by their effect
// on the running node: how systemd resolved the units that carry them,
// the command line and configuration the kubelet actually runs with, what
// the kubelet's ports answer to a caller without credentials, and (host.go)
// the kernel settings and loader preload list no unit shows. The
// static policy (agent/ignition) refuses the paths it knows; this is the
// check that holds whatever path a change took (a drop-in written at run
// time by a unit, a search directory the policy does not list).
//
// Check is pure: it judges an Observation against an Expect and names,
// for each broken invariant, the file that most likely broke it. The
// agent gathers the observation (agent/agent/guarantees.go).
package guarantee

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Unit is a unit as systemd loaded it (systemd.Resolved).
type Unit struct {
	Name             string
	LoadState        string
	FragmentPath     string
	DropInPaths      []string
	ExecStart        [][]string
	EnvironmentFiles []string
	// MainPID is the unit's main process; 0 when it has none (inactive).
	MainPID uint32
}

// Probe is what a port answered a request without credentials.
type Probe struct {
	// Status is the HTTP status code; 0 when nothing answered over HTTP.
	Status int
	// Err says why nothing answered (connection refused, TLS error).
	Err string
	// Timeout: the request timed out (no connection or no answer in
	// time), which says nothing either way on a node too busy to
	// answer loopback in seconds.
	Timeout bool
}

func (p Probe) String() string {
	if p.Status != 0 {
		return fmt.Sprintf("HTTP %d", p.Status)
	}
	return "no answer (" + p.Err + ")"
}

// Observation is what the agent saw on the node. A nil field was not
// observed and is not judged.
type Observation struct {
	Units []Unit
	// KubeletArgs is /proc/<kubelet's MainPID>/cmdline.
	KubeletArgs []string
	// KubeletConfig is the file the kubelet's --config names, as read
	// from the node.
	KubeletConfig []byte
	// Changed maps each file the agent rendered (Expect.Written) to its
	// status change time (ctime) now; a file missing is left out. The
	// kubelet and containerd read their files once, at their start, and
	// the kubelet serves what it loaded only on /configz, which the
	// node's own credential may not read (nodes/proxy): a file read now
	// is what was loaded only if it has not changed since the agent
	// wrote it. Every write, rename or link sets ctime to the current
	// time, and nothing sets it back, so any other ctime than the one the
	// agent's write left is a later change, even if the clock was stepped
	// in between (timesyncd steps it at boot).
	Changed map[string]time.Time
	// ContainerdArgs is /proc/<containerd's MainPID>/cmdline.
	ContainerdArgs []string
	// AgentCgroup is the agent's own cgroup (/proc/self/cgroup's v2
	// path); "" when not observed.
	AgentCgroup string
	// API is the answer of https://127.0.0.1:10250/pods to a request
	// without credentials; ReadOnly that of http://127.0.0.1:10255/pods.
	API, ReadOnly *Probe
}

// UnitWant is how one protected unit must resolve.
type UnitWant struct {
	Fragment string   // the image's unit file
	Exec     string   // argv[0] of its one ExecStart= command
	EnvFiles []string // its environment files, exactly
}

// Expect is what the image and the applied config put on the node.
type Expect struct {
	Units map[string]UnitWant
	// DropIn says whether a drop-in path is one the image or the applied
	// (statically checked) config put there.
	DropIn func(path string) bool
	// KubeletArgs is the kubelet's argv as the agent rendered it
	// (/usr/bin/kubelet and the flags of /etc/default/kubelet).
	KubeletArgs []string
	// KubeletConfigPath and KubeletConfig are the configuration file the
	// agent rendered and its contents.
	KubeletConfigPath string
	KubeletConfig     []byte
	// Written maps each file the agent rendered to the change time (ctime)
	// its write left on the file, read back right after the write.
	Written map[string]time.Time
	// ContainerdConfig is the only configuration containerd may load.
	ContainerdConfig string
	// AgentPID is the agent's own process: drover-agent.service must be
	// running it (0: not judged; the guard sets it).
	AgentPID uint32
	// Broken lists the kubelet configuration invariants a
	// KubeletConfiguration document breaks (nodeconfig).
	Broken func(doc []byte) []string
}

// AgentUnit is the agent's own unit.
const AgentUnit = "drover-agent.service"

// Violation is one broken guarantee.
type Violation struct {
	// Invariant names the guarantee, e.g. "kubelet.service loads only the
	// image's unit and the config's drop-ins".
	Invariant string
	// Got is what the node showed instead.
	Got string
	// Source is the file that changed it, when it can be told; "" when not.
	Source string
}

func (v Violation) String() string {
	s := v.Invariant + ": " + v.Got
	if v.Source != "" {
		s += " (changed by " + v.Source + ")"
	}
	return s
}

// Check lists every broken guarantee, in a fixed order.
func Check(o Observation, e Expect) []Violation {
	var out []Violation
	// suspects are the unit files that are not the image's or the
	// config's: what a broken effect is attributed to.
	suspects := map[string][]string{}
	names := make([]string, 0, len(e.Units))
	for n := range e.Units {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		want := e.Units[name]
		u, ok := find(o.Units, name)
		if !ok {
			continue
		}
		inv := name + " is the image's unit with the image's and the config's drop-ins only"
		if u.LoadState != "loaded" {
			out = append(out, Violation{inv, "load state " + u.LoadState, u.FragmentPath})
			suspects[name] = append(suspects[name], u.FragmentPath)
			continue
		}
		if u.FragmentPath != want.Fragment {
			out = append(out, Violation{inv, "loaded from " + u.FragmentPath + ", not " + want.Fragment, u.FragmentPath})
			suspects[name] = append(suspects[name], u.FragmentPath)
		}
		for _, d := range u.DropInPaths {
			if e.DropIn == nil || !e.DropIn(d) {
				out = append(out, Violation{inv, "drop-in " + d + " is neither the image's nor the applied config's", d})
				suspects[name] = append(suspects[name], d)
			}
		}
		src := first(suspects[name])
		if len(u.ExecStart) != 1 || len(u.ExecStart[0]) == 0 || u.ExecStart[0][0] != want.Exec {
			out = append(out, Violation{name + " runs " + want.Exec, "ExecStart " + execString(u.ExecStart), src})
		}
		if want.EnvFiles != nil && !slices.Equal(u.EnvironmentFiles, want.EnvFiles) {
			out = append(out, Violation{name + " reads its environment from " + strings.Join(want.EnvFiles, ", ") + " only",
				"EnvironmentFile " + strings.Join(u.EnvironmentFiles, ", "), src})
		}
	}
	if e.AgentPID != 0 {
		// The guard is this process, and must be the agent systemd
		// supervises as drover-agent.service: not one started by hand
		// outside it (its cgroup says), nor one beside a second agent
		// the unit runs (its main PID says). A main PID of 0 is not
		// judged: systemd reports none for a unit it has not started,
		// which the cgroup covers.
		inv := fmt.Sprintf("%s is active, and its main process is this agent (PID %d)", AgentUnit, e.AgentPID)
		if u, ok := find(o.Units, AgentUnit); ok && u.MainPID != 0 && u.MainPID != e.AgentPID {
			out = append(out, Violation{inv, fmt.Sprintf("its main process is %d", u.MainPID), AgentUnit})
		}
		if o.AgentCgroup != "" && !strings.HasSuffix(o.AgentCgroup, "/"+AgentUnit) {
			out = append(out, Violation{inv, "the agent runs in cgroup " + o.AgentCgroup + ", not the unit's", AgentUnit})
		}
	}
	kubeletSrc := first(suspects["kubelet.service"])
	if o.KubeletArgs != nil && e.KubeletArgs != nil && !slices.Equal(o.KubeletArgs, e.KubeletArgs) {
		out = append(out, Violation{"the kubelet runs with the command line the agent rendered",
			argDiff(e.KubeletArgs, o.KubeletArgs), orElse(kubeletSrc, "/etc/default/kubelet")})
	}
	if o.KubeletConfig != nil {
		src := kubeletSrc
		if src == "" && string(o.KubeletConfig) != string(e.KubeletConfig) {
			src = e.KubeletConfigPath
		}
		if string(o.KubeletConfig) != string(e.KubeletConfig) {
			out = append(out, Violation{"the kubelet loads the configuration the agent rendered (" + e.KubeletConfigPath + ")",
				"its contents differ", src})
		}
		if e.Broken != nil {
			for _, b := range e.Broken(o.KubeletConfig) {
				out = append(out, Violation{"the kubelet's configuration holds " + b, "it does not", src})
			}
		}
	}
	out = append(out, unchanged(o, e, kubeletSrc)...)
	if o.ContainerdArgs != nil {
		if cfg, ok := flagValue(o.ContainerdArgs, "--config", "-c"); ok && cfg != e.ContainerdConfig {
			out = append(out, Violation{"containerd loads " + e.ContainerdConfig, "--config " + cfg,
				first(suspects["containerd.service"])})
		}
	}
	if o.API != nil && o.API.Status != 401 {
		out = append(out, Violation{"the kubelet API (10250) refuses a request without credentials (401)",
			o.API.String(), kubeletSrc})
	}
	if o.ReadOnly != nil && (o.ReadOnly.Status != 0 || !strings.Contains(o.ReadOnly.Err, "refused")) {
		out = append(out, Violation{"nothing answers on the kubelet's read-only port (10255)", o.ReadOnly.String(), kubeletSrc})
	}
	return out
}

// unchanged judges the rendered files' change times: each must still be
// the one the agent's write left. Equality, not "no later": the agent's
// own clock reading would race a clock step (a step back between the write
// and time.Now() made a file look changed after the write), and a change
// made after a step back carries an earlier ctime. Contents that match do
// not clear a file: a unit that rewrote it before the kubelet (or
// containerd) read it and restored it afterwards leaves the rendered
// contents behind.
func unchanged(o Observation, e Expect, kubeletSrc string) []Violation {
	var out []Violation
	paths := make([]string, 0, len(e.Written))
	for p := range e.Written {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		written := e.Written[p]
		changed, ok := o.Changed[p]
		if !ok || written.IsZero() || changed.Equal(written) {
			continue
		}
		inv := p + " is unchanged since the agent wrote it, so what read it at its start loaded what the agent rendered"
		src := p
		if p == e.KubeletConfigPath {
			inv = "the kubelet's configuration file (" + p + ") is unchanged since the agent wrote it, so the kubelet loaded what the agent rendered"
			src = orElse(kubeletSrc, p)
		}
		out = append(out, Violation{inv, fmt.Sprintf("it was changed after the agent wrote it: its change time is %s, the agent's write left %s (%s), whatever it holds now",
			changed.UTC().Format(time.RFC3339Nano), written.UTC().Format(time.RFC3339Nano), signed(changed.Sub(written).Round(time.Millisecond))), src})
	}
	return out
}

// signed writes a duration with its sign: a change time before the
// write's is a clock stepped back, not the same moment.
func signed(d time.Duration) string {
	if d > 0 {
		return "+" + d.String()
	}
	return d.String()
}

func find(us []Unit, name string) (Unit, bool) {
	for _, u := range us {
		if u.Name == name {
			return u, true
		}
	}
	return Unit{}, false
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func orElse(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func execString(cmds [][]string) string {
	if len(cmds) == 0 {
		return "none"
	}
	var parts []string
	for _, c := range cmds {
		parts = append(parts, strings.Join(c, " "))
	}
	return strings.Join(parts, "; ")
}

// argDiff names the arguments added and removed.
func argDiff(want, got []string) string {
	var added, removed []string
	for _, a := range got {
		if !slices.Contains(want, a) {
			added = append(added, a)
		}
	}
	for _, a := range want {
		if !slices.Contains(got, a) {
			removed = append(removed, a)
		}
	}
	var parts []string
	if len(added) > 0 {
		parts = append(parts, "added "+strings.Join(added, " "))
	}
	if len(removed) > 0 {
		parts = append(parts, "missing "+strings.Join(removed, " "))
	}
	if len(parts) == 0 {
		return "the same arguments in another order"
	}
	return strings.Join(parts, "; ")
}

// flagValue finds a flag's value in argv, as --flag=v, --flag v, -f v.
func flagValue(argv []string, names ...string) (string, bool) {
	for i, a := range argv {
		for _, n := range names {
			if a == n && i+1 < len(argv) {
				return argv[i+1], true
			}
			if v, ok := strings.CutPrefix(a, n+"="); ok {
				return v, true
			}
		}
	}
	return "", false
}
