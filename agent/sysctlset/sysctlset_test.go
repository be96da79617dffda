package sysctlset

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/drover-os/drover/agent/network"
)

// image is /proc/sys on a node as the image and the agent leave it.
func image() map[string]string {
	m := map[string]string{}
	for _, s := range Security {
		m[s.Key] = s.Want[0] + "\n"
	}
	m["kernel.unprivileged_bpf_disabled"] = "1\n" // the stricter one-way value holds too
	return m
}

func reader(m map[string]string) func(string) (string, error) {
	return func(k string) (string, error) {
		v, ok := m[k]
		if !ok {
			return "", errors.New("no such file or directory")
		}
		return v, nil
	}
}

func TestImageHolds(t *testing.T) {
	if b := Check(reader(image())); len(b) != 0 {
		t.Errorf("the image's values: %v", b)
	}
}

// TestChangedSettingsCaught: each way a setting can be lowered is caught,
// and ToWrite puts back the first wanted value.
func TestChangedSettingsCaught(t *testing.T) {
	for key, bad := range map[string]string{
		"kernel.unprivileged_bpf_disabled":   "0",
		"kernel.perf_event_paranoid":         "1",
		"kernel.kptr_restrict":               "0",
		"kernel.dmesg_restrict":              "0",
		"kernel.core_pattern":                "|/var/lib/x/dump %p",
		"kernel.modprobe":                    "/var/lib/x/modprobe",
		"net.bridge.bridge-nf-call-iptables": "0",
		"fs.protected_symlinks":              "0",
	} {
		m := image()
		m[key] = bad + "\n"
		b := Check(reader(m))
		if len(b) != 1 || b[0].Key != key || b[0].Got != bad || !strings.Contains(b[0].String(), key+" = "+bad+", want ") {
			t.Errorf("%s = %s: %v", key, bad, b)
			continue
		}
		if w := ToWrite(b); len(w) != 1 || w[key] != b[0].Want[0] {
			t.Errorf("%s: ToWrite %v", key, w)
		}
	}
	m := image()
	delete(m, "net.bridge.bridge-nf-call-ip6tables") // br_netfilter unloaded
	if b := Check(reader(m)); len(b) != 1 || !strings.HasPrefix(b[0].Got, "unreadable (") {
		t.Errorf("unreadable setting: %v", b)
	}
}

func TestFind(t *testing.T) {
	for _, k := range []string{"kernel.core_pattern", "kernel/core_pattern", "/kernel/core_pattern", "-kernel.core_pattern", " kernel.core_pattern "} {
		if s, ok := Find(k); !ok || s.Key != "kernel.core_pattern" {
			t.Errorf("Find(%q) = %v, %v", k, s, ok)
		}
	}
	if _, ok := Find("vm.max_map_count"); ok {
		t.Error("vm.max_map_count is not a security setting")
	}
	if s, _ := Find("kernel.modprobe"); s.Path() != "/proc/sys/kernel/modprobe" {
		t.Errorf("Path = %s", s.Path())
	}
}

// TestAgreesWithTheNetworkSettings: the bridge settings the agent applies
// for Kubernetes networking are the ones the set holds them to.
func TestAgreesWithTheNetworkSettings(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Security {
		if seen[s.Key] || len(s.Want) == 0 || s.Why == "" {
			t.Errorf("%s: listed twice, or without a value or a reason", s.Key)
		}
		seen[s.Key] = true
	}
	for k, v := range maps.All(network.Sysctls()) {
		if s, ok := Find(k); ok && !s.Holds(v) {
			t.Errorf("network sets %s = %s, which the set does not hold", k, v)
		}
	}
}

// TestValuesOfTheImage pins what the agent writes and the guard expects:
// the Debian cloud kernel's strict defaults, systemd's link protections,
// the agent's bridge settings and kptr_restrict raised to 1. A change
// here changes every node; it is meant to be seen in review.
func TestValuesOfTheImage(t *testing.T) {
	want := map[string]string{
		"kernel.unprivileged_bpf_disabled":    "2 1",
		"kernel.perf_event_paranoid":          "3 2",
		"kernel.kptr_restrict":                "1 2",
		"kernel.dmesg_restrict":               "1",
		"kernel.core_pattern":                 "core",
		"kernel.modprobe":                     "/sbin/modprobe",
		"net.bridge.bridge-nf-call-iptables":  "1",
		"net.bridge.bridge-nf-call-ip6tables": "1",
		"fs.protected_symlinks":               "1",
		"fs.protected_hardlinks":              "1",
	}
	got := map[string]string{}
	for _, s := range Security {
		got[s.Key] = strings.Join(s.Want, " ")
	}
	if !maps.Equal(got, want) {
		t.Errorf("Security =\n%v\nwant\n%v", got, want)
	}
}

// TestMatching: what a sysctl.d line would set, globs included.
func TestMatching(t *testing.T) {
	for key, want := range map[string]string{
		"kernel.core_pattern":                 "kernel.core_pattern",
		"kernel/core_pattern":                 "kernel.core_pattern",
		"-kernel.modprobe":                    "kernel.modprobe",
		"kernel.*":                            "kernel.unprivileged_bpf_disabled kernel.perf_event_paranoid kernel.kptr_restrict kernel.dmesg_restrict kernel.core_pattern kernel.modprobe",
		"net.bridge.bridge-nf-call-ip?tables": "net.bridge.bridge-nf-call-ip6tables",
		"net.bridge.bridge-nf-call-ip*":       "net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables",
		"*":                                   "kernel.unprivileged_bpf_disabled kernel.perf_event_paranoid kernel.kptr_restrict kernel.dmesg_restrict kernel.core_pattern kernel.modprobe net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables fs.protected_symlinks fs.protected_hardlinks",
		"fs.protected_[sh]*links":             "fs.protected_symlinks fs.protected_hardlinks",
		"vm.max_map_count":                    "",
		"net.ipv4.conf.*.rp_filter":           "",
	} {
		var got []string
		for _, s := range Matching(key) {
			got = append(got, s.Key)
		}
		if strings.Join(got, " ") != want {
			t.Errorf("Matching(%q) = %q, want %q", key, got, want)
		}
	}
}
