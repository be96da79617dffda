//go:build integration

package nodeconfig

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/drover-os/drover/image/cache"
	"github.com/drover-os/drover/image/gomod"
	"github.com/drover-os/drover/image/lock"
	"github.com/drover-os/drover/image/recipe"
	"github.com/drover-os/drover/image/sources"
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

// recipeContainerd is the containerd the default recipe's lock pins, built
// (or found) in the drover cache exactly as `drover build` builds it.
func recipeContainerd(t *testing.T) string {
	t.Helper()
	r, err := recipe.Load(filepath.Join("..", "..", "recipes", "ecs-node.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := lock.Read(r.LockPath())
	if err != nil {
		t.Fatal(err)
	}
	rg := r.GoComponent("containerd")
	for _, lg := range l.Go {
		if rg == nil || lg.Name != rg.Name {
			continue
		}
		locked, err := sources.Locked(*rg, lg)
		if err != nil {
			t.Fatal(err)
		}
		dir, err := cache.DefaultDir(os.Getenv)
		if err != nil {
			t.Fatal(err)
		}
		store, err := cache.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("building (or finding cached) %s %s", lg.Module, lg.Version)
		env := gomod.Env{WorkDir: store.TempDir(), Toolchain: l.Toolchain}
		bin, _, err := gomod.BuildCached(context.Background(), env, store, locked, "linux", runtime.GOARCH)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(t.TempDir(), "containerd")
		data, err := os.ReadFile(bin.Path)
		if err == nil {
			err = os.WriteFile(dst, data, 0o755)
		}
		if err != nil {
			t.Fatal(err)
		}
		return dst
	}
	t.Fatalf("%s has no locked go component containerd", r.Path)
	return ""
}

// The containerd the image ships loads the rendered config.toml and reports
// the values it took from it: a wrong plugin name or schema version would
// be ignored or refused, not taken.
func TestContainerdLoadsConfig(t *testing.T) {
	containerd := recipeContainerd(t)
	file := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(file, ContainerdConfig(load(t, "full")), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd0 := exec.Command(containerd, "--config", file, "config", "dump")
	cmd0.Stderr = &stderr
	out, err := cmd0.Output()
	if err != nil {
		t.Fatalf("containerd config dump: %v\n%s%s", err, out, stderr.String())
	}
	t.Logf("containerd config dump:\n%s\n%s", stderr.String(), out)
	// Python's tomllib reads the dump: an independent TOML parser.
	cmd := exec.Command(lookTool(t, "python3", "python3"), "-c", "import json, sys, tomllib; print(json.dumps(tomllib.load(sys.stdin.buffer)))")
	cmd.Stdin = strings.NewReader(string(out))
	js, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("tomllib on the config dump: %v\n%s", err, js)
	}
	var dump struct {
		Version int
		Plugins map[string]map[string]any
	}
	if err := json.Unmarshal(js, &dump); err != nil {
		t.Fatal(err)
	}
	// containerd 2.4 migrates a version 3 file to its own version 4 (which
	// moves only server settings this file has none of); 2.0 … 2.2 take 3
	// as it is.
	if dump.Version < 3 {
		t.Errorf("config dump version %d: containerd read the file as a containerd 1.x config", dump.Version)
	}
	images, rt := dump.Plugins["io.containerd.cri.v1.images"], dump.Plugins["io.containerd.cri.v1.runtime"]
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"images pinned_images.sandbox", dig(images, "pinned_images", "sandbox"), "registry.k8s.io/pause:3.10"},
		{"images registry.config_path", dig(images, "registry", "config_path"), "/etc/containerd/certs.d"},
		{"runtime containerd.default_runtime_name", dig(rt, "containerd", "default_runtime_name"), "runc"},
		{"runtime runc.runtime_type", dig(rt, "containerd", "runtimes", "runc", "runtime_type"), "io.containerd.runc.v2"},
		{"runtime runc.options.SystemdCgroup", dig(rt, "containerd", "runtimes", "runc", "options", "SystemdCgroup"), true},
		{"runtime cni.bin_dirs", fmt.Sprint(dig(rt, "cni", "bin_dirs")), "[/usr/lib/cni]"},
		{"runtime cni.conf_dir", dig(rt, "cni", "conf_dir"), "/etc/cni/net.d"},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("containerd took %s = %v, want %v", c.what, c.got, c.want)
		}
	}
}

func dig(m map[string]any, keys ...string) any {
	var v any = m
	for _, k := range keys {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
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
