package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/agent/guarantee"
	"github.com/drover-os/drover/agent/nodeconfig"
	"github.com/drover-os/drover/agent/status"
	"github.com/drover-os/drover/agent/systemd"
)

// observed wires the rig's agent to a kubelet that runs as rendered
// (argv from the rendered /etc/default/kubelet) unless args says
// otherwise, and to ports that answer as ports says.
func observed(r *rig, a *Agent, args func([]string) []string, api, ro guarantee.Probe) {
	for unit, pid := range map[string]uint32{"kubelet.service": 10, "containerd.service": 20} {
		u := systemd.ImageUnit(unit)
		u.MainPID = pid
		if r.sd.Units == nil {
			r.sd.Units = map[string]systemd.Resolved{}
		}
		r.sd.Units[unit] = u
	}
	a.env.Cmdline = func(pid uint32) ([]string, error) {
		if pid == 20 {
			return []string{"/usr/bin/containerd"}, nil
		}
		d, err := os.ReadFile(filepath.Join(r.root, nodeconfig.KubeletDefaultsPath))
		argv := kubeletArgv(d)
		if args != nil {
			argv = args(argv)
		}
		return argv, err
	}
	a.env.KubeletPorts = func(context.Context) (guarantee.Probe, guarantee.Probe) { return api, ro }
}

var (
	asks    = guarantee.Probe{Status: 401}
	refused = guarantee.Probe{Err: "dial tcp 127.0.0.1:10255: connect: connection refused"}
)

func TestGuaranteesHoldOnAGoodNode(t *testing.T) {
	r := newRig(t, userData(t, "hello"))
	a := r.agent()
	// The first looks find the main PID still systemd-executor, before
	// its exec of the kubelet, then a kubelet that has just exited (no
	// command line): looked at again, not judged.
	before := [][]string{{"/usr/lib/systemd/systemd-executor", "--deserialize", "30"}, {"(kubelet)"}, nil}
	observed(r, a, func(s []string) []string {
		if len(before) > 0 {
			s, before = before[0], before[1:]
		}
		return s
	}, asks, refused)
	if err := a.Run(context.Background()); err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(r.log, "\n"))
	}
	if r.sd.Called("stop kubelet.service") {
		t.Error("the kubelet was stopped on a good node")
	}
}

// TestGuaranteeBroken: whatever put it there, a change to the kubelet's
// unit, command line or ports fails the join naming the invariant and the
// file, and the kubelet does not go on running.
func TestGuaranteeBroken(t *testing.T) {
	const evil = "/etc/systemd/system.control/kubelet.service.d/50-evil.conf"
	for _, c := range []struct {
		name      string
		setup     func(r *rig, a *Agent)
		phase     string
		want      string
		stopped   bool
		kubeletUp bool
	}{
		{"drop-in found after apply", func(r *rig, a *Agent) {
			observed(r, a, nil, asks, refused)
			u := r.sd.Units["kubelet.service"]
			u.DropInPaths = []string{evil}
			r.sd.Units["kubelet.service"] = u
		}, "apply", "drop-in " + evil + " is neither the image's nor the applied config's", false, false},
		{"agent masked", func(r *rig, a *Agent) {
			observed(r, a, nil, asks, refused)
			r.sd.Units["drover-agent.service"] = systemd.Resolved{Unit: "drover-agent.service", LoadState: "masked",
				FragmentPath: "/etc/systemd/system.control/drover-agent.service"}
		}, "apply", "load state masked (changed by /etc/systemd/system.control/drover-agent.service)", false, false},
		{"kubelet runs with another flag", func(r *rig, a *Agent) {
			observed(r, a, func(s []string) []string { return append(s, "--anonymous-auth=true") }, asks, refused)
		}, "kubelet", "added --anonymous-auth=true (changed by /etc/default/kubelet)", true, true},
		{"kubelet loads another config", func(r *rig, a *Agent) {
			observed(r, a, func(s []string) []string {
				for i := range s {
					if strings.HasPrefix(s[i], "--config=") {
						s[i] = "--config=/var/lib/x/kc.yaml"
					}
				}
				os.MkdirAll(filepath.Join(r.root, "/var/lib/x"), 0o755)
				os.WriteFile(filepath.Join(r.root, "/var/lib/x/kc.yaml"), []byte("readOnlyPort: 10255\n"), 0o644)
				return s
			}, asks, refused)
		}, "kubelet", "the kubelet's configuration holds readOnlyPort = 0", true, true},
		{"config rewritten at the kubelet's start, restored after", func(r *rig, a *Agent) {
			// As a drop-in's ExecStartPre= and ExecStartPost= would: by the
			// time the agent reads the file, it holds what was rendered.
			raced := false
			observed(r, a, func(s []string) []string {
				if !raced {
					raced = true
					p := filepath.Join(r.root, nodeconfig.KubeletConfigPath)
					orig, _ := os.ReadFile(p)
					// Past the kernel's coarse clock tick of the agent's write.
					time.Sleep(30 * time.Millisecond)
					os.WriteFile(p, append(orig, "readOnlyPort: 10255\n"...), 0o644)
					os.WriteFile(p, orig, 0o644)
				}
				return s
			}, asks, refused)
		}, "kubelet", "is unchanged since the agent wrote it", true, true},
		{"API answers without credentials", func(r *rig, a *Agent) {
			observed(r, a, nil, guarantee.Probe{Status: 200}, refused)
		}, "kubelet", "refuses a request without credentials (401): HTTP 200", true, true},
		{"read-only port answers", func(r *rig, a *Agent) {
			observed(r, a, nil, asks, guarantee.Probe{Status: 200})
		}, "kubelet", "nothing answers on the kubelet's read-only port (10255): HTTP 200", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, userData(t, "hello"))
			a := r.agent()
			c.setup(r, a)
			err := a.Run(context.Background())
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "GUARANTEE BROKEN") {
				t.Fatalf("want a refusal with %q, got %v", c.want, err)
			}
			st, _ := status.Read(r.root)
			if st.State != "failed" || !strings.Contains(st.Error, c.want) {
				t.Errorf("status %s: %s", st.State, st.Error)
			}
			if !strings.Contains(strings.Join(r.log, "\n"), c.phase+": FAILED: GUARANTEE BROKEN") {
				t.Errorf("no %s failure on the console:\n%s", c.phase, strings.Join(r.log, "\n"))
			}
			if r.sd.Called("stop kubelet.service") != c.stopped {
				t.Errorf("kubelet stopped: %v, want %v (%v)", !c.stopped, c.stopped, r.sd.Calls)
			}
			if stored, err := os.ReadFile(filepath.Join(r.root, StoredConfig)); c.stopped && (err != nil || strings.Contains(string(stored), testSecret)) {
				t.Errorf("the stored config keeps the bootstrap token after the kubelet was stopped (%v)", err)
			}
			if r.sd.Called("start kubelet.service") != c.kubeletUp {
				t.Errorf("kubelet started: %v, want %v", !c.kubeletUp, c.kubeletUp)
			}
			// What the guard, running after the failed join, reports.
			if d := a.checkAll(); c.stopped && (len(d) == 0 || !strings.Contains(fmt.Sprint(d), "guarantee: ")) {
				t.Errorf("the guard would not report the broken guarantee: %v", d)
			}
			for _, p := range st.Phases {
				if p.Name == "ready" {
					t.Errorf("the ready phase ran: %+v", p)
				}
			}
		})
	}
}

// testSecret is the secret of userData's bootstrap token.
const testSecret = "0123456789abcdef"

// TestGuardChecksGuarantees: once joined, the guard's rounds observe the
// guarantees too: a drop-in that appears at run time is drift naming it.
func TestGuardChecksGuarantees(t *testing.T) {
	r := newRig(t, userData(t, "hello"))
	a := r.agent()
	observed(r, a, nil, asks, refused)
	if err := a.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := a.checkAll(); len(d) != 0 {
		t.Fatalf("drift on a good node: %v", d)
	}
	const late = "/run/systemd/system.control/kubelet.service.d/50-late.conf"
	u := r.sd.Units["kubelet.service"]
	u.DropInPaths = append(u.DropInPaths, late)
	r.sd.Units["kubelet.service"] = u
	d := a.checkAll()
	if len(d) == 0 || d[0].Path != late || !strings.Contains(d[0].String(), "guarantee: kubelet.service is the image's unit") {
		t.Fatalf("drift %v, want one naming %s", d, late)
	}
}

// TestGuardSkipsAPortProbeThatTimedOut: on a node too busy to answer
// loopback in time (seen under memory pressure) a timed-out port probe is
// no drift; an answer on the read-only port still is.
func TestGuardSkipsAPortProbeThatTimedOut(t *testing.T) {
	r := newRig(t, userData(t, "hello"))
	a := r.agent()
	observed(r, a, nil, asks, refused)
	if err := a.Run(context.Background()); err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(r.log, "\n"))
	}
	timedOut := guarantee.Probe{Err: "dial tcp 127.0.0.1:10255: i/o timeout", Timeout: true}
	a.env.KubeletPorts = func(context.Context) (guarantee.Probe, guarantee.Probe) { return timedOut, timedOut }
	if d := a.guaranteeDrift(); len(d) != 0 {
		t.Errorf("timed-out probes reported as drift: %+v", d)
	}
	a.env.KubeletPorts = func(context.Context) (guarantee.Probe, guarantee.Probe) { return asks, guarantee.Probe{Status: 200} }
	if d := a.guaranteeDrift(); len(d) != 1 || !strings.Contains(d[0].What, "read-only port") {
		t.Errorf("read-only port answering: %+v", d)
	}
}
