package nodeconfig

import (
	"slices"
	"strings"
	"testing"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

// TestKubeletInvariantsRefused: every way kubelet.config could lower the
// kubelet's security (the cases of earlier reviews) is refused at the
// line of its top-level field, naming it: the field is drover's.
func TestKubeletInvariantsRefused(t *testing.T) {
	for _, tc := range []struct {
		lines []string
		field string
	}{
		{[]string{"    authentication:", "      anonymous:", "        enabled: true"}, "authentication"},
		{[]string{"    authentication:", "      webhook:", "        enabled: false"}, "authentication"},
		{[]string{"    authentication:", "      webhook:", "        cacheTTL: 24h"}, "authentication"},
		{[]string{"    authentication:", "      x509:", "        clientCAFile: /var/lib/app/ca.crt"}, "authentication"},
		{[]string{"    authorization:", "      mode: AlwaysAllow"}, "authorization"},
		{[]string{"    authorization:", "      webhook:", "        cacheAuthorizedTTL: 24h"}, "authorization"},
		{[]string{"    readOnlyPort: 10255"}, "readOnlyPort"},
		{[]string{"    healthzBindAddress: 0.0.0.0"}, "healthzBindAddress"},
		{[]string{"    healthzBindAddress: node.example"}, "healthzBindAddress"},
		{[]string{"    protectKernelDefaults: false"}, "protectKernelDefaults"},
		{[]string{"    rotateCertificates: false"}, "rotateCertificates"},
		{[]string{"    serverTLSBootstrap: true"}, "serverTLSBootstrap"},
		{[]string{"    tlsCertFile: /etc/app/kubelet.crt"}, "tlsCertFile"},
		{[]string{"    tlsPrivateKeyFile: /etc/app/kubelet.key"}, "tlsPrivateKeyFile"},
		{[]string{"    tlsMinVersion: VersionTLS10"}, "tlsMinVersion"},
		{[]string{"    staticPodPath: /etc/kubernetes/manifests"}, "staticPodPath"},
		{[]string{"    staticPodURL: http://10.0.0.1/pods"}, "staticPodURL"},
		{[]string{"    featureGates: {KubeletFineGrainedAuthz: false}"}, "featureGates"},
		{[]string{"    volumePluginDir: /var/lib/app/plugins"}, "volumePluginDir"},
		{[]string{"    containerRuntimeEndpoint: unix:///run/other.sock"}, "containerRuntimeEndpoint"},
	} {
		in := with(append([]string{"kubelet:", "  config:"}, tc.lines...)...)
		ps := Validate([]byte(in), "node.yaml")
		if len(ps) != 1 {
			t.Errorf("%s: %d problems %v", tc.field, len(ps), ps)
			continue
		}
		p := ps[0]
		leaf := strings.TrimSpace(tc.lines[len(tc.lines)-1])
		leaf, _, _ = strings.Cut(strings.TrimPrefix(leaf, "featureGates: {"), ":")
		if !strings.HasPrefix(p.Path, "kubelet.config."+tc.field) || !strings.HasSuffix(p.Path, leaf) || p.Line != 8+len(tc.lines) || !strings.HasPrefix(p.Message, "set by drover (") {
			t.Errorf("%s: %s", tc.field, p)
		}
	}
}

// TestKubeletInvariantsSameValueRefused: restating drover's value is
// refused too: one way to say each thing, and drover's value may change.
func TestKubeletInvariantsSameValueRefused(t *testing.T) {
	in := with("kubelet:", "  config:",
		"    authentication:", "      anonymous:", "        enabled: false",
		"    readOnlyPort: 0", "    rotateCertificates: true")
	var got []string
	for _, p := range Validate([]byte(in), "node.yaml") {
		got = append(got, p.Path)
	}
	if want := []string{"kubelet.config.authentication.anonymous.enabled", "kubelet.config.readOnlyPort", "kubelet.config.rotateCertificates"}; !slices.Equal(got, want) {
		t.Errorf("problems at %q, want %q", got, want)
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
	if _, err := KubeletConfig(c, facts); err == nil || !strings.Contains(err.Error(), "kubelet.config.readOnlyPort: set by drover") {
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
