package nodeconfig

import (
	"slices"
	"strings"
	"testing"
)

func paths(files []File) []string {
	var out []string
	for _, f := range files {
		out = append(out, f.Path)
	}
	return out
}

// TestRenderSplit: Render gives the kubelet's files (the bootstrap
// kubeconfig only when asked), RenderContainerd containerd's, each sorted.
func TestRenderSplit(t *testing.T) {
	c := load(t, "full")
	kubelet := []string{CAFile, KubeletConfigPath, KubeletDefaultsPath, TimesyncdDropIn}
	slices.Sort(kubelet)
	withBootstrap := append([]string{BootstrapKubeconfigPath}, kubelet...)
	slices.Sort(withBootstrap)
	for _, tc := range []struct {
		bootstrap bool
		want      []string
	}{{false, kubelet}, {true, withBootstrap}} {
		files, err := Render(c, facts, "", tc.bootstrap)
		if err != nil {
			t.Fatal(err)
		}
		if got := paths(files); !slices.Equal(got, tc.want) {
			t.Errorf("Render(bootstrap %v) = %q, want %q", tc.bootstrap, got, tc.want)
		}
	}
	files, err := RenderContainerd(c)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/etc/containerd/certs.d/docker.io/hosts.toml", "/etc/containerd/certs.d/registry.k8s.io/hosts.toml", ContainerdConfigPath}
	if got := paths(files); !slices.Equal(got, want) {
		t.Errorf("RenderContainerd = %q, want %q", got, want)
	}
	for _, f := range files {
		if f.Mode != 0o644 {
			t.Errorf("%s: mode %v", f.Path, f.Mode)
		}
	}
}

// TestRenderKubeletDefaults: the flags file is what kubelet.service reads.
func TestRenderKubeletDefaults(t *testing.T) {
	files, err := Render(load(t, "full"), facts, "10.1.2.3", false)
	if err != nil {
		t.Fatal(err)
	}
	want := `KUBELET_ARGS="--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --cert-dir=/var/lib/kubelet/pki ` +
		`--config=/etc/kubernetes/kubelet-config.yaml --hostname-override=izbp1abcdefghijklmnopz --kubeconfig=/var/lib/kubelet/kubeconfig ` +
		`--node-ip=10.1.2.3 --node-labels=example.com/pool=workers,node.kubernetes.io/exclude-from-external-load-balancers=true,` +
		`node.kubernetes.io/instance-type=ecs.g7.xlarge,topology.kubernetes.io/region=cn-hangzhou,topology.kubernetes.io/zone=cn-hangzhou-h"` + "\n"
	i := slices.IndexFunc(files, func(f File) bool { return f.Path == KubeletDefaultsPath })
	if i < 0 {
		t.Fatalf("no %s in %q", KubeletDefaultsPath, paths(files))
	}
	if got := string(files[i].Data); got != want {
		t.Errorf("%s =\n%s\nwant\n%s", KubeletDefaultsPath, got, want)
	}
}

// TestRenderErrors: what cannot be rendered stops Render with the file's
// reason, and a renderer giving a path outside its declared one is refused.
func TestRenderErrors(t *testing.T) {
	c := load(t, "minimal")
	if _, err := Render(c, facts, "", false); err == nil || err.Error() != "rendering /etc/kubernetes/pki/ca.crt: the cluster CA is not known yet (discover it first)" {
		t.Errorf("Render without the CA: %v", err)
	}
	c.Cluster.CAData = "(the discovered CA)"
	if _, err := Render(c, Facts{RegionID: "r"}, "", false); err == nil || !strings.Contains(err.Error(), "instance-id is empty") {
		t.Errorf("Render with bad facts: %v", err)
	}
	c.Containerd.Mirrors = map[string][]string{"a/b": {"https://m.example.com"}}
	want := "rendering /etc/containerd/certs.d/a/b/hosts.toml: the path is not /etc/containerd/certs.d/*/hosts.toml, the one the renderer declares"
	if _, err := RenderContainerd(c); err == nil || err.Error() != want {
		t.Errorf("RenderContainerd with a registry holding a slash: %v, want %s", err, want)
	}
}

func TestRenderedFilesTable(t *testing.T) {
	a := RenderedFiles()
	a[0].Path = "changed"
	if RenderedFiles()[0].Path == "changed" {
		t.Error("RenderedFiles gives the package's own table")
	}
	var got []string
	for _, r := range RenderedFiles() {
		got = append(got, r.Path)
	}
	want := []string{ContainerdConfigPath, "/etc/containerd/certs.d/*/hosts.toml", KubeletConfigPath, KubeletDefaultsPath, CredentialProviderConfigPath, CAFile, TimesyncdDropIn, BootstrapKubeconfigPath}
	if !slices.Equal(got, want) {
		t.Errorf("RenderedFiles paths = %q, want %q", got, want)
	}
	if got := KubeletCredentials(); !slices.Equal(got, []string{KubeconfigPath, CertDir}) {
		t.Errorf("KubeletCredentials = %q", got)
	}
}

// TestHostsTomlContent: mirrors in the node file's order, trailing slash
// dropped, the registry itself as the server.
func TestHostsTomlContent(t *testing.T) {
	c := &Config{Containerd: Containerd{Mirrors: map[string][]string{
		"registry.example.com:5000": {"https://b.example.com/", "http://a.example.com:80"},
		"docker.io":                 {"https://m.example.com"},
	}}}
	hosts := HostsToml(c)
	if len(hosts) != 2 {
		t.Fatalf("HostsToml gave %d files", len(hosts))
	}
	want := "# Rendered by drover from /etc/drover/node.yaml.\n" +
		"server = \"https://registry.example.com:5000\"\n" +
		"\n[host.\"https://b.example.com\"]\n  capabilities = [\"pull\", \"resolve\"]\n" +
		"\n[host.\"http://a.example.com:80\"]\n  capabilities = [\"pull\", \"resolve\"]\n"
	if got := string(hosts["/etc/containerd/certs.d/registry.example.com:5000/hosts.toml"]); got != want {
		t.Errorf("hosts.toml =\n%s\nwant\n%s", got, want)
	}
	if got := string(hosts["/etc/containerd/certs.d/docker.io/hosts.toml"]); !strings.Contains(got, "server = \"https://registry-1.docker.io\"\n") {
		t.Errorf("docker.io hosts.toml =\n%s", got)
	}
}

// TestTomlStringControlCharacters: control characters are escaped, the
// printable characters next to them are not.
func TestTomlStringControlCharacters(t *testing.T) {
	for in, want := range map[string]string{
		" ~":      `" ~"`,
		"\x1f":    `"\u001F"`,
		"\x7f":    `"\u007F"`,
		"\x00\t":  `"\u0000\u0009"`,
		"é\u0080": "\"é\u0080\"",
	} {
		if got := tomlString(in); got != want {
			t.Errorf("tomlString(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestTaintString(t *testing.T) {
	for _, tc := range []struct {
		t    Taint
		want string
	}{
		{Taint{Key: "a", Value: "b", Effect: "NoSchedule"}, "a=b:NoSchedule"},
		{Taint{Key: "example.com/gpu", Effect: "NoExecute"}, "example.com/gpu:NoExecute"},
	} {
		if got := tc.t.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
}

func TestTokenSecret(t *testing.T) {
	for token, want := range map[string]string{
		"abcdef.0123456789abcdef": "0123456789abcdef",
		"abcdef.redacted":         "",
		"abcdef":                  "",
		"":                        "",
	} {
		if got := TokenSecret(token); got != want {
			t.Errorf("TokenSecret(%q) = %q, want %q", token, got, want)
		}
	}
	if (Cluster{BootstrapToken: "abcdef.0123456789abcdef"}).Redacted() || !(Cluster{BootstrapToken: "abcdef.redacted"}).Redacted() {
		t.Error("Redacted")
	}
}

func TestErrorListsEveryProblem(t *testing.T) {
	_, err := Parse([]byte("kind: x\n"), "n.yaml")
	e, ok := err.(*Error)
	if !ok || len(e.Problems) != 3 {
		t.Fatalf("Parse error = %#v, want an *Error with 3 problems", err)
	}
	addr, msg := e.Problems[1].Split()
	if addr != "n.yaml:1" || msg != `kind: must be NodeConfig, got "x"` {
		t.Errorf("Split = %q, %q", addr, msg)
	}
	if !strings.HasPrefix(e.Error(), "n.yaml:1: apiVersion: required") || strings.Count(e.Error(), "\n") != 2 {
		t.Errorf("Error() = %q", e.Error())
	}
	if c, err := ParseJoined([]byte(with()), "n.yaml"); err != nil || c.Cluster.BootstrapToken != "abcdef.0123456789abcdef" {
		t.Errorf("ParseJoined(valid) = %+v, %v", c, err)
	}
	if ps := ValidateJoined([]byte(with()), "n.yaml"); len(ps) != 0 {
		t.Errorf("ValidateJoined(valid) = %v", ps)
	}
	if ps := ValidateJoined([]byte("kind: x\n"), "n.yaml"); len(ps) != 3 {
		t.Errorf("ValidateJoined = %v", ps)
	}
}

func TestTimesyncdConfigExact(t *testing.T) {
	got := string(TimesyncdConfig(Facts{NTPServers: []string{"a", "b"}}))
	want := "# Rendered by drover-agent from the instance metadata (ntp-conf/ntp-servers); see docs/agent.md.\n[Time]\nNTP=a b\n"
	if got != want {
		t.Errorf("TimesyncdConfig =\n%s\nwant\n%s", got, want)
	}
}
