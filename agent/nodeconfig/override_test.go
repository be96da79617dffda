package nodeconfig

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestKubeletOverrideProblems: kubelet.config is checked against the
// kubelet's type field by field, each problem at its own line and path.
func TestKubeletOverrideProblems(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lines []string
		want  []string
	}{
		{"field name not a string", []string{"    1: x"},
			[]string{`node.yaml:9: kubelet.config: field names must be strings, got the integer 1`}},
		{"field set twice", []string{"    serializeImagePulls: false", "    serializeImagePulls: true"},
			[]string{`node.yaml:10: kubelet.config.serializeImagePulls: set twice (first on line 9); keep one`}},
		{"struct given a scalar", []string{"    logging: true"},
			[]string{`node.yaml:9: kubelet.config.logging: must be a mapping, got the boolean true`}},
		{"embedded type's name", []string{"    TypeMeta: {}"},
			[]string{`node.yaml:9: kubelet.config.TypeMeta: unknown field of KubeletConfiguration; see https://kubernetes.io/docs/reference/config-api/kubelet-config.v1beta1/`}},
		{"map key not a string, at the key's line", []string{"    evictionHard:", "      memory.available: 5%", "      1: 5%"},
			[]string{`node.yaml:11: kubelet.config.evictionHard: keys must be strings, got the integer 1`}},
		{"map value of the wrong type", []string{"    evictionHard:", "      memory.available: 5"},
			[]string{`node.yaml:10: kubelet.config.evictionHard: wrong type: got a JSON number, want string`}},
		{"list item field of the wrong type", []string{"    reservedMemory:", "      - numaNode: x"},
			[]string{`node.yaml:10: kubelet.config.reservedMemory: wrong type at numaNode: got a JSON string, want int32`}},
		{"list item of the wrong type", []string{"    allowedUnsafeSysctls: [1]"},
			[]string{`node.yaml:9: kubelet.config.allowedUnsafeSysctls: wrong type: got a JSON number, want string`}},
		{"list item not a value", []string{"    allowedUnsafeSysctls: [&a net.x, *a]"},
			[]string{`node.yaml:9: kubelet.config.allowedUnsafeSysctls: must be a value, got an alias (YAML aliases are not supported: write the value out)`}},
		{"timestamp", []string{"    containerLogMaxSize: 2001-12-14"},
			[]string{`node.yaml:9: kubelet.config.containerLogMaxSize: unsupported YAML tag !!timestamp; use a string, number, boolean, list or mapping`}},
		{"integer tag on a word", []string{"    maxOpenFiles: !!int many"},
			[]string{"node.yaml:9: kubelet.config.maxOpenFiles: yaml: cannot decode !!str `many` as a !!int"}},
		{"owned fields, each at its line", []string{"    kind: X", "    clusterDomain: a", "    registerWithTaints: []", "    1: x"},
			[]string{
				`node.yaml:9: kubelet.config.kind: set by drover (the document's type); drover writes apiVersion and kind itself; remove it`,
				`node.yaml:10: kubelet.config.clusterDomain: set by drover (the cluster's DNS domain); set cluster.domain instead`,
				`node.yaml:11: kubelet.config.registerWithTaints: set by drover (the node's taints at registration); set kubelet.taints instead`,
			}},
		{"drover fields and unknown ones, each at its line", []string{"    readOnlyPort: 10255", "    noSuchField: 1"},
			[]string{`node.yaml:9: kubelet.config.readOnlyPort: set by drover (the read-only port (10255) serves pods and node metrics with no authentication at all); read metrics through the authenticated port 10250`}},
		{"drover fields at their lines, in document order", []string{"    tlsCertFile: /x", "    authorization:", "      mode: AlwaysAllow"},
			[]string{
				`node.yaml:9: kubelet.config.tlsCertFile: set by drover (a serving certificate named here comes with its key in the user-data, which anything reaching the metadata service can read); keep the kubelet's self-signed serving certificate`,
				`node.yaml:11: kubelet.config.authorization.mode: set by drover (what the kubelet API lets a caller do: AlwaysAllow gives exec into every pod to any authenticated caller; the webhook cache TTLs keep a removed RBAC binding working); remove it; the API server's RBAC decides (mode Webhook)`,
			}},
		{"null is setting it", []string{"    authentication:", "      anonymous:", "        enabled: null"},
			[]string{`node.yaml:11: kubelet.config.authentication.anonymous.enabled: set by drover (who the kubelet API accepts: anonymous callers, client certificates of which CA, bearer tokens and how long a revoked token stays cached (webhook cacheTTL)); remove it; drover turns anonymous off, webhook on and pins the cluster CA`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := with(append([]string{"kubelet:", "  config:"}, tc.lines...)...)
			var got []string
			for _, p := range Validate([]byte(in), "node.yaml") {
				got = append(got, p.String())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Validate:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestKubeletOverrideValues: accepted overrides arrive in the Config as the
// JSON encoding/json would make of the same document.
func TestKubeletOverrideValues(t *testing.T) {
	c, err := Parse([]byte(with("kubelet:", "  config:",
		"    allowedUnsafeSysctls: [net.core.somaxconn, \"kernel.msg*\"]",
		"    evictionHard: {memory.available: 5%}",
		"    maxOpenFiles: 1000",
		"    cpuCFSQuota: false",
		"    podPidsLimit: 0x10",
		"    cpuManagerPolicy: ~")), "node.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"allowedUnsafeSysctls":["net.core.somaxconn","kernel.msg*"],"cpuCFSQuota":false,"cpuManagerPolicy":null,"evictionHard":{"memory.available":"5%"},"maxOpenFiles":1000,"podPidsLimit":16}`
	if string(c.Kubelet.Config) != want {
		t.Errorf("Config =\n%s\nwant\n%s", c.Kubelet.Config, want)
	}
}

// TestJSONFields follows encoding/json's rules for field names.
func TestJSONFields(t *testing.T) {
	type Inner struct {
		Deep string `json:"deep"`
	}
	type Embedded struct {
		Up int `json:"up"`
	}
	type s struct {
		Embedded
		Inline  Inner  `json:",inline"`
		Named   Inner  `json:"named"`
		Skipped string `json:"-"`
		private string
		Plain   bool
		Opt     int `json:"opt,omitempty"`
	}
	got := slices.Sorted(func(yield func(string) bool) {
		for k := range jsonFields(reflect.TypeFor[s]()) {
			if !yield(k) {
				return
			}
		}
	})
	if want := []string{"Plain", "deep", "named", "opt", "up"}; !slices.Equal(got, want) {
		t.Errorf("jsonFields = %q, want %q", got, want)
	}
	f := jsonFields(kubeletConfType)
	for _, name := range []string{"apiVersion", "kind", "evictionHard", "authentication", "readOnlyPort"} {
		if _, ok := f[name]; !ok {
			t.Errorf("KubeletConfiguration field %s missing", name)
		}
	}
	if _, ok := f["TypeMeta"]; ok {
		t.Error("TypeMeta is inlined, not a field")
	}
}

// TestBrokenKubeletInvariants checks a KubeletConfiguration as the running
// kubelet loaded it.
func TestBrokenKubeletInvariants(t *testing.T) {
	c := load(t, "full")
	out, err := KubeletConfig(c, facts)
	if err != nil {
		t.Fatal(err)
	}
	if got := BrokenKubeletInvariants(out); len(got) != 0 {
		t.Errorf("rendered config breaks %q", got)
	}
	// readOnlyPort 0 is left out of the rendered file (omitempty).
	lowered := strings.Replace(string(out), "healthzBindAddress: 127.0.0.1", "healthzBindAddress: 0.0.0.0", 1) + "readOnlyPort: 10255\n"
	if !strings.Contains(lowered, "0.0.0.0") {
		t.Fatalf("rendered config has no healthzBindAddress to change:\n%s", out)
	}
	if got, want := BrokenKubeletInvariants([]byte(lowered)), []string{"readOnlyPort = 0", "healthzBindAddress = a loopback address (127.0.0.1 or ::1)"}; !slices.Equal(got, want) {
		t.Errorf("BrokenKubeletInvariants(lowered) = %q, want %q", got, want)
	}
	want := []string{
		"authentication.anonymous.enabled = false",
		"authentication.webhook.enabled = true",
		"authentication.x509.clientCAFile = /etc/kubernetes/pki/ca.crt",
		"authorization.mode = Webhook",
		"healthzBindAddress = a loopback address (127.0.0.1 or ::1)",
		"protectKernelDefaults = true",
		"rotateCertificates = true",
		"tlsCipherSuites = drover's ECDHE AES-GCM and ChaCha20 suites (" + strings.Join(KubeletCipherSuites, ",") + ")",
	}
	if got := BrokenKubeletInvariants([]byte("kind: KubeletConfiguration\n")); !slices.Equal(got, want) {
		t.Errorf("BrokenKubeletInvariants(empty) = %q, want %q", got, want)
	}
	got := BrokenKubeletInvariants([]byte("readOnlyPort: [\n"))
	if len(got) != 1 || !strings.HasPrefix(got[0], "a readable KubeletConfiguration (") {
		t.Errorf("BrokenKubeletInvariants(bad YAML) = %q", got)
	}
}
