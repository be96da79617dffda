package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-os/drover/agent/sysctlset"
)

// procSys writes the security sysctls under root's /proc/sys, as the
// image's kernel and the agent leave them, then the overrides.
func procSys(t *testing.T, root string, override map[string]string) {
	t.Helper()
	for _, s := range sysctlset.Security {
		v := s.Want[0]
		if o, ok := override[s.Key]; ok {
			v = o
		}
		p := filepath.Join(root, s.Path())
		if v == "" {
			os.Remove(p)
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGuardHostEffects: the guard reports a security sysctl changed at
// run time and a loader preload list, each at the path it lives at,
// whether or not the kubelet passed its checks (a failed join is guarded
// too); a root without procfs observes no sysctls.
func TestGuardHostEffects(t *testing.T) {
	r := newRig(t, userData(t, "hello"))
	a := r.agent()
	if d := a.hostDrift(); len(d) != 0 {
		t.Fatalf("no procfs, no preload: %v", d)
	}
	procSys(t, r.root, nil)
	if d := a.hostDrift(); len(d) != 0 {
		t.Fatalf("the image's values: %v", d)
	}
	procSys(t, r.root, map[string]string{"kernel.core_pattern": "|/var/lib/x/dump %p", "net.bridge.bridge-nf-call-ip6tables": ""})
	os.MkdirAll(filepath.Join(r.root, "/etc"), 0o755)
	if err := os.WriteFile(filepath.Join(r.root, "/etc/ld.so.preload"), []byte("/var/lib/x/hook.so\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, d := range a.guaranteeDrift() {
		got[d.Path] = d.What + " | " + d.Got
	}
	for path, want := range map[string]string{
		"/proc/sys/kernel/core_pattern":                 "guarantee: kernel.core_pattern holds core (a pattern starting with | makes the kernel run that program as root, in the host's namespaces, whenever any process (in any pod) crashes) | |/var/lib/x/dump %p",
		"/proc/sys/net/bridge/bridge-nf-call-ip6tables": "| unreadable (",
		"/etc/ld.so.preload":                            "| present: /var/lib/x/hook.so",
	} {
		if !strings.Contains(got[path], want) {
			t.Errorf("%s: got %q, want %q", path, got[path], want)
		}
	}
	if len(got) != 3 {
		t.Errorf("drift %v", got)
	}
}

// TestAgentCgroup reads the v2 line of root's /proc/self/cgroup.
func TestAgentCgroup(t *testing.T) {
	r := newRig(t, userData(t, "hello"))
	a := r.agent()
	if g := a.agentCgroup(); g != "" {
		t.Errorf("no procfs: %q", g)
	}
	p := filepath.Join(r.root, "/proc/self/cgroup")
	os.MkdirAll(filepath.Dir(p), 0o755)
	os.WriteFile(p, []byte("1:name=systemd:/x\n0::/system.slice/drover-agent.service\n"), 0o644)
	if g := a.agentCgroup(); g != "/system.slice/drover-agent.service" {
		t.Errorf("agentCgroup = %q", g)
	}
}
