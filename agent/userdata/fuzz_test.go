package userdata

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/drover-os/drover/agent/agent"
	"github.com/drover-os/drover/agent/nodeconfig"
)

// FuzzRender: settings come from flags or a hand-written file. Render either
// refuses them with the agent's own problem lines, or renders a user-data
// whose node file the node parses back to exactly those settings (render →
// parse round trip).
func FuzzRender(f *testing.F) {
	const hash = "sha256:dec63347a7bc76807648a5c52b199e99bd5602f62e6177654221c989d81386f8"
	f.Add("https://10.0.0.10:6443", hash, "abcdef.0123456789abcdef", "example.com/pool", "workers", "dedicated=batch:NoSchedule",
		"docker.io", "https://mirror.example.com", 64, "10.96.0.10", "cluster.local", "registry.k8s.io/pause:3.10")
	f.Add("https://[fd00::1]:6443", hash, "abcdef.0123456789abcdef", "", "", "a:NoExecute", "", "", 0, "fd00::a", "", "")
	f.Add("http://x", "sha256:00", "bad", "-x", "y", "b", "h", "ftp://m", -1, "::FFFF:1.2.3.4", "Cluster.Local", "Bad Image")
	f.Fuzz(func(t *testing.T, server, caHash, token, labelKey, labelValue, taint, registry, mirror string, maxPods int,
		dns, domain, sandbox string) {
		s := &Spec{Server: server, CAHash: caHash, BootstrapToken: token, MaxPods: maxPods, ClusterDomain: domain, SandboxImage: sandbox}
		if labelKey != "" {
			s.Labels = map[string]string{labelKey: labelValue}
		}
		if taint != "" {
			s.Taints = []string{taint}
		}
		if registry != "" {
			s.Mirrors = map[string][]string{registry: {mirror}}
		}
		if dns != "" {
			s.ClusterDNS = []string{dns}
		}
		out, err := Render(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "the rendered user-data would be refused by the node:\n  ") {
				t.Fatalf("refusal without the node's problems: %v", err)
			}
			return
		}
		_, _, content := decode(t, out)
		c, err := nodeconfig.Parse(content[agent.NodeFile], agent.NodeFile)
		if err != nil {
			t.Fatalf("Render accepted a node file the node refuses: %v\n%s", err, content[agent.NodeFile])
		}
		cl := c.Cluster
		if cl.Server != server || cl.CAHash != caHash || cl.BootstrapToken != token {
			t.Fatalf("cluster %+v from server %q caHash %q token %q", cl, server, caHash, token)
		}
		if domain != "" && cl.Domain != domain || dns != "" && (len(cl.DNS) != 1 || cl.DNS[0] != netip.MustParseAddr(dns).String()) {
			t.Fatalf("dns %v domain %q from %q %q", cl.DNS, cl.Domain, dns, domain)
		}
		if !reflect.DeepEqual(c.Kubelet.Labels, s.Labels) {
			t.Fatalf("labels %v from %v", c.Kubelet.Labels, s.Labels)
		}
		if taint != "" && (len(c.Kubelet.Taints) != 1 || c.Kubelet.Taints[0].String() != strings.Replace(taint, "=:", ":", 1)) {
			t.Fatalf("taints %v from %q", c.Kubelet.Taints, taint)
		}
		if maxPods > 0 && int(c.Kubelet.MaxPods) != maxPods {
			t.Fatalf("maxPods %d from %d", c.Kubelet.MaxPods, maxPods)
		}
		if !reflect.DeepEqual(c.Containerd.Mirrors, s.Mirrors) || sandbox != "" && c.Containerd.SandboxImage != sandbox {
			t.Fatalf("containerd %+v from %v %q", c.Containerd, s.Mirrors, sandbox)
		}
	})
}
