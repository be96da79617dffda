//go:build integration

package vagranttest

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func need(t *testing.T, tool, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		t.Fatalf("%s not found: install the Debian package %s (apt-get install %s)", tool, pkg, pkg)
	}
	return p
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// cleanEnv is the environment without the settings the Vagrantfile reads, so
// that a developer's own DROVER_VM_CPUS does not change what is checked.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "DROVER_") || strings.HasPrefix(k, "GO_") || strings.HasPrefix(k, "VAGRANT_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

func TestVagrantValidate(t *testing.T) {
	cmd := exec.Command(need(t, "vagrant", "vagrant"), "validate", "--ignore-provider")
	cmd.Dir = repoRoot(t)
	// Vagrant keeps its state outside the checkout and does not phone home.
	cmd.Env = cleanEnv("VAGRANT_HOME="+t.TempDir(), "VAGRANT_DOTFILE_PATH="+filepath.Join(t.TempDir(), "dot"),
		"VAGRANT_CHECKPOINT_DISABLE=1", "VAGRANT_NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "validated successfully") {
		t.Fatalf("vagrant validate --ignore-provider: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

type vm struct {
	Box           string                    `json:"box"`
	SyncedFolders []map[string]any          `json:"synced_folders"`
	Providers     map[string]map[string]any `json:"providers"`
	Provisioners  []map[string]any          `json:"provisioners"`
}

// TestVagrantfileSettings checks what `vagrant validate --ignore-provider`
// cannot: the provider blocks, sizing, nested virtualisation, the sync and the
// provisioner.
func TestVagrantfileSettings(t *testing.T) {
	cmd := exec.Command(need(t, "ruby", "ruby"), "testdata/inspect.rb", filepath.Join(repoRoot(t), "Vagrantfile"))
	cmd.Env = cleanEnv()
	out, err := cmd.Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		t.Fatalf("loading the Vagrantfile: %v\n%s", err, exit.Stderr)
	} else if err != nil {
		t.Fatal(err)
	}
	var configs []struct {
		VM vm `json:"vm"`
	}
	if err := json.Unmarshal(out, &configs); err != nil {
		t.Fatalf("inspect.rb output %s: %v", out, err)
	}
	if len(configs) != 1 {
		t.Fatalf("%d Vagrant.configure blocks, want 1", len(configs))
	}
	v := configs[0].VM
	if v.Box != "debian/bookworm64" {
		t.Errorf("box = %q, want debian/bookworm64", v.Box)
	}

	lv := v.Providers["libvirt"]
	vb := v.Providers["virtualbox"]
	for name, p := range map[string]map[string]any{"libvirt": lv, "virtualbox": vb} {
		if p["cpus"] != float64(4) || p["memory"] != float64(8192) {
			t.Errorf("%s: cpus %v memory %v, want 4 and 8192", name, p["cpus"], p["memory"])
		}
	}
	if lv["nested"] != true {
		t.Errorf("libvirt nested = %v, want true", lv["nested"])
	}
	want := []any{[]any{"modifyvm", "id", "--nested-hw-virt", "on"}}
	if !reflect.DeepEqual(vb["customize"], want) {
		t.Errorf("virtualbox customize = %v, want %v", vb["customize"], want)
	}

	var synced bool
	for _, f := range v.SyncedFolders {
		if f["dst"] == "/home/vagrant/drover" && f["src"] == "." && f["disabled"] != true {
			synced = true
		}
	}
	if !synced {
		t.Errorf("the repository is not synced to /home/vagrant/drover: %v", v.SyncedFolders)
	}

	if len(v.Provisioners) != 1 {
		t.Fatalf("provisioners = %v, want the shell provisioner only", v.Provisioners)
	}
	p := v.Provisioners[0]
	if p["type"] != "shell" || p["privileged"] != true || p["path"] != "scripts/vagrant-provision.sh" {
		t.Errorf("provisioner = %v, want a privileged shell running scripts/vagrant-provision.sh", p)
	}
	if env, _ := p["env"].(map[string]any); len(env) != 0 {
		t.Errorf("provisioner env = %v with GO_*/DROVER_* unset, want empty", env)
	}
}

func TestProvisionScript(t *testing.T) {
	script := filepath.Join(repoRoot(t), "scripts", "vagrant-provision.sh")
	bash := need(t, "bash", "bash")
	if out, err := exec.Command(bash, "-n", script).CombinedOutput(); err != nil {
		t.Errorf("bash -n: %v\n%s", err, out)
	}
	if out, err := exec.Command(need(t, "shellcheck", "shellcheck"), script).CombinedOutput(); err != nil {
		t.Errorf("shellcheck: %v\n%s", err, out)
	}

	// A Go version without a pinned checksum must be refused before the script
	// touches anything; DROVER_REPO points nowhere to make sure of it.
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"GO_VERSION=1.99.0"}, "no pinned sha256 for go1.99.0.linux-"},
		{[]string{"GO_VERSION=1.99.0", "GO_SHA256=not-a-digest"}, "GO_SHA256 not-a-digest: want 64 lowercase hex digits"},
	} {
		cmd := exec.Command(bash, script)
		cmd.Env = cleanEnv(append(tc.env, "DROVER_REPO="+filepath.Join(t.TempDir(), "absent"))...)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), tc.want) {
			t.Errorf("%v: err %v, want exit 1 with %q:\n%s", tc.env, err, tc.want, out)
		}
	}
}
