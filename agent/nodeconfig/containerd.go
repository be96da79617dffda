package nodeconfig

import (
	"fmt"
	"path"
	"strings"
)

// Where containerd reads its configuration on the node.
const (
	ContainerdConfigPath = "/etc/containerd/config.toml"
	ContainerdCertsDir   = "/etc/containerd/certs.d"
)

// The CRI plugins of containerd 2.x, each configured in its own table.
const (
	criImages  = `[plugins."io.containerd.cri.v1.images"`
	criRuntime = `[plugins."io.containerd.cri.v1.runtime"`
)

// ContainerdConfig renders containerd 2.x's config.toml (schema version 3,
// the CRI plugin split into io.containerd.cri.v1.images and
// io.containerd.cri.v1.runtime): runc under the systemd cgroup driver,
// which containerd reports to the kubelet through the CRI RuntimeConfig
// call (kubelet 1.37 takes its cgroupDriver from there), the sandbox image
// pinned so that image garbage collection keeps it, and registry hosts
// read from ContainerdCertsDir (see HostsToml). Version 3, not 2.4's own
// 4: every 2.x reads it, and 2.4's migration to 4 moves only server
// settings, of which this file has none.
func ContainerdConfig(c *Config) []byte {
	var b strings.Builder
	b.WriteString("# Rendered by drover from " + Path + ".\n")
	b.WriteString("version = 3\n")
	b.WriteString("\n" + criImages + "]\n")
	b.WriteString("\n" + criImages + ".pinned_images]\n")
	fmt.Fprintf(&b, "  sandbox = %s\n", tomlString(c.Containerd.SandboxImage))
	b.WriteString("\n" + criImages + ".registry]\n")
	fmt.Fprintf(&b, "  config_path = %s\n", tomlString(ContainerdCertsDir))
	b.WriteString("\n" + criRuntime + "]\n")
	b.WriteString("\n" + criRuntime + ".containerd]\n")
	b.WriteString("  default_runtime_name = \"runc\"\n")
	b.WriteString("\n" + criRuntime + ".containerd.runtimes.runc]\n")
	b.WriteString("  runtime_type = \"io.containerd.runc.v2\"\n")
	b.WriteString("\n" + criRuntime + ".containerd.runtimes.runc.options]\n")
	b.WriteString("  SystemdCgroup = true\n")
	// Debian's containernetworking-plugins installs to /usr/lib/cni, not
	// containerd's default /opt/cni/bin. The CNI configuration itself comes
	// from the cluster (a CNI DaemonSet, or a file in the user-data).
	b.WriteString("\n" + criRuntime + ".cni]\n")
	b.WriteString("  bin_dirs = [\"/usr/lib/cni\"]\n")
	b.WriteString("  conf_dir = \"/etc/cni/net.d\"\n")
	return []byte(b.String())
}

// HostsToml renders one hosts.toml per mirrored registry, keyed by its path
// on the node (ContainerdCertsDir/<registry>/hosts.toml). containerd tries
// the mirrors in the node file's order and falls back to the registry
// itself (server); mirrors may be plain http, which containerd honours from
// the URL's scheme.
func HostsToml(c *Config) map[string][]byte {
	out := make(map[string][]byte, len(c.Containerd.Mirrors))
	for registry, mirrors := range c.Containerd.Mirrors {
		var b strings.Builder
		b.WriteString("# Rendered by drover from " + Path + ".\n")
		fmt.Fprintf(&b, "server = %s\n", tomlString(upstream(registry)))
		for _, m := range mirrors {
			fmt.Fprintf(&b, "\n[host.%s]\n", tomlString(strings.TrimSuffix(m, "/")))
			b.WriteString("  capabilities = [\"pull\", \"resolve\"]\n")
		}
		out[path.Join(ContainerdCertsDir, registry, "hosts.toml")] = []byte(b.String())
	}
	return out
}

// upstream is the registry's own endpoint; Docker Hub's API is not served
// at docker.io itself.
func upstream(registry string) string {
	if registry == "docker.io" {
		return "https://registry-1.docker.io"
	}
	return "https://" + registry
}

// tomlString quotes s as a TOML basic string. Values are validated before
// they get here, so this is a second line, not the only one.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\u%04X", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
