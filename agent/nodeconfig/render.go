package nodeconfig

import (
	"fmt"
	"os"
	"path"
	"sort"
	"strings"
)

// KubeletDefaultsPath holds the kubelet's flags (KUBELET_ARGS), read by
// kubelet.service as an EnvironmentFile.
const KubeletDefaultsPath = "/etc/default/kubelet"

// A Rendered is one kind of file the agent renders from the node file and
// the instance's facts. The table below is the one list of them: Render
// writes exactly these, and the Ignition policy refuses user-data that
// would write any of them (they are configured through the node file).
type Rendered struct {
	// Path is the file, or a path.Match pattern when there is one file per
	// item (a hosts.toml per mirrored registry).
	Path string
	// Via names the node-file fields that configure it.
	Via string
	// Instead says what to do rather than write the file, when that is not
	// "set Via in the node file" (a file rendered from the metadata).
	Instead string
	Mode    os.FileMode
	// render gives path → contents; every path must match Path.
	render func(c *Config, f Facts, nodeIP string) (map[string][]byte, error)
	// bootstrapOnly files are rendered only while the kubelet has no
	// kubeconfig of its own.
	bootstrapOnly bool
	// containerd's files depend on the node file alone: the agent writes
	// them (RenderContainerd) and starts containerd while the network comes
	// up and the cluster CA is found, before the kubelet's files (Render).
	containerd bool
}

var rendered = []Rendered{
	{Path: ContainerdConfigPath, Via: "containerd.sandboxImage and containerd.mirrors", Mode: 0o644, containerd: true,
		render: func(c *Config, _ Facts, _ string) (map[string][]byte, error) {
			return map[string][]byte{ContainerdConfigPath: ContainerdConfig(c)}, nil
		}},
	{Path: path.Join(ContainerdCertsDir, "*", "hosts.toml"), Via: "containerd.mirrors", Mode: 0o644, containerd: true,
		render: func(c *Config, _ Facts, _ string) (map[string][]byte, error) { return HostsToml(c), nil }},
	{Path: KubeletConfigPath, Via: "kubelet.config, kubelet.maxPods, kubelet.taints, cluster.dns and cluster.domain", Mode: 0o644,
		render: func(c *Config, f Facts, _ string) (map[string][]byte, error) {
			kc, err := KubeletConfig(c, f)
			return map[string][]byte{KubeletConfigPath: kc}, err
		}},
	{Path: KubeletDefaultsPath, Via: "kubelet.labels (the other flags are fixed)", Mode: 0o644,
		render: func(c *Config, f Facts, nodeIP string) (map[string][]byte, error) {
			flags, err := KubeletFlags(c, f, nodeIP)
			return map[string][]byte{KubeletDefaultsPath: []byte("KUBELET_ARGS=\"" + strings.Join(flags, " ") + "\"\n")}, err
		}},
	{Path: CredentialProviderConfigPath, Via: "registries.acr", Mode: 0o644,
		render: func(c *Config, f Facts, _ string) (map[string][]byte, error) {
			cp, err := CredentialProviderConfig(c, f)
			if cp == nil || err != nil {
				return nil, err
			}
			return map[string][]byte{CredentialProviderConfigPath: cp}, nil
		}},
	{Path: CAFile, Via: "cluster.caData or cluster.caHash", Mode: 0o644,
		render: func(c *Config, _ Facts, _ string) (map[string][]byte, error) {
			if c.Cluster.CAData == "" {
				return nil, fmt.Errorf("rendering %s: the cluster CA is not known yet (discover it first)", CAFile)
			}
			return map[string][]byte{CAFile: []byte(c.Cluster.CAData)}, nil
		}},
	{Path: TimesyncdDropIn, Via: "the instance metadata's ntp-conf/ntp-servers", Mode: 0o644,
		Instead: "to use other time servers, add a drop-in that sorts after it in " + path.Dir(TimesyncdDropIn) + " (its NTP= replaces the list)",
		render: func(_ *Config, f Facts, _ string) (map[string][]byte, error) {
			return map[string][]byte{TimesyncdDropIn: TimesyncdConfig(f)}, nil
		}},
	{Path: BootstrapKubeconfigPath, Via: "cluster.server, cluster.bootstrapToken and the CA", Mode: 0o600, bootstrapOnly: true,
		render: func(c *Config, _ Facts, _ string) (map[string][]byte, error) {
			bk, err := BootstrapKubeconfig(c)
			return map[string][]byte{BootstrapKubeconfigPath: bk}, err
		}},
}

// RenderedFiles lists every kind of file the agent renders.
func RenderedFiles() []Rendered { return append([]Rendered(nil), rendered...) }

// KubeletCredentials are what the kubelet itself writes during and after
// its TLS bootstrap (the --kubeconfig and --cert-dir of KubeletFlags): a
// file in the user-data could plant a client certificate or kubeconfig of
// someone else's choosing there.
func KubeletCredentials() []string { return []string{KubeconfigPath, CertDir} }

// File is one rendered file.
type File struct {
	Path string
	Mode os.FileMode
	Data []byte
}

// Render gives the kubelet's files the agent writes for the node (every
// rendered file but containerd's), sorted by path. bootstrap adds the
// bootstrap kubeconfig, which is wanted only while the kubelet has no
// kubeconfig of its own. nodeIP is as for KubeletFlags.
func Render(c *Config, f Facts, nodeIP string, bootstrap bool) ([]File, error) {
	return render(c, f, nodeIP, bootstrap, false)
}

// RenderContainerd gives containerd's files, sorted by path: they need
// neither the instance's facts nor the cluster CA.
func RenderContainerd(c *Config) ([]File, error) {
	return render(c, Facts{}, "", false, true)
}

func render(c *Config, f Facts, nodeIP string, bootstrap, containerd bool) ([]File, error) {
	var out []File
	for _, r := range rendered {
		if r.containerd != containerd || r.bootstrapOnly && !bootstrap {
			continue
		}
		files, err := r.render(c, f, nodeIP)
		if err != nil {
			return nil, err
		}
		for p, data := range files {
			if ok, _ := path.Match(r.Path, p); !ok {
				// The policy protects r.Path: a file outside it would be
				// one user-data could also write.
				return nil, fmt.Errorf("rendering %s: the path is not %s, the one the renderer declares", p, r.Path)
			}
			out = append(out, File{Path: p, Mode: r.Mode, Data: data})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}
