package nodeconfig

import (
	"strings"
	"testing"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

// TestKubeletInvariantsRefused: every way kubelet.config could lower the
// kubelet's security is refused at its line, naming the field.
func TestKubeletInvariantsRefused(t *testing.T) {
	for _, tc := range []struct {
		lines []string
		field string
		line  int
	}{
		{[]string{"    authentication:", "      anonymous:", "        enabled: true"}, "authentication.anonymous.enabled", 11},
		{[]string{"    authentication:", "      webhook:", "        enabled: false"}, "authentication.webhook.enabled", 11},
		{[]string{"    authentication:", "      x509:", "        clientCAFile: /var/lib/app/ca.crt"}, "authentication.x509.clientCAFile", 11},
		{[]string{"    authorization:", "      mode: AlwaysAllow"}, "authorization.mode", 10},
		{[]string{"    readOnlyPort: 10255"}, "readOnlyPort", 9},
		{[]string{"    healthzBindAddress: 0.0.0.0"}, "healthzBindAddress", 9},
		{[]string{"    healthzBindAddress: node.example"}, "healthzBindAddress", 9},
		{[]string{"    protectKernelDefaults: false"}, "protectKernelDefaults", 9},
		{[]string{"    rotateCertificates: false"}, "rotateCertificates", 9},
		{[]string{"    serverTLSBootstrap: true"}, "serverTLSBootstrap", 9},
		{[]string{"    tlsCertFile: /etc/app/kubelet.crt"}, "tlsCertFile", 9},
		{[]string{"    tlsPrivateKeyFile: /etc/app/kubelet.key"}, "tlsPrivateKeyFile", 9},
	} {
		in := with(append([]string{"kubelet:", "  config:"}, tc.lines...)...)
		ps := Validate([]byte(in), "node.yaml")
		if len(ps) != 1 {
			t.Errorf("%s: %d problems %v", tc.field, len(ps), ps)
			continue
		}
		p := ps[0]
		if p.Path != "kubelet.config."+tc.field || p.Line != tc.line || !strings.Contains(p.Message, "may not be lowered: it must be ") || !strings.Contains(p.Message, "remove it from kubelet.config") {
			t.Errorf("%s: %s", tc.field, p)
		}
	}
}

// TestKubeletInvariantsSameValueAccepted: restating drover's value (or
// another loopback address) is not lowering it.
func TestKubeletInvariantsSameValueAccepted(t *testing.T) {
	in := with("kubelet:", "  config:",
		"    authentication:", "      anonymous:", "        enabled: false", "      webhook:", "        enabled: true",
		"    authorization:", "      mode: Webhook",
		"    readOnlyPort: 0", "    healthzBindAddress: \"::1\"", "    protectKernelDefaults: true", "    rotateCertificates: true")
	if ps := Validate([]byte(in), "node.yaml"); len(ps) != 0 {
		t.Fatalf("problems: %v", ps)
	}
}

// TestKubeletConfigHoldsInvariants: the rendered configuration has every
// invariant, and one broken by hand is refused at render time too.
func TestKubeletConfigHoldsInvariants(t *testing.T) {
	c := load(t, "full")
	out, err := KubeletConfig(c, facts)
	if err != nil {
		t.Fatal(err)
	}
	var kc kubeletv1beta1.KubeletConfiguration
	if err := yaml.Unmarshal(out, &kc); err != nil {
		t.Fatal(err)
	}
	if broken := brokenInvariants(&kc); len(broken) != 0 {
		t.Errorf("rendered configuration breaks %s", broken[0].field)
	}
	c.Kubelet.Config = []byte(`{"readOnlyPort": 10255}`)
	if _, err := KubeletConfig(c, facts); err == nil || !strings.Contains(err.Error(), "kubelet.config.readOnlyPort may not be lowered") {
		t.Errorf("hand-built override: %v", err)
	}
}

// TestRenderDeclaredPaths: Render writes only the paths its table
// declares (the policy protects exactly those), with the declared modes.
func TestRenderDeclaredPaths(t *testing.T) {
	c := load(t, "full")
	files, err := Render(c, facts, "", true)
	if err != nil {
		t.Fatal(err)
	}
	ctrd, err := RenderContainerd(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasPrefix(f.Path, "/etc/containerd/") {
			t.Errorf("Render gives containerd's %s; RenderContainerd does", f.Path)
		}
	}
	files = append(files, ctrd...)
	seen := map[string]bool{}
	for _, f := range files {
		seen[f.Path] = true
		if f.Path == BootstrapKubeconfigPath && f.Mode != 0o600 {
			t.Errorf("%s mode %v", f.Path, f.Mode)
		}
	}
	for _, p := range []string{ContainerdConfigPath, KubeletConfigPath, KubeletDefaultsPath, CAFile, BootstrapKubeconfigPath} {
		if !seen[p] {
			t.Errorf("%s not rendered", p)
		}
	}
	later, err := Render(c, facts, "", false)
	if err != nil || len(later)+len(ctrd) != len(files)-1 {
		t.Errorf("without bootstrap: %d files (%v), want %d", len(later), err, len(files)-len(ctrd)-1)
	}
}
