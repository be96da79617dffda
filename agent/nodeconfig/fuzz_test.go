package nodeconfig

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse: Parse never panics, and it fails exactly when Validate reports
// a problem; an accepted document renders without error.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("../../testdata/node/*.yaml")
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"", "{}", "[]", "a: &x [*x]", "kubelet: {config: {evictionHard: {a: b}}}",
		with("kubelet:", "  config:", "    authentication: {webhook: {cacheTTL: 1m}}"),
		with("containerd:", "  mirrors: {docker.io: [\"http://h:1\"]}"),
		with("kubelet:", "  taints: [a=b:NoExecute]", "  labels: {a: b}"),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "fuzz")
		problems := Validate(data, "fuzz")
		if (err != nil) != (len(problems) > 0) {
			t.Fatalf("Parse error %v but Validate gave %d problems", err, len(problems))
		}
		if err != nil {
			return
		}
		for _, p := range problems {
			_ = p.String()
		}
		if _, err := KubeletConfig(c, facts); err != nil {
			t.Fatalf("KubeletConfig on an accepted document: %v", err)
		}
		if _, err := KubeletFlags(c, facts, ""); err != nil {
			t.Fatalf("KubeletFlags on an accepted document: %v", err)
		}
		if c.Cluster.CAData != "" {
			if _, err := BootstrapKubeconfig(c); err != nil {
				t.Fatalf("BootstrapKubeconfig on an accepted document: %v", err)
			}
		}
		_ = ContainerdConfig(c)
		_ = HostsToml(c)
	})
}
