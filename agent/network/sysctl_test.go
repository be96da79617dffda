package network

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// procRoot makes the files of the given sysctls under a temporary root, the
// way /proc/sys has them once their modules are loaded.
func procRoot(t *testing.T, values map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for k, v := range values {
		rel, err := SysctlPath(k)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, "proc/sys", rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestApplySysctls(t *testing.T) {
	root := procRoot(t, map[string]string{
		"net.ipv4.ip_forward":                 "0",
		"net.bridge.bridge-nf-call-iptables":  "0",
		"net.bridge.bridge-nf-call-ip6tables": "1",
	})
	var log []string
	logf := func(f string, a ...any) { log = append(log, strings.TrimSpace(sprintf(f, a...))) }
	if err := ApplySysctls(root, Sysctls(), logf); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"net/ipv4/ip_forward", "net/bridge/bridge-nf-call-iptables", "net/bridge/bridge-nf-call-ip6tables"} {
		b, err := os.ReadFile(filepath.Join(root, "proc/sys", rel))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != "1\n" {
			t.Errorf("%s = %q, want \"1\\n\"", rel, b)
		}
	}
	want := "network: sysctl net.bridge.bridge-nf-call-ip6tables = 1 already\n" +
		"network: sysctl net.bridge.bridge-nf-call-iptables = 1\n" +
		"network: sysctl net.ipv4.ip_forward = 1"
	if got := strings.Join(log, "\n"); got != want {
		t.Errorf("log:\n%s\nwant:\n%s", got, want)
	}
}

func TestApplySysctlsReportsEveryMissingOne(t *testing.T) {
	// br_netfilter not loaded: no net/bridge directory at all.
	root := procRoot(t, map[string]string{"net.ipv4.ip_forward": "0"})
	err := ApplySysctls(root, Sysctls(), nil)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{
		"network: setting sysctl net.bridge.bridge-nf-call-ip6tables=1: open ",
		"network: setting sysctl net.bridge.bridge-nf-call-iptables=1: open ",
		": the br_netfilter module must be loaded first",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	// The one that exists was still set.
	if b, _ := os.ReadFile(filepath.Join(root, "proc/sys/net/ipv4/ip_forward")); string(b) != "1\n" {
		t.Errorf("ip_forward = %q", b)
	}
}

func TestSysctlPath(t *testing.T) {
	for key, want := range map[string]string{
		"net.ipv4.ip_forward":                "net/ipv4/ip_forward",
		"net.bridge.bridge-nf-call-iptables": "net/bridge/bridge-nf-call-iptables",
		"net/ipv4/conf/eth0.100/rp_filter":   "net/ipv4/conf/eth0.100/rp_filter",
	} {
		if got, err := SysctlPath(key); err != nil || got != want {
			t.Errorf("SysctlPath(%q) = %q, %v; want %q", key, got, err, want)
		}
	}
	for _, bad := range []string{"", "net..ipv4", "net/../../etc/passwd", "net.ipv4."} {
		if _, err := SysctlPath(bad); err == nil {
			t.Errorf("SysctlPath(%q) succeeded", bad)
		}
	}
}
