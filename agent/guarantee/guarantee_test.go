package guarantee

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/agent/sysctlset"
)

const (
	dropin   = "/etc/systemd/system/kubelet.service.d/10-env.conf"
	cfgPath  = "/etc/kubernetes/kubelet-config.yaml"
	ctrdPath = "/etc/containerd/config.toml"
)

var (
	renderedConfig = []byte("kind: KubeletConfiguration\nreadOnlyPort: 0\n")
	// written is the change time the agent's write left on the kubelet's
	// configuration (read back from the file).
	written = time.Date(2026, 12, 4, 19, 0, 0, 0, time.UTC)
)

// good is a node as the image and the applied config left it.
func good() (Observation, Expect) {
	e := Expect{
		Units: map[string]UnitWant{
			"kubelet.service":      {Fragment: "/usr/lib/systemd/system/kubelet.service", Exec: "/usr/bin/kubelet", EnvFiles: []string{"/etc/default/kubelet"}},
			"containerd.service":   {Fragment: "/usr/lib/systemd/system/containerd.service", Exec: "/usr/bin/containerd"},
			"drover-agent.service": {Fragment: "/usr/lib/systemd/system/drover-agent.service", Exec: "/usr/bin/drover-agent"},
		},
		DropIn:            func(p string) bool { return strings.HasPrefix(p, "/usr/") || p == dropin },
		KubeletArgs:       []string{"/usr/bin/kubelet", "--config=" + cfgPath, "--kubeconfig=/var/lib/kubelet/kubeconfig"},
		KubeletConfigPath: cfgPath,
		KubeletConfig:     renderedConfig,
		Written:           map[string]time.Time{cfgPath: written, ctrdPath: written},
		ContainerdConfig:  "/etc/containerd/config.toml",
		Broken: func(doc []byte) []string {
			if strings.Contains(string(doc), "anonymous") {
				return []string{"authentication.anonymous.enabled = false"}
			}
			return nil
		},
	}
	o := Observation{
		Units: []Unit{
			{Name: "kubelet.service", LoadState: "loaded", FragmentPath: "/usr/lib/systemd/system/kubelet.service",
				DropInPaths:      []string{"/usr/lib/systemd/system/service.d/10-timeout-abort.conf", dropin},
				ExecStart:        [][]string{{"/usr/bin/kubelet", "$KUBELET_ARGS"}},
				EnvironmentFiles: []string{"/etc/default/kubelet"}},
			{Name: "containerd.service", LoadState: "loaded", FragmentPath: "/usr/lib/systemd/system/containerd.service",
				ExecStart: [][]string{{"/usr/bin/containerd"}}},
			{Name: "drover-agent.service", LoadState: "loaded", FragmentPath: "/usr/lib/systemd/system/drover-agent.service",
				ExecStart: [][]string{{"/usr/bin/drover-agent", "run"}}},
		},
		KubeletArgs:    slices.Clone(e.KubeletArgs),
		KubeletConfig:  renderedConfig,
		Changed:        map[string]time.Time{cfgPath: written, ctrdPath: written},
		ContainerdArgs: []string{"/usr/bin/containerd"},
		API:            &Probe{Status: 401},
		ReadOnly:       &Probe{Err: "dial tcp 127.0.0.1:10255: connect: connection refused"},
	}
	return o, e
}

func TestGoodNodeHolds(t *testing.T) {
	o, e := good()
	if v := Check(o, e); len(v) != 0 {
		t.Fatalf("a node as the image left it: %v", v)
	}
	// Nothing observed, nothing judged: the check after apply sees units only.
	o.KubeletArgs, o.KubeletConfig, o.ContainerdArgs, o.API, o.ReadOnly = nil, nil, nil, nil, nil
	o.Changed = nil
	if v := Check(o, e); len(v) != 0 {
		t.Fatalf("units only: %v", v)
	}
}

// TestBadObservations: each a way a node can break a guarantee, whatever
// path the change took; each must be caught, naming the invariant and,
// where it can be told, the file.
func TestBadObservations(t *testing.T) {
	const evil = "/etc/systemd/system.control/kubelet.service.d/50-evil.conf"
	unit := func(o *Observation, name string) *Unit {
		for i := range o.Units {
			if o.Units[i].Name == name {
				return &o.Units[i]
			}
		}
		t.Fatalf("no %s", name)
		return nil
	}
	for _, c := range []struct {
		name        string
		bad         func(o *Observation)
		invariant   string // in the violation's text
		source      string // the file named
		fromKubelet bool
	}{
		{"drop-in in system.control", func(o *Observation) {
			u := unit(o, "kubelet.service")
			u.DropInPaths = append(u.DropInPaths, evil)
		}, "kubelet.service is the image's unit", evil, false},
		{"drop-in in /run", func(o *Observation) {
			u := unit(o, "kubelet.service")
			u.DropInPaths = append(u.DropInPaths, "/run/systemd/system/kubelet.service.d/x.conf")
		}, "neither the image's nor the applied config's", "/run/systemd/system/kubelet.service.d/x.conf", false},
		{"unit replaced in system.attached", func(o *Observation) {
			unit(o, "kubelet.service").FragmentPath = "/etc/systemd/system.attached/kubelet.service"
		}, "loaded from /etc/systemd/system.attached/kubelet.service", "/etc/systemd/system.attached/kubelet.service", false},
		{"agent masked", func(o *Observation) {
			u := unit(o, "drover-agent.service")
			u.LoadState, u.FragmentPath = "masked", "/etc/systemd/system.control/drover-agent.service"
		}, "load state masked", "/etc/systemd/system.control/drover-agent.service", false},
		{"agent drop-in via an alias", func(o *Observation) {
			u := unit(o, "drover-agent.service")
			u.DropInPaths = []string{"/etc/systemd/system/agent-alias.service.d/x.conf"}
		}, "drover-agent.service is the image's unit", "/etc/systemd/system/agent-alias.service.d/x.conf", false},
		{"ExecStart replaced", func(o *Observation) {
			unit(o, "kubelet.service").ExecStart = [][]string{{"/bin/sh", "-c", "kubelet --anonymous-auth=true"}}
		}, "kubelet.service runs /usr/bin/kubelet", "", false},
		{"two ExecStart commands", func(o *Observation) {
			u := unit(o, "containerd.service")
			u.ExecStart = append(u.ExecStart, []string{"/usr/bin/containerd", "--config", "/var/x.toml"})
		}, "containerd.service runs /usr/bin/containerd", "", false},
		{"another environment file", func(o *Observation) {
			u := unit(o, "kubelet.service")
			u.EnvironmentFiles = append(u.EnvironmentFiles, "/var/lib/x/env")
		}, "reads its environment from /etc/default/kubelet only", "", false},
		{"kubelet flag added", func(o *Observation) {
			o.KubeletArgs = append(o.KubeletArgs, "--anonymous-auth=true")
		}, "added --anonymous-auth=true", "/etc/default/kubelet", true},
		{"kubelet flag dropped", func(o *Observation) {
			o.KubeletArgs = o.KubeletArgs[:2]
		}, "missing --kubeconfig", "/etc/default/kubelet", true},
		{"kubelet flag from a drop-in", func(o *Observation) {
			u := unit(o, "kubelet.service")
			u.DropInPaths = append(u.DropInPaths, evil)
			o.KubeletArgs = append(o.KubeletArgs, "--read-only-port=10255")
		}, "added --read-only-port=10255", evil, true},
		{"config contents differ", func(o *Observation) {
			o.KubeletConfig = []byte("kind: KubeletConfiguration\nreadOnlyPort: 10255\n")
		}, "loads the configuration the agent rendered", cfgPath, true},
		{"config rewritten and restored", func(o *Observation) {
			o.Changed[cfgPath] = written.Add(time.Millisecond)
		}, "unchanged since the agent wrote it", cfgPath, true},
		{"containerd's config rewritten and restored", func(o *Observation) {
			o.Changed[ctrdPath] = written.Add(time.Second)
		}, ctrdPath + " is unchanged since the agent wrote it", ctrdPath, true},
		{"config rewritten after the clock was stepped back", func(o *Observation) {
			o.Changed[cfgPath] = written.Add(-time.Second)
		}, "unchanged since the agent wrote it", cfgPath, true},
		{"config breaks an invariant", func(o *Observation) {
			o.KubeletConfig = []byte("authentication: {anonymous: {enabled: true}}\n")
		}, "authentication.anonymous.enabled = false", cfgPath, true},
		{"containerd loads another config", func(o *Observation) {
			o.ContainerdArgs = []string{"/usr/bin/containerd", "--config", "/var/lib/x/config.toml"}
		}, "containerd loads /etc/containerd/config.toml", "", true},
		{"containerd -c=", func(o *Observation) {
			o.ContainerdArgs = []string{"/usr/bin/containerd", "-c=/var/lib/x/config.toml"}
		}, "--config /var/lib/x/config.toml", "", true},
		{"API answers anonymously", func(o *Observation) { o.API = &Probe{Status: 200} }, "HTTP 200", "", true},
		{"API forbids rather than asks who", func(o *Observation) { o.API = &Probe{Status: 403} }, "HTTP 403", "", true},
		{"API does not answer", func(o *Observation) { o.API = &Probe{Err: "connection refused"} }, "refuses a request without credentials", "", true},
		{"read-only port answers", func(o *Observation) { o.ReadOnly = &Probe{Status: 200} }, "nothing answers on the kubelet's read-only port", "", true},
		{"read-only port times out", func(o *Observation) { o.ReadOnly = &Probe{Err: "i/o timeout"} }, "read-only port", "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			o, e := good()
			c.bad(&o)
			v := Check(o, e)
			if len(v) == 0 {
				t.Fatal("not caught")
			}
			var hit *Violation
			for i := range v {
				if strings.Contains(v[i].String(), c.invariant) {
					hit = &v[i]
					break
				}
			}
			if hit == nil {
				t.Fatalf("no violation mentions %q: %v", c.invariant, v)
			}
			if hit.Source != c.source {
				t.Fatalf("source %q, want %q (%v)", hit.Source, c.source, hit)
			}
		})
	}
}

// TestRacingDropIn: a kubelet drop-in whose ExecStartPre= rewrites the
// kubelet's configuration (anonymous authentication on) and whose
// ExecStartPost= puts the rendered file back once the kubelet has read it.
// The static policy (agent/ignition) is left out: the drop-in counts as
// one the applied config put there, as if the policy had let it through.
// When the agent looks, the unit, the command line and the file's contents
// are all as rendered; what gives the race away is the file's change time,
// after the agent wrote it.
func TestRacingDropIn(t *testing.T) {
	const race = "/etc/systemd/system/kubelet.service.d/50-race.conf"
	o, e := good()
	e.DropIn = func(p string) bool { return true } // no static check
	u := &o.Units[0]
	u.DropInPaths = append(u.DropInPaths, race)
	// ExecStartPre= ran after the agent's start job; ExecStartPost=
	// restored the file 300 ms later.
	o.Changed[cfgPath] = written.Add(2*time.Second + 300*time.Millisecond)
	v := Check(o, e)
	if len(v) != 1 {
		t.Fatalf("want the one violation of the file's change, got %v", v)
	}
	if want := "the kubelet's configuration file (" + cfgPath + ") is unchanged since the agent wrote it"; !strings.HasPrefix(v[0].Invariant, want) ||
		!strings.Contains(v[0].Got, "changed after the agent wrote it") || !strings.Contains(v[0].Got, "(+2.3s)") || v[0].Source != cfgPath {
		t.Errorf("violation %v", v[0])
	}
	// The same race after timesyncd stepped the clock back: the rewrite's
	// change time is earlier than the agent's write.
	o.Changed[cfgPath] = written.Add(-700 * time.Millisecond)
	if v := Check(o, e); len(v) != 1 || !strings.Contains(v[0].Got, "(-700ms)") {
		t.Errorf("a file rewritten after a step back: %v", v)
	}
	// The same node, without the race: the file last changed when the
	// agent wrote it.
	o.Changed[cfgPath] = written
	if v := Check(o, e); len(v) != 0 {
		t.Errorf("a file changed as the agent wrote it: %v", v)
	}
}

// TestAgentUnit: the guard must be the agent drover-agent.service runs.
func TestAgentUnit(t *testing.T) {
	const self = 4242
	for _, c := range []struct {
		name    string
		mainPID uint32
		cgroup  string
		want    string // "" holds
	}{
		{"the unit runs this agent", self, "/system.slice/drover-agent.service", ""},
		{"main PID not known", 0, "", ""},
		{"a second agent is the unit's", 777, "/system.slice/drover-agent.service", "its main process is 777"},
		{"this agent runs outside the unit", self, "/user.slice/user-0.slice/session-3.scope", "the agent runs in cgroup /user.slice/user-0.slice/session-3.scope, not the unit's"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o, e := good()
			e.AgentPID = self
			o.Units[2].MainPID = c.mainPID
			o.AgentCgroup = c.cgroup
			v := Check(o, e)
			switch {
			case c.want == "" && len(v) != 0:
				t.Errorf("holds, got %v", v)
			case c.want != "" && (len(v) != 1 || v[0].Got != c.want || v[0].Source != AgentUnit ||
				!strings.HasPrefix(v[0].Invariant, "drover-agent.service is active, and its main process is this agent (PID 4242)")):
				t.Errorf("want %q, got %v", c.want, v)
			}
		})
	}
	// Not judged unless the guard asks (AgentPID 0).
	o, e := good()
	o.Units[2].MainPID = 777
	if v := Check(o, e); len(v) != 0 {
		t.Errorf("judged without AgentPID: %v", v)
	}
}

// TestHost: the security sysctls and the preload list, by effect.
func TestHost(t *testing.T) {
	goodHost := func() Host {
		h := Host{Sysctls: map[string]string{}}
		for _, s := range sysctlset.Security {
			h.Sysctls[s.Key] = s.Want[len(s.Want)-1]
		}
		return h
	}
	if v := CheckHost(goodHost()); len(v) != 0 {
		t.Fatalf("the image's host: %v", v)
	}
	if v := CheckHost(Host{}); len(v) != 0 {
		t.Fatalf("nothing observed: %v", v)
	}
	for _, c := range []struct {
		name      string
		bad       func(h *Host)
		invariant string
		got       string
		source    string
	}{
		{"core pattern piped", func(h *Host) { h.Sysctls["kernel.core_pattern"] = "|/var/lib/x/dump %p" },
			"kernel.core_pattern holds core (", "|/var/lib/x/dump %p", "/proc/sys/kernel/core_pattern"},
		{"unprivileged BPF on", func(h *Host) { h.Sysctls["kernel.unprivileged_bpf_disabled"] = "0" },
			"kernel.unprivileged_bpf_disabled holds 2 or 1 (", "0", "/proc/sys/kernel/unprivileged_bpf_disabled"},
		{"br_netfilter unloaded", func(h *Host) {
			h.Sysctls["net.bridge.bridge-nf-call-iptables"] = "unreadable (no such file or directory)"
		}, "net.bridge.bridge-nf-call-iptables holds 1 (", "unreadable (no such file or directory)", "/proc/sys/net/bridge/bridge-nf-call-iptables"},
		{"a setting not observed", func(h *Host) { delete(h.Sysctls, "kernel.modprobe") },
			"kernel.modprobe holds /sbin/modprobe (", "not observed", "/proc/sys/kernel/modprobe"},
		{"preload list", func(h *Host) { h.Preload = "present: /var/lib/x/hook.so" },
			"/etc/ld.so.preload is absent (", "present: /var/lib/x/hook.so", "/etc/ld.so.preload"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := goodHost()
			c.bad(&h)
			v := CheckHost(h)
			if len(v) != 1 || !strings.HasPrefix(v[0].Invariant, c.invariant) || v[0].Got != c.got || v[0].Source != c.source {
				t.Errorf("got %v", v)
			}
		})
	}
}
