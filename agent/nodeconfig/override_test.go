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
		{"struct given a scalar", []string{"    authentication: true"},
			[]string{`node.yaml:9: kubelet.config.authentication: must be a mapping, got the boolean true`}},
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
				`node.yaml:9: kubelet.config.kind: may not be overridden: drover writes apiVersion and kind itself; remove it`,
				`node.yaml:10: kubelet.config.clusterDomain: may not be overridden: set cluster.domain instead`,
				`node.yaml:11: kubelet.config.registerWithTaints: may not be overridden: set kubelet.taints instead`,
			}},
		{"a bad field stops the invariant check", []string{"    readOnlyPort: 10255", "    noSuchField: 1"},
			[]string{`node.yaml:10: kubelet.config.noSuchField: unknown field of KubeletConfiguration; see https://kubernetes.io/docs/reference/config-api/kubelet-config.v1beta1/`}},
		{"invariants at their lines, in table order", []string{"    tlsCertFile: /x", "    authorization:", "      mode: AlwaysAllow"},
			[]string{
				`node.yaml:11: kubelet.config.authorization.mode: may not be lowered: it must be Webhook (the API server's RBAC decides who may use the kubelet API; AlwaysAllow would let any authenticated caller exec into every pod); remove it from kubelet.config`,
				`node.yaml:9: kubelet.config.tlsCertFile: may not be lowered: it must be unset (a serving certificate named here would have to come with its private key in the user-data, which anything reaching the metadata service can read); remove it from kubelet.config`,
			}},
		{"null enabled is not false", []string{"    authentication:", "      anonymous:", "        enabled: null"},
			[]string{`node.yaml:11: kubelet.config.authentication.anonymous.enabled: may not be lowered: it must be false (anonymous requests to the kubelet API would reach pods' logs, exec and the node's metrics without credentials); remove it from kubelet.config`}},
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
	}
	if got := BrokenKubeletInvariants([]byte("kind: KubeletConfiguration\n")); !slices.Equal(got, want) {
		t.Errorf("BrokenKubeletInvariants(empty) = %q, want %q", got, want)
	}
	got := BrokenKubeletInvariants([]byte("readOnlyPort: [\n"))
	if len(got) != 1 || !strings.HasPrefix(got[0], "a readable KubeletConfiguration (") {
		t.Errorf("BrokenKubeletInvariants(bad YAML) = %q", got)
	}
}
