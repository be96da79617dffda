//go:build integration

package nodeconfig

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// lookTool fails (never skips) when a host tool is missing, naming the
// Debian package that brings it.
func lookTool(t *testing.T, name, pkg string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found: install the Debian package %s", name, pkg)
	}
	return path
}

// containerd itself loads the rendered config.toml and reports the values
// it took from it.
func TestContainerdLoadsConfig(t *testing.T) {
	containerd := lookTool(t, "containerd", "containerd")
	file := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(file, ContainerdConfig(load(t, "full")), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(containerd, "--config", file, "config", "dump").CombinedOutput()
	if err != nil {
		t.Fatalf("containerd config dump: %v\n%s", err, out)
	}
	for _, want := range []string{
		`sandbox_image = "registry.k8s.io/pause:3.10"`,
		`SystemdCgroup = true`,
		`config_path = "/etc/containerd/certs.d"`,
		`default_runtime_name = "runc"`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("containerd config dump lacks %s:\n%s", want, out)
		}
	}
}

// Python's tomllib, an independent TOML parser, reads every hosts.toml to
// the structure containerd expects.
func TestHostsTomlParses(t *testing.T) {
	python := lookTool(t, "python3", "python3")
	hosts := HostsToml(load(t, "full"))
	want := map[string]any{
		"/etc/containerd/certs.d/docker.io/hosts.toml": map[string]any{
			"server": "https://registry-1.docker.io",
			"host": map[string]any{
				"http://10.0.2.2:5000": map[string]any{"capabilities": []any{"pull", "resolve"}},
			},
		},
		"/etc/containerd/certs.d/registry.k8s.io/hosts.toml": map[string]any{
			"server": "https://registry.k8s.io",
			"host": map[string]any{
				"https://mirror-a.example.com": map[string]any{"capabilities": []any{"pull", "resolve"}},
				"http://10.0.2.2:5001":         map[string]any{"capabilities": []any{"pull", "resolve"}},
			},
		},
	}
	if len(hosts) != len(want) {
		t.Fatalf("got %d hosts.toml files, want %d", len(hosts), len(want))
	}
	for path, data := range hosts {
		cmd := exec.Command(python, "-c", "import json, sys, tomllib; print(json.dumps(tomllib.load(sys.stdin.buffer)))")
		cmd.Stdin = strings.NewReader(string(data))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("tomllib on %s: %v\n%s\n%s", path, err, out, data)
		}
		var got any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want[path]) {
			t.Errorf("%s parses to %v, want %v", path, got, want[path])
		}
	}
}
