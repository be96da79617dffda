// Package userdata renders the Ignition user-data a scaling group's launch
// template gives drover nodes: one storage.files entry holding the node
// file (/etc/drover/node.yaml) built from a few settings, plus any extra
// Ignition files the caller merges in. The result is checked with exactly
// the code the agent runs, so a rendered user-data is one the node accepts.
package userdata

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"sort"

	"gopkg.in/yaml.v3"

	"github.com/drover-os/drover/agent/agent"
	"github.com/drover-os/drover/agent/ignition"
)

// Spec is what a platform team gives: flags or a small YAML file.
type Spec struct {
	Server         string              `yaml:"server"`
	CAFile         string              `yaml:"caFile"`
	CAData         string              `yaml:"caData"`
	CAHash         string              `yaml:"caHash"`
	BootstrapToken string              `yaml:"bootstrapToken"`
	Labels         map[string]string   `yaml:"labels"`
	Taints         []string            `yaml:"taints"`
	Mirrors        map[string][]string `yaml:"mirrors"`
	SandboxImage   string              `yaml:"sandboxImage"`
	MaxPods        int                 `yaml:"maxPods"`
	ClusterDNS     []string            `yaml:"clusterDNS"`
	ClusterDomain  string              `yaml:"clusterDomain"`
	// KubeletConfig is merged over drover's kubelet configuration, as the
	// node file's kubelet.config (KubeletConfiguration v1beta1 fields;
	// the agent's policy checks what it may not lower).
	KubeletConfig map[string]any `yaml:"kubeletConfig"`
	// ACR is the node file's registries.acr: the kubelet's ACR
	// credential provider (docs/node-config.md, "Private ACR images").
	ACR *ACR `yaml:"acr"`
	// Files are extra files (path → content, mode 0644) under /etc or
	// /var, e.g. a CNI configuration when the cluster has no CNI
	// DaemonSet.
	Files map[string]string `yaml:"files"`
}

// ACR is registries.acr of the node file.
type ACR struct {
	Regions     []string      `yaml:"regions,omitempty"`
	Instances   []ACRInstance `yaml:"instances,omitempty"`
	APIEndpoint string        `yaml:"apiEndpoint,omitempty"`
}

// ACRInstance is one registries.acr.instances entry.
type ACRInstance struct {
	Domain string `yaml:"domain"`
	ID     string `yaml:"id,omitempty"`
	Region string `yaml:"region,omitempty"`
}

// Load reads a Spec from a YAML file; unknown fields are errors.
func Load(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var s Spec
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &s, nil
}

// nodeFile mirrors the node file schema (docs/node-config.md) for rendering.
type nodeFile struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Cluster    struct {
		Server         string   `yaml:"server"`
		CAData         string   `yaml:"caData,omitempty"`
		CAHash         string   `yaml:"caHash,omitempty"`
		BootstrapToken string   `yaml:"bootstrapToken"`
		DNS            []string `yaml:"dns,omitempty"`
		Domain         string   `yaml:"domain,omitempty"`
	} `yaml:"cluster"`
	Kubelet    *nodeKubelet `yaml:"kubelet,omitempty"`
	Containerd *struct {
		SandboxImage string              `yaml:"sandboxImage,omitempty"`
		Mirrors      map[string][]string `yaml:"mirrors,omitempty"`
	} `yaml:"containerd,omitempty"`
	Registries *struct {
		ACR *ACR `yaml:"acr"`
	} `yaml:"registries,omitempty"`
}

type nodeKubelet struct {
	Labels  map[string]string `yaml:"labels,omitempty"`
	Taints  []string          `yaml:"taints,omitempty"`
	MaxPods int               `yaml:"maxPods,omitempty"`
	Config  map[string]any    `yaml:"config,omitempty"`
}

// NodeFile renders the node file for s.
func NodeFile(s *Spec) ([]byte, error) {
	var n nodeFile
	n.APIVersion, n.Kind = "drover.dev/v1alpha1", "NodeConfig"
	n.Cluster.Server, n.Cluster.BootstrapToken, n.Cluster.CAHash = s.Server, s.BootstrapToken, s.CAHash
	n.Cluster.DNS, n.Cluster.Domain = s.ClusterDNS, s.ClusterDomain
	n.Cluster.CAData = s.CAData
	if s.CAFile != "" {
		ca, err := os.ReadFile(s.CAFile)
		if err != nil {
			return nil, fmt.Errorf("reading the cluster CA: %w", err)
		}
		n.Cluster.CAData = string(ca)
	}
	if len(s.Labels)+len(s.Taints)+len(s.KubeletConfig) > 0 || s.MaxPods > 0 {
		n.Kubelet = &nodeKubelet{s.Labels, s.Taints, s.MaxPods, s.KubeletConfig}
	}
	if s.SandboxImage != "" || len(s.Mirrors) > 0 {
		n.Containerd = &struct {
			SandboxImage string              `yaml:"sandboxImage,omitempty"`
			Mirrors      map[string][]string `yaml:"mirrors,omitempty"`
		}{s.SandboxImage, s.Mirrors}
	}
	if s.ACR != nil {
		n.Registries = &struct {
			ACR *ACR `yaml:"acr"`
		}{s.ACR}
	}
	var b bytes.Buffer
	b.WriteString("# Rendered by `drover userdata`; see docs/node-config.md.\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Render returns the Ignition config (spec 3.4.0) for s and validates it
// with the agent's own checks; every problem is returned.
func Render(s *Spec) ([]byte, error) {
	node, err := NodeFile(s)
	if err != nil {
		return nil, err
	}
	files := []any{map[string]any{
		"path": agent.NodeFile, "mode": 0o600, "overwrite": true,
		"contents": map[string]any{"source": "data:;base64," + base64.StdEncoding.EncodeToString(node)},
	}}
	paths := make([]string, 0, len(s.Files))
	for p := range s.Files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		files = append(files, map[string]any{
			"path": p, "mode": 0o644, "overwrite": true,
			"contents": map[string]any{"source": "data:;base64," + base64.StdEncoding.EncodeToString([]byte(s.Files[p]))},
		})
	}
	cfg := map[string]any{
		"ignition": map[string]any{"version": "3.4.0"},
		"storage":  map[string]any{"files": files},
	}
	out, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	if ps := ignition.Validate(out, agent.Options(nil)); len(ps) > 0 {
		msgs := make([]string, len(ps))
		for i, p := range ps {
			msgs[i] = p.String()
		}
		sort.Strings(msgs)
		return nil, fmt.Errorf("the rendered user-data would be refused by the node:\n  %s", joinLines(msgs))
	}
	return append(out, '\n'), nil
}

func joinLines(s []string) string {
	var b bytes.Buffer
	for i, x := range s {
		if i > 0 {
			b.WriteString("\n  ")
		}
		b.WriteString(x)
	}
	return b.String()
}
