package nodeconfig

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// FuzzParse: the node file comes from user-data, so Parse must never panic;
// it lists the same problems every time; every problem names the source and,
// unless it is about the whole document, a line and a field path; an
// accepted document written back out (formatNode) parses to the same
// Config; and everything the agent renders from an accepted document
// renders without error.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("../../testdata/node/*.yaml")
	if len(files) == 0 {
		f.Fatal("no sample node files in ../../testdata/node")
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"", "{}", "[]", "a: &x [*x]", "kubelet: {config: {evictionHard: {a: b}}}", "---\n---\n", "x: [",
		with("kubelet:", "  config:", "    logging: {options: {json: {infoBufferSize: 1Mi}}}", "    authentication: {webhook: {cacheTTL: 1m}}", "    maxOpenFiles: 1e3", "    podPidsLimit: 0x10"),
		with("containerd:", "  mirrors: {docker.io: [\"http://h:1\"]}"),
		with("kubelet:", "  taints: [a=b:NoExecute, 'c:NoSchedule']", "  labels: {a: b, example.com/x: ''}", "  maxPods: 0o20"),
		with("cluster:", "  dns: ['::1', 10.0.0.1]", "  domain: a.b"),
		with("registries:", "  acr:", "    regions: [cn-shanghai]", "    instances:", "      - {domain: a.example.com:5000, id: cri-a1, region: cn-beijing}",
			"      - domain: b-registry-vpc.cn-hangzhou.cr.aliyuncs.com", "    apiEndpoint: http://cr-vpc.{region}.aliyuncs.com"),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		problems := Validate(data, "fuzz")
		if again := Validate(data, "fuzz"); !reflect.DeepEqual(problems, again) {
			t.Fatalf("Validate is not deterministic:\n%v\n%v", problems, again)
		}
		for _, p := range problems {
			whole := p.Path == "" && (strings.HasPrefix(p.Message, "the document is empty") || strings.HasPrefix(p.Message, "invalid YAML") ||
				strings.HasPrefix(p.Message, "a second YAML document") || strings.HasPrefix(p.Message, "must be a mapping") ||
				// a key that is not a string has no field name; its line says where
				strings.HasPrefix(p.Message, "field names must be strings"))
			if p.Source != "fuzz" || p.Message == "" || !whole && (p.Path == "" || p.Line <= 0) {
				t.Fatalf("problem does not name its source, line and field: %#v", p)
			}
		}
		c, err := Parse(data, "fuzz")
		if (err == nil) != (len(problems) == 0) {
			t.Fatalf("Parse error %v with %d problems from Validate", err, len(problems))
		}
		if err != nil {
			return
		}
		text := formatNode(t, c)
		c2, err := Parse(text, "fuzz")
		if err != nil {
			t.Fatalf("an accepted node file written back out is refused: %v\n%s", err, text)
		}
		if a, b := formatNode(t, c2), text; string(a) != string(b) {
			t.Fatalf("node file changed through its text\nfirst:\n%s\nsecond:\n%s", b, a)
		}
		if _, err := KubeletConfig(c, facts); err != nil {
			t.Fatalf("KubeletConfig on an accepted document: %v", err)
		}
		// registries.acr asks for the provider; an image without it fails the join (tested in registries_test.go).
		if _, err := KubeletFlags(c, facts, ""); err != nil && c.Registries.ACR == nil {
			t.Fatalf("KubeletFlags on an accepted document: %v", err)
		}
		if c.Cluster.CAData != "" {
			if _, err := BootstrapKubeconfig(c); err != nil {
				t.Fatalf("BootstrapKubeconfig on an accepted document: %v", err)
			}
		}
		withACR := facts
		withACR.ACRProvider = true
		if _, err := CredentialProviderConfig(c, withACR); err != nil {
			t.Fatalf("CredentialProviderConfig on an accepted document: %v", err)
		}
		if _, err := KubeletFlags(c, withACR, ""); err != nil {
			t.Fatalf("KubeletFlags with the ACR provider on an accepted document: %v", err)
		}
		_ = ContainerdConfig(c)
		_ = HostsToml(c)
	})
}

// formatNode writes c back as a node file, every field Parse reads, with
// the defaults Parse filled in written out.
func formatNode(t *testing.T, c *Config) []byte {
	t.Helper()
	cluster := map[string]any{"server": c.Cluster.Server, "bootstrapToken": c.Cluster.BootstrapToken, "dns": c.Cluster.DNS, "domain": c.Cluster.Domain}
	if c.Cluster.CAData != "" {
		cluster["caData"] = c.Cluster.CAData
	}
	if c.Cluster.CAHash != "" {
		cluster["caHash"] = c.Cluster.CAHash
	}
	taints := []string{}
	for _, tn := range c.Kubelet.Taints {
		taints = append(taints, tn.String())
	}
	kubelet := map[string]any{"labels": c.Kubelet.Labels, "taints": taints, "maxPods": c.Kubelet.MaxPods}
	if len(c.Kubelet.Labels) == 0 {
		delete(kubelet, "labels")
	}
	if len(taints) == 0 {
		delete(kubelet, "taints")
	}
	if c.Kubelet.Config != nil {
		var v any
		if err := json.Unmarshal(c.Kubelet.Config, &v); err != nil {
			t.Fatalf("kubelet.config of an accepted document is not JSON: %v", err)
		}
		kubelet["config"] = v
	}
	containerd := map[string]any{"sandboxImage": c.Containerd.SandboxImage}
	if len(c.Containerd.Mirrors) > 0 {
		containerd["mirrors"] = c.Containerd.Mirrors
	}
	doc := map[string]any{"apiVersion": c.APIVersion, "kind": c.Kind, "cluster": cluster, "kubelet": kubelet, "containerd": containerd}
	if a := c.Registries.ACR; a != nil {
		acr := map[string]any{}
		if a.Regions != nil {
			acr["regions"] = a.Regions
		}
		var instances []map[string]string
		for _, in := range a.Instances {
			m := map[string]string{"domain": in.Domain, "region": in.Region}
			if in.ID != "" {
				m["id"] = in.ID
			}
			instances = append(instances, m)
		}
		if instances != nil {
			acr["instances"] = instances
		}
		if a.APIEndpoint != "" {
			acr["apiEndpoint"] = a.APIEndpoint
		}
		doc["registries"] = map[string]any{"acr": acr}
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatalf("marshalling an accepted node file: %v", err)
	}
	return out
}
