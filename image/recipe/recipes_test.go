package recipe

import (
	"os"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestArm64RecipeIsAnOverlay keeps recipes/ecs-node-arm64.yaml an overlay of
// recipes/ecs-node.yaml that sets only what names the architecture, so a
// change to the node (a package, a unit, a file) cannot reach one
// architecture only.
func TestArm64RecipeIsAnOverlay(t *testing.T) {
	const path = "../../recipes/ecs-node-arm64.yaml"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]any
	if err := yaml.Unmarshal(data, &top); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range top {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if got := strings.Join(keys, " "); got != "arch cmdline extends kernel name" {
		t.Errorf("%s sets %s; an arm64 overlay sets only extends, name, arch, kernel and the serial console", path, got)
	}
	if top["extends"] != "ecs-node.yaml" {
		t.Errorf("%s extends %v, want ecs-node.yaml", path, top["extends"])
	}
	arm, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	amd, err := Load("../../recipes/ecs-node.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if amd.Arch != "amd64" || arm.Arch != "arm64" || arm.Kernel != "linux-image-cloud-arm64" {
		t.Fatalf("arch/kernel: ecs-node %s/%s, ecs-node-arm64 %s/%s", amd.Arch, amd.Kernel, arm.Arch, arm.Kernel)
	}
	if n := len(arm.Cmdline); n == 0 || arm.Cmdline[n-1] != "console=ttyAMA0,115200" {
		t.Errorf("arm64 cmdline %v: the last console= must be the PL011, ttyAMA0", arm.Cmdline)
	}
	if len(arm.Packages) != len(amd.Packages) || len(arm.Go) != len(amd.Go) || len(arm.Files) != len(amd.Files) || len(arm.Exclude) != len(amd.Exclude) {
		t.Errorf("arm64 overlay does not carry the base's packages, components, files and exclusions")
	}
}
