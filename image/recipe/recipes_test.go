package recipe

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestArm64RecipeMirrorsAmd64 keeps recipes/ecs-node-arm64.yaml a copy of
// recipes/ecs-node.yaml in all but the fields that name the architecture,
// so a change to the node (a package, a unit, a file) cannot reach one
// architecture only.
func TestArm64RecipeMirrorsAmd64(t *testing.T) {
	archFields := map[string]bool{"name": true, "arch": true, "kernel": true}
	load := func(path string) (map[string]any, *Recipe) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Parse(path, data)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		for k := range archFields {
			delete(m, k)
		}
		// The serial console's name is the one architecture-dependent
		// kernel argument: ttyS0 (16550) on x86, ttyAMA0 (PL011) on Arm.
		if c, ok := m["cmdline"].([]any); ok {
			for i, a := range c {
				if s, ok := a.(string); ok {
					c[i] = strings.Replace(s, "console=ttyAMA0,", "console=ttyS0,", 1)
				}
			}
		}
		return m, r
	}
	amd, ra := load("../../recipes/ecs-node.yaml")
	arm, rb := load("../../recipes/ecs-node-arm64.yaml")
	if ra.Arch != "amd64" || rb.Arch != "arm64" || rb.Kernel != "linux-image-cloud-arm64" {
		t.Fatalf("arch/kernel: ecs-node %s/%s, ecs-node-arm64 %s/%s", ra.Arch, ra.Kernel, rb.Arch, rb.Kernel)
	}
	for k := range mergeKeys(amd, arm) {
		if !reflect.DeepEqual(amd[k], arm[k]) {
			t.Errorf("recipes/ecs-node-arm64.yaml: %s differs from recipes/ecs-node.yaml; only name, arch, kernel and the serial console may differ: copy the change across", k)
		}
	}
}

func mergeKeys(a, b map[string]any) map[string]bool {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	return keys
}
