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

// ContainerdConfig renders containerd 1.7's config.toml (schema version 2):
// runc under the systemd cgroup driver, matching the kubelet's
// cgroupDriver, the sandbox image, and registry hosts read from
// ContainerdCertsDir (see HostsToml).
func ContainerdConfig(c *Config) []byte {
	var b strings.Builder
	b.WriteString("# Rendered by drover from " + Path + ".\n")
	b.WriteString("version = 2\n")
	b.WriteString("\n[plugins.\"io.containerd.grpc.v1.cri\"]\n")
	fmt.Fprintf(&b, "  sandbox_image = %s\n", tomlString(c.Containerd.SandboxImage))
	b.WriteString("\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n")
	b.WriteString("  default_runtime_name = \"runc\"\n")
	b.WriteString("\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n")
	b.WriteString("  runtime_type = \"io.containerd.runc.v2\"\n")
	b.WriteString("\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n")
	b.WriteString("  SystemdCgroup = true\n")
	b.WriteString("\n[plugins.\"io.containerd.grpc.v1.cri\".registry]\n")
	fmt.Fprintf(&b, "  config_path = %s\n", tomlString(ContainerdCertsDir))
	// Debian's containernetworking-plugins installs to /usr/lib/cni, not
	// containerd's default /opt/cni/bin. The CNI configuration itself comes
	// from the cluster (a CNI DaemonSet, or a file in the user-data).
	b.WriteString("\n[plugins.\"io.containerd.grpc.v1.cri\".cni]\n")
	b.WriteString("  bin_dir = \"/usr/lib/cni\"\n")
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
