package network

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Sysctls are the kernel settings Kubernetes networking needs: forwarding
// between pod and node interfaces, and bridged pod traffic (IPv4 and IPv6)
// passing through iptables so Services and network policy apply to it.
func Sysctls() map[string]string {
	return map[string]string{
		"net.ipv4.ip_forward":                 "1",
		"net.bridge.bridge-nf-call-iptables":  "1",
		"net.bridge.bridge-nf-call-ip6tables": "1",
	}
}

// SysctlPath is where sysctl key lives under /proc/sys: "net.ipv4.ip_forward"
// is net/ipv4/ip_forward. A key already written with '/' (sysctl(8) accepts
// both, and needs '/' when an interface name has a dot) is taken as it is.
func SysctlPath(key string) (string, error) {
	p := key
	if !strings.Contains(key, "/") {
		p = strings.ReplaceAll(key, ".", "/")
	}
	for _, part := range strings.Split(p, "/") {
		if part == "" || part == "." || part == ".." {
			return "", fmt.Errorf("%q is not a sysctl name: it has an empty, . or .. component", key)
		}
	}
	return p, nil
}

// ApplySysctls writes every setting of want under <root>/proc/sys, in name
// order, skipping those that already have the value. It tries all of them and
// reports every failure, each naming its sysctl.
func ApplySysctls(root string, want map[string]string, logf Logf) error {
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var errs []error
	for _, k := range keys {
		if err := applySysctl(root, k, want[k], logf); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func applySysctl(root, key, value string, logf Logf) error {
	rel, err := SysctlPath(key)
	if err != nil {
		return fmt.Errorf("network: setting sysctl %s=%s: %w", key, value, err)
	}
	p := filepath.Join(root, "proc", "sys", filepath.FromSlash(rel))
	if cur, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(cur)) == value {
		logf.printf("network: sysctl %s = %s already", key, value)
		return nil
	}
	// No O_CREATE: a sysctl that does not exist is an error to report (its
	// module is not loaded), not a file to make.
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		hint := ""
		if errors.Is(err, fs.ErrNotExist) && strings.HasPrefix(key, "net.bridge.") {
			hint = ": the br_netfilter module must be loaded first"
		}
		return fmt.Errorf("network: setting sysctl %s=%s: %w%s", key, value, err, hint)
	}
	_, err = f.Write([]byte(value + "\n"))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("network: setting sysctl %s=%s: writing %s: %w", key, value, p, err)
	}
	logf.printf("network: sysctl %s = %s", key, value)
	return nil
}
