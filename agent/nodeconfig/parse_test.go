package nodeconfig

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

const pin = "sha256:dec63347a7bc76807648a5c52b199e99bd5602f62e6177654221c989d81386f8"

// doc joins lines into a document, so each case can state line numbers.
func doc(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

// head is lines 1-3 of every case document.
var head = []string{"apiVersion: drover.dev/v1alpha1", "kind: NodeConfig", "cluster:"}

// good is a valid cluster section, lines 4-6.
var good = []string{
	"  server: https://10.0.2.2:6443",
	"  caHash: " + pin,
	"  bootstrapToken: abcdef.0123456789abcdef",
}

func with(extra ...string) string {
	lines := append(append(append([]string{}, head...), good...), extra...)
	return doc(lines...)
}

func clusterWith(fields ...string) string {
	return doc(append(append([]string{}, head...), fields...)...)
}

func TestValidateProblems(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []string
	}{
		{"missing server", clusterWith(good[1], good[2]),
			[]string{`node.yaml:3: cluster.server: required: the API server's https URL, e.g. https://10.0.0.1:6443`}},
		{"http server", clusterWith("  server: http://10.0.2.2:6443", good[1], good[2]),
			[]string{`node.yaml:4: cluster.server: must be an https URL (the kubelet checks the API server against the cluster CA), got "http://10.0.2.2:6443"`}},
		{"server without host", clusterWith("  server: https:///api", good[1], good[2]),
			[]string{`node.yaml:4: cluster.server: must name a host, e.g. https://10.0.0.1:6443`}},
		{"server with credentials", clusterWith("  server: https://admin:pw@10.0.2.2:6443", good[1], good[2]),
			[]string{`node.yaml:4: cluster.server: must not carry credentials; the bootstrap token authenticates the node`}},
		{"bad token", clusterWith(good[0], good[1], "  bootstrapToken: ABCDEF.0123456789abcdef"),
			[]string{`node.yaml:6: cluster.bootstrapToken: must match [a-z0-9]{6}.[a-z0-9]{16} (create one with kubeadm token create)`}},
		{"missing token", clusterWith(good[0], good[1]),
			[]string{`node.yaml:3: cluster.bootstrapToken: required: a bootstrap token <id>.<secret> (kubeadm token create)`}},
		{"both CA", clusterWith(good[0], "  caData: |", "    x", good[1], good[2]),
			[]string{
				`node.yaml:7: cluster: caData and caHash are mutually exclusive; keep one`,
				`node.yaml:5: cluster.caData: must hold the cluster CA as PEM (-----BEGIN CERTIFICATE-----), e.g. the contents of /etc/kubernetes/pki/ca.crt`,
			}},
		{"neither CA", clusterWith(good[0], good[2]),
			[]string{`node.yaml:3: cluster: one of caData (the cluster CA certificate as PEM) or caHash (its sha256:<spki> pin) is required`}},
		{"bad PEM", clusterWith(good[0], "  caData: not a certificate", good[2]),
			[]string{`node.yaml:5: cluster.caData: must hold the cluster CA as PEM (-----BEGIN CERTIFICATE-----), e.g. the contents of /etc/kubernetes/pki/ca.crt`}},
		{"PEM key instead of certificate", clusterWith(good[0], "  caData: |", "    -----BEGIN PRIVATE KEY-----", "    AAAA", "    -----END PRIVATE KEY-----", good[2]),
			[]string{`node.yaml:5: cluster.caData: PEM block 1 is a PRIVATE KEY; only the CA's CERTIFICATE blocks belong here`}},
		{"bad CA hash", clusterWith(good[0], "  caHash: sha1:abcd", good[2]),
			[]string{`node.yaml:5: cluster.caHash: must be sha256:<64 hex digits>, the SHA-256 of the CA certificate's public key info (kubeadm's --discovery-token-ca-cert-hash)`}},
		{"bad DNS IP", with("  dns: [10.96.0.10, not-an-ip]"),
			[]string{`node.yaml:7: cluster.dns[1]: must be an IP address, got "not-an-ip"`}},
		{"empty DNS", with("  dns: []"),
			[]string{`node.yaml:7: cluster.dns: must list at least one IP; leave the field out for 10.96.0.10`}},
		{"bad domain", with("  domain: Cluster.Local"),
			[]string{`node.yaml:7: cluster.domain: must be a lower-case DNS domain such as cluster.local, got "Cluster.Local"`}},
		{"bad label key", with("kubelet:", "  labels:", "    -bad-: x"),
			[]string{`node.yaml:9: kubelet.labels["-bad-"]: invalid key "-bad-": the name must be 1-63 characters of letters, digits, '-', '_' and '.', starting and ending with a letter or digit`}},
		{"bad label prefix", with("kubelet:", "  labels:", "    Example.com/x: y"),
			[]string{`node.yaml:9: kubelet.labels["Example.com/x"]: invalid key "Example.com/x": the prefix before / must be a lower-case DNS subdomain (example.com/role)`}},
		{"bad label value", with("kubelet:", "  labels:", "    pool: -x-"),
			[]string{`node.yaml:9: kubelet.labels["pool"]: invalid value "-x-": at most 63 characters of letters, digits, '-', '_' and '.', starting and ending with a letter or digit`}},
		{"reserved label override", with("kubelet:", "  labels:", "    topology.kubernetes.io/zone: cn-hangzhou-k"),
			[]string{`node.yaml:9: kubelet.labels["topology.kubernetes.io/zone"]: reserved: drover sets this label from the ECS instance metadata; remove it`}},
		{"label the kubelet refuses", with("kubelet:", "  labels:", "    node-role.kubernetes.io/worker: \"\""),
			[]string{`node.yaml:9: kubelet.labels["node-role.kubernetes.io/worker"]: the kubelet may not set labels under node-role.kubernetes.io/ (only under node.kubernetes.io/, kubelet.kubernetes.io/ and a few well-known keys); use your own prefix or label the Node from the control plane`}},
		{"label value not a string", with("kubelet:", "  labels:", "    gpu: true"),
			[]string{`node.yaml:9: kubelet.labels["gpu"]: must be a string, got the boolean true (quote it: "true")`}},
		{"bad taint effect", with("kubelet:", "  taints:", "    - a=b:NoSchedule", "    - a=b:Never"),
			[]string{`node.yaml:10: kubelet.taints[1]: invalid taint effect "Never"; use NoSchedule, PreferNoSchedule or NoExecute`}},
		{"taint without effect", with("kubelet:", "  taints: [dedicated]"),
			[]string{`node.yaml:8: kubelet.taints[0]: must be key[=value]:effect, got "dedicated"`}},
		{"bad taint key", with("kubelet:", "  taints: [\"a b:NoSchedule\"]"),
			[]string{`node.yaml:8: kubelet.taints[0]: taint invalid key "a b": the name must be 1-63 characters of letters, digits, '-', '_' and '.', starting and ending with a letter or digit`}},
		{"duplicate taint", with("kubelet:", "  taints: [a=b:NoSchedule, a=c:NoSchedule]"),
			[]string{`node.yaml:8: kubelet.taints[1]: taint a:NoSchedule is listed twice; keep one`}},
		{"unknown top-level field", with("kublet:", "  maxPods: 10"),
			[]string{`node.yaml:7: kublet: unknown field; known fields here are apiVersion, kind, cluster, kubelet, containerd, registries, storage`}},
		{"empty field name", with(`"": 1`),
			[]string{`node.yaml:7: [""]: unknown field; known fields here are apiVersion, kind, cluster, kubelet, containerd, registries, storage`}},
		{"dotted field name", with("  \"caData.x\": y"),
			[]string{`node.yaml:7: cluster["caData.x"]: unknown field; known fields here are server, caData, caHash, bootstrapToken, dns, domain`}},
		{"unknown nested field", with("  caDta: x"),
			[]string{`node.yaml:7: cluster.caDta: unknown field; known fields here are server, caData, caHash, bootstrapToken, dns, domain`}},
		{"duplicate field", with("  server: https://10.0.2.3:6443"),
			[]string{`node.yaml:7: cluster.server: set twice (first on line 4); keep one`}},
		{"wrong type integer", with("kubelet:", "  maxPods: many"),
			[]string{`node.yaml:8: kubelet.maxPods: must be an integer, got the string "many"`}},
		{"maxPods out of range", with("kubelet:", "  maxPods: 0"),
			[]string{`node.yaml:8: kubelet.maxPods: must be an integer from 1 to 2147483647, got 0`}},
		{"wrong type mapping", with("kubelet: [a, b]"),
			[]string{`node.yaml:7: kubelet: must be a mapping, got a list`}},
		{"wrong type list", with("  dns: 10.96.0.10"),
			[]string{`node.yaml:7: cluster.dns: must be a list, got the string "10.96.0.10"`}},
		{"wrong type string", clusterWith("  server: 6443", good[1], good[2]),
			[]string{`node.yaml:4: cluster.server: must be a string, got the integer 6443 (quote it: "6443")`}},
		{"bad override field", with("kubelet:", "  config:", "    logging:", "      fromat: json"),
			[]string{`node.yaml:10: kubelet.config.logging.fromat: unknown field of LoggingConfiguration; see https://kubernetes.io/docs/reference/config-api/kubelet-config.v1beta1/`}},
		{"override field case matters", with("kubelet:", "  config:", "    MaxPods: 10"),
			[]string{`node.yaml:9: kubelet.config.MaxPods: unknown field of KubeletConfiguration; see https://kubernetes.io/docs/reference/config-api/kubelet-config.v1beta1/`}},
		{"override wrong type", with("kubelet:", "  config:", "    serializeImagePulls: \"no\""),
			[]string{`node.yaml:9: kubelet.config.serializeImagePulls: wrong type: got a JSON string, want bool`}},
		{"override bad duration", with("kubelet:", "  config:", "    syncFrequency: soon"),
			[]string{`node.yaml:9: kubelet.config.syncFrequency: invalid v1.Duration: time: invalid duration "soon"`}},
		{"override of an owned field", with("kubelet:", "  config:", "    providerID: x", "    maxPods: 5"),
			[]string{
				`node.yaml:9: kubelet.config.providerID: set by drover (must be <region-id>.<instance-id> for the cloud controller manager to adopt the Node); remove it; drover sets it from the ECS metadata`,
				`node.yaml:10: kubelet.config.maxPods: set by drover (the node's pod capacity); set kubelet.maxPods instead`,
			}},
		{"override not a mapping", with("kubelet:", "  config: maxPods=5"),
			[]string{`node.yaml:8: kubelet.config: must be a mapping of KubeletConfiguration fields, got the string "maxPods=5"`}},
		{"bad sandbox image", with("containerd:", "  sandboxImage: \"Pause 3.10\""),
			[]string{`node.yaml:8: containerd.sandboxImage: not an image reference: "Pause 3.10" (e.g. drover.dev/pause:3.10)`}},
		{"bad mirror", with("containerd:", "  mirrors:", "    docker.io: [\"ftp://10.0.2.2\", \"http://10.0.2.2:5000/v2/x\"]"),
			[]string{
				`node.yaml:9: containerd.mirrors["docker.io"][0]: must be an http or https URL, got "ftp://10.0.2.2"`,
				`node.yaml:9: containerd.mirrors["docker.io"][1]: must not have a path, got "http://10.0.2.2:5000/v2/x"; containerd adds /v2/ itself`,
			}},
		{"bad registry host", with("containerd:", "  mirrors:", "    https://docker.io: [\"http://10.0.2.2:5000\"]"),
			[]string{`node.yaml:9: containerd.mirrors["https://docker.io"]: must be a registry host such as docker.io or registry.example.com:5000`}},
		{"no mirrors listed", with("containerd:", "  mirrors:", "    docker.io: []"),
			[]string{`node.yaml:9: containerd.mirrors["docker.io"]: must list at least one mirror URL; leave the registry out to pull from it directly`}},
		{"bad storage", with("storage: data"),
			[]string{`node.yaml:7: storage: must be one of auto, required, system, got "data" (see docs/node-config.md, Container storage)`}},
		{"storage not a string", with("storage: true"),
			[]string{`node.yaml:7: storage: must be a string, got the boolean true (quote it: "true")`}},
		{"wrong apiVersion", doc("apiVersion: drover.dev/v1", "kind: NodeConfig", "cluster:", good[0], good[1], good[2]),
			[]string{`node.yaml:1: apiVersion: unsupported version "drover.dev/v1"; this agent reads drover.dev/v1alpha1`}},
		{"wrong kind", doc("apiVersion: drover.dev/v1alpha1", "kind: Node", "cluster:", good[0], good[1], good[2]),
			[]string{`node.yaml:2: kind: must be NodeConfig, got "Node"`}},
		{"missing everything", doc("containerd: {}"),
			[]string{
				`node.yaml:1: apiVersion: required; set it to drover.dev/v1alpha1`,
				`node.yaml:1: kind: required; set it to NodeConfig`,
				`node.yaml:1: cluster: required: the node needs the API server, its CA and a bootstrap token to join`,
			}},
		{"empty document", "# nothing here\n",
			[]string{`node.yaml: the document is empty; see docs/node-config.md for a complete example`}},
		{"not a mapping", "- a\n- b\n",
			[]string{`node.yaml:1: must be a mapping, got a list`}},
		{"syntax error", "apiVersion: drover.dev/v1alpha1\nkind: NodeConfig\ncluster: x\n  server: y\n",
			[]string{`node.yaml:4: invalid YAML: mapping values are not allowed in this context`}},
		{"two documents", with("---", "kind: NodeConfig"),
			[]string{`node.yaml:7: a second YAML document follows; the node file holds exactly one`}},
		{"alias", with("kubelet:", "  labels: &l {a: b}", "  config:", "    evictionHard: *l"),
			[]string{`node.yaml:10: kubelet.config.evictionHard: must be a value, got an alias (YAML aliases are not supported: write the value out)`}},
		{"every problem listed", doc("apiVersion: drover.dev/v1alpha1", "kind: NodeConfig", "cluster:",
			"  server: http://x", "  bootstrapToken: nope", "kubelet:", "  taints: [a:Never]"),
			[]string{
				`node.yaml:4: cluster.server: must be an https URL (the kubelet checks the API server against the cluster CA), got "http://x"`,
				`node.yaml:3: cluster: one of caData (the cluster CA certificate as PEM) or caHash (its sha256:<spki> pin) is required`,
				`node.yaml:5: cluster.bootstrapToken: must match [a-z0-9]{6}.[a-z0-9]{16} (create one with kubeadm token create)`,
				`node.yaml:7: kubelet.taints[0]: invalid taint effect "Never"; use NoSchedule, PreferNoSchedule or NoExecute`,
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			problems := Validate([]byte(tc.in), "node.yaml")
			var got []string
			for _, p := range problems {
				got = append(got, p.String())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Validate:\n got %q\nwant %q", got, tc.want)
			}
			c, err := Parse([]byte(tc.in), "node.yaml")
			if err == nil || c != nil {
				t.Fatalf("Parse = %v, %v; want an error", c, err)
			}
			if err.Error() != strings.Join(tc.want, "\n") {
				t.Errorf("Parse error:\n got %s\nwant %s", err, strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestParseDefaults(t *testing.T) {
	data, err := os.ReadFile("../../testdata/node/minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(data, "minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		APIVersion: APIVersion,
		Kind:       Kind,
		Cluster: Cluster{
			Server:         "https://api.example.com:6443",
			CAHash:         pin,
			BootstrapToken: "abcdef.0123456789abcdef",
			DNS:            []string{"10.96.0.10"},
			Domain:         "cluster.local",
		},
		Kubelet:    Kubelet{MaxPods: 110},
		Containerd: Containerd{SandboxImage: "drover.dev/pause:3.10"},
		Storage:    StorageAuto,
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("Parse(minimal) =\n%#v\nwant\n%#v", c, want)
	}
}

func TestParseStorage(t *testing.T) {
	for _, mode := range []string{StorageAuto, StorageRequired, StorageSystem} {
		c, err := Parse([]byte(with("storage: "+mode)), "node.yaml")
		if err != nil {
			t.Fatalf("storage: %s: %v", mode, err)
		}
		if c.Storage != mode {
			t.Errorf("storage: %s parsed as %q", mode, c.Storage)
		}
	}
}

func TestParseFull(t *testing.T) {
	data, err := os.ReadFile("../../testdata/node/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(data, "full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Kubelet.Taints, []Taint{{"dedicated", "batch", "NoSchedule"}, {"example.com/gpu", "", "PreferNoSchedule"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("taints = %v, want %v", got, want)
	}
	if got := c.Kubelet.Taints[0].String(); got != "dedicated=batch:NoSchedule" {
		t.Errorf("Taint.String() = %q", got)
	}
	if got, want := c.Containerd.Mirrors["registry.k8s.io"], []string{"https://mirror-a.example.com", "http://10.0.2.2:5001"}; !reflect.DeepEqual(got, want) {
		t.Errorf("mirrors = %v, want %v", got, want)
	}
	if c.Kubelet.MaxPods != 64 || c.Kubelet.Labels["example.com/pool"] != "workers" {
		t.Errorf("kubelet = %+v", c.Kubelet)
	}
}

// A caHash in upper case is accepted and kept in the form CAHash computes.
func TestCAHashNormalised(t *testing.T) {
	c, err := Parse([]byte(clusterWith(good[0], "  caHash: "+strings.ToUpper(pin[:7])+strings.ToUpper(pin[7:]), good[2])), "x")
	if err == nil {
		t.Fatalf("an upper-case algorithm name should be refused, got %+v", c.Cluster)
	}
	c, err = Parse([]byte(clusterWith(good[0], "  caHash: sha256:"+strings.ToUpper(pin[7:]), good[2])), "x")
	if err != nil {
		t.Fatal(err)
	}
	if c.Cluster.CAHash != pin {
		t.Errorf("CAHash = %q, want %q", c.Cluster.CAHash, pin)
	}
}

func TestProblemString(t *testing.T) {
	for _, tc := range []struct {
		p    Problem
		want string
	}{
		{Problem{Source: "f", Path: "kubelet.taints[1]", Line: 9, Message: "m"}, "f:9: kubelet.taints[1]: m"},
		{Problem{Source: "f", Line: 2, Message: "m"}, "f:2: m"},
		{Problem{Source: "f", Message: "m"}, "f: m"},
	} {
		if got := tc.p.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
}
