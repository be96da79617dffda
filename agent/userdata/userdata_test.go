package userdata

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/drover-os/drover/agent/agent"
	"github.com/drover-os/drover/agent/nodeconfig"
)

const (
	sampleCA   = "../../testdata/pki/ca.crt"
	samplePool = "../../testdata/userdata/pool.yaml"
)

// ignitionFile is one storage.files entry as Render writes it.
type ignitionFile struct {
	Path      string `json:"path"`
	Mode      int    `json:"mode"`
	Overwrite bool   `json:"overwrite"`
	Contents  struct {
		Source string `json:"source"`
	} `json:"contents"`
}

// decode reads Render's output back: the Ignition version and each file
// with its decoded content.
func decode(t *testing.T, out []byte) (string, []ignitionFile, map[string][]byte) {
	t.Helper()
	var cfg struct {
		Ignition struct{ Version string } `json:"ignition"`
		Storage  struct {
			Files []ignitionFile `json:"files"`
		} `json:"storage"`
	}
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatalf("Render output is not JSON: %v\n%s", err, out)
	}
	content := map[string][]byte{}
	for _, f := range cfg.Storage.Files {
		b64, ok := strings.CutPrefix(f.Contents.Source, "data:;base64,")
		if !ok {
			t.Fatalf("%s: source %q is not a base64 data URL", f.Path, f.Contents.Source)
		}
		data, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			t.Fatalf("%s: %v", f.Path, err)
		}
		content[f.Path] = data
	}
	return cfg.Ignition.Version, cfg.Storage.Files, content
}

// TestRenderPool renders the shared sample settings and reads the result
// the way the node does: the node file parses to exactly those settings,
// mode 0600, and the extra file follows with mode 0644.
func TestRenderPool(t *testing.T) {
	s, err := Load(samplePool)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Render(s)
	if err != nil {
		t.Fatal(err)
	}
	version, files, content := decode(t, out)
	if version != "3.4.0" || len(files) != 2 {
		t.Fatalf("version %q, %d files", version, len(files))
	}
	node, cni := files[0], files[1]
	if node.Path != agent.NodeFile || node.Mode != 0o600 || !node.Overwrite {
		t.Errorf("node file entry %+v", node)
	}
	if cni.Path != "/etc/cni/net.d/10-pool.conflist" || cni.Mode != 0o644 || !cni.Overwrite ||
		string(content[cni.Path]) != `{"cniVersion": "1.0.0", "name": "pool", "plugins": []}` {
		t.Errorf("extra file entry %+v: %q", cni, content[cni.Path])
	}
	c, err := nodeconfig.Parse(content[agent.NodeFile], "node.yaml")
	if err != nil {
		t.Fatalf("the node refuses the rendered node file: %v\n%s", err, content[agent.NodeFile])
	}
	want := nodeconfig.Cluster{Server: "https://10.0.0.10:6443", CAHash: s.CAHash, BootstrapToken: "abcdef.0123456789abcdef",
		DNS: []string{"10.96.0.10"}, Domain: "cluster.local"}
	if !reflect.DeepEqual(c.Cluster, want) {
		t.Errorf("cluster %+v, want %+v", c.Cluster, want)
	}
	if !reflect.DeepEqual(c.Kubelet.Labels, map[string]string{"example.com/pool": "workers"}) || c.Kubelet.MaxPods != 64 ||
		len(c.Kubelet.Taints) != 1 || c.Kubelet.Taints[0] != (nodeconfig.Taint{Key: "dedicated", Value: "batch", Effect: "NoSchedule"}) {
		t.Errorf("kubelet %+v", c.Kubelet)
	}
	if !reflect.DeepEqual(c.Containerd.Mirrors, map[string][]string{"docker.io": {"https://mirror.example.com"}}) ||
		c.Containerd.SandboxImage != nodeconfig.DefaultSandboxImage {
		t.Errorf("containerd %+v", c.Containerd)
	}
}

// TestNodeFileEmbedsCAFile: --ca-file's bytes become cluster.caData as they
// are, and a CA file that cannot be read is an error naming it.
func TestNodeFileEmbedsCAFile(t *testing.T) {
	pem, err := os.ReadFile(sampleCA)
	if err != nil {
		t.Fatal(err)
	}
	node, err := NodeFile(&Spec{Server: "https://10.0.0.10:6443", CAFile: sampleCA, BootstrapToken: "abcdef.0123456789abcdef"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := nodeconfig.Parse(node, "node.yaml")
	if err != nil {
		t.Fatalf("%v\n%s", err, node)
	}
	if c.Cluster.CAData != string(pem) || c.Cluster.CAHash != "" {
		t.Errorf("caData %q caHash %q, want the file's bytes", c.Cluster.CAData, c.Cluster.CAHash)
	}
	if c.Kubelet.Labels != nil || c.Kubelet.Taints != nil || c.Containerd.Mirrors != nil {
		t.Errorf("sections not asked for are set: %+v", c)
	}
	missing := filepath.Join(t.TempDir(), "nope.crt")
	if _, err := NodeFile(&Spec{CAFile: missing}); err == nil || !strings.Contains(err.Error(), "reading the cluster CA") || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing CA file: %v", err)
	}
}

// TestRenderRefusesWhatTheNodeRefuses: settings the node would refuse are an
// error listing the agent's own problem lines, sorted, and nothing is
// rendered.
func TestRenderRefusesWhatTheNodeRefuses(t *testing.T) {
	out, err := Render(&Spec{Server: "http://10.0.0.10:6443", CAHash: "sha256:00", BootstrapToken: "bad"})
	if out != nil || err == nil {
		t.Fatalf("rendered %q, err %v", out, err)
	}
	want := "the rendered user-data would be refused by the node:\n" +
		`  /etc/drover/node.yaml:5: cluster.server: must be an https URL (the kubelet checks the API server against the cluster CA), got "http://10.0.0.10:6443"` + "\n" +
		"  /etc/drover/node.yaml:6: cluster.caHash: must be sha256:<64 hex digits>, the SHA-256 of the CA certificate's public key info (kubeadm's --discovery-token-ca-cert-hash)\n" +
		"  /etc/drover/node.yaml:7: cluster.bootstrapToken: must match [a-z0-9]{6}.[a-z0-9]{16} (create one with kubeadm token create)"
	if err.Error() != want {
		t.Errorf("error\n got: %s\nwant: %s", err, want)
	}
	if _, err := Render(&Spec{Server: "https://10.0.0.10:6443", CAHash: strings.Replace(mustLoad(t).CAHash, "dec6", "0000", 1), BootstrapToken: "abcdef.0123456789abcdef",
		Files: map[string]string{"/usr/bin/x": "y"}}); err == nil || !strings.Contains(err.Error(), "/usr/bin/x") {
		t.Errorf("a file outside /etc and /var: %v", err)
	}
}

// TestLoadIsStrict: a misspelt setting is an error naming the file and the
// line, not a silently empty field.
func TestLoadIsStrict(t *testing.T) {
	p := filepath.Join(t.TempDir(), "pool.yaml")
	if err := os.WriteFile(p, []byte("server: https://10.0.0.10:6443\nbootstrapTokn: abcdef.0123456789abcdef\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p)
	if err == nil || !strings.HasPrefix(err.Error(), p+": ") || !strings.Contains(err.Error(), "line 2: field bootstrapTokn not found") {
		t.Errorf("got %v", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "none.yaml")); err == nil {
		t.Error("a missing file loads")
	}
}

func mustLoad(t *testing.T) *Spec {
	t.Helper()
	s, err := Load(samplePool)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRenderKubeletConfig: a pool's kubeletConfig becomes the node file's
// kubelet.config, and one the node's policy refuses is refused here.
func TestRenderKubeletConfig(t *testing.T) {
	s := mustLoad(t)
	s.KubeletConfig = map[string]any{"evictionSoft": map[string]any{"memory.available": "1Gi"},
		"evictionSoftGracePeriod": map[string]any{"memory.available": "10m"}}
	out, err := Render(s)
	if err != nil {
		t.Fatal(err)
	}
	_, _, content := decode(t, out)
	c, err := nodeconfig.Parse(content[agent.NodeFile], "node.yaml")
	if err != nil {
		t.Fatalf("the node refuses the rendered node file: %v\n%s", err, content[agent.NodeFile])
	}
	if want := `{"evictionSoft":{"memory.available":"1Gi"},"evictionSoftGracePeriod":{"memory.available":"10m"}}`; string(c.Kubelet.Config) != want {
		t.Errorf("kubelet.config %s, want %s", c.Kubelet.Config, want)
	}
	s.KubeletConfig = map[string]any{"authentication": map[string]any{"anonymous": map[string]any{"enabled": true}}}
	if _, err := Render(s); err == nil || !strings.Contains(err.Error(), "kubelet.config.authentication.anonymous.enabled") {
		t.Errorf("anonymous auth: %v", err)
	}
}

// TestNodeFileACR: the spec's acr becomes the node file's registries.acr,
// and a spec without it leaves the section out (the image's default).
func TestNodeFileACR(t *testing.T) {
	s := &Spec{Server: "https://10.0.0.10:6443", CAHash: "sha256:" + strings.Repeat("ab", 32), BootstrapToken: "abcdef.0123456789abcdef",
		ACR: &ACR{Regions: []string{"cn-shanghai"}, APIEndpoint: "http://100.64.0.2:8081",
			Instances: []ACRInstance{{Domain: "100.64.0.2:5000", ID: "cri-harness1", Region: "cn-hangzhou"}}}}
	node, err := NodeFile(s)
	if err != nil {
		t.Fatal(err)
	}
	c, err := nodeconfig.Parse(node, "node.yaml")
	if err != nil {
		t.Fatalf("%v\n%s", err, node)
	}
	want := &nodeconfig.ACR{Regions: []string{"cn-shanghai"}, APIEndpoint: "http://100.64.0.2:8081",
		Instances: []nodeconfig.ACRInstance{{Domain: "100.64.0.2:5000", ID: "cri-harness1", Region: "cn-hangzhou"}}}
	if !reflect.DeepEqual(c.Registries.ACR, want) {
		t.Errorf("registries.acr %+v, want %+v\n%s", c.Registries.ACR, want, node)
	}
	s.ACR = nil
	node, _ = NodeFile(s)
	if strings.Contains(string(node), "registries") {
		t.Errorf("no acr in the spec, yet:\n%s", node)
	}
}
