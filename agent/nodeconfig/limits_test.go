package nodeconfig

import (
	"reflect"
	"strings"
	"testing"
)

// TestValidateLimits: values at the edge of each accepted range pass, and
// the first value past it is refused at its line and path.
func TestValidateLimits(t *testing.T) {
	domain253 := strings.Repeat("a.", 126) + "a" // 253 characters
	name63 := strings.Repeat("n", 63)
	image255 := strings.Repeat("a", 255)
	for _, tc := range []struct {
		name string
		in   string
		want []string // nil: accepted
	}{
		{"maxPods 1", with("kubelet:", "  maxPods: 1"), nil},
		{"maxPods max int32", with("kubelet:", "  maxPods: 2147483647"), nil},
		{"maxPods past int32", with("kubelet:", "  maxPods: 2147483648"),
			[]string{`node.yaml:8: kubelet.maxPods: must be an integer from 1 to 2147483647, got 2147483648`}},
		{"maxPods negative", with("kubelet:", "  maxPods: -1"),
			[]string{`node.yaml:8: kubelet.maxPods: must be an integer from 1 to 2147483647, got -1`}},
		{"server port 1", clusterWith("  server: https://10.0.2.2:1", good[1], good[2]), nil},
		{"server port 65535", clusterWith("  server: https://10.0.2.2:65535", good[1], good[2]), nil},
		{"server port 0", clusterWith("  server: https://10.0.2.2:0", good[1], good[2]),
			[]string{`node.yaml:4: cluster.server: port "0" is not in 1-65535`}},
		{"server port 65536", clusterWith("  server: https://10.0.2.2:65536", good[1], good[2]),
			[]string{`node.yaml:4: cluster.server: port "65536" is not in 1-65535`}},
		{"server without port", clusterWith("  server: https://api.example.com", good[1], good[2]), nil},
		{"server with query", clusterWith("  server: https://10.0.2.2:6443?x=1", good[1], good[2]),
			[]string{`node.yaml:4: cluster.server: must not have a query or fragment, got "https://10.0.2.2:6443?x=1"`}},
		{"server with fragment", clusterWith("  server: https://10.0.2.2:6443#x", good[1], good[2]),
			[]string{`node.yaml:4: cluster.server: must not have a query or fragment, got "https://10.0.2.2:6443#x"`}},
		{"server not a URL", clusterWith("  server: \"https://10.0.2.2:6443/\\x7f\"", good[1], good[2]),
			[]string{"node.yaml:4: cluster.server: not a URL (parse \"https://10.0.2.2:6443/\\x7f\": net/url: invalid control character in URL); write it as https://<host>:<port>"}},
		{"domain of 253 characters", with("  domain: " + domain253), nil},
		{"domain of 254 characters", with("  domain: a" + domain253),
			[]string{`node.yaml:7: cluster.domain: must be a lower-case DNS domain such as cluster.local, got "a` + domain253 + `"`}},
		{"label name of 63 characters", with("kubelet:", "  labels:", "    example.com/"+name63+": "+name63), nil},
		{"label name of 64 characters", with("kubelet:", "  labels:", "    example.com/n"+name63+": x"),
			[]string{`node.yaml:9: kubelet.labels["example.com/n` + name63 + `"]: invalid key "example.com/n` + name63 + `": the name must be 1-63 characters of letters, digits, '-', '_' and '.', starting and ending with a letter or digit`}},
		{"label value of 64 characters", with("kubelet:", "  labels:", "    pool: v"+name63),
			[]string{`node.yaml:9: kubelet.labels["pool"]: invalid value "v` + name63 + `": at most 63 characters of letters, digits, '-', '_' and '.', starting and ending with a letter or digit`}},
		{"label prefix of 253 characters", with("kubelet:", "  labels:", "    "+domain253+"/x: y"), nil},
		{"label prefix of 254 characters", with("kubelet:", "  labels:", "    a"+domain253+"/x: y"),
			[]string{`node.yaml:9: kubelet.labels["a` + domain253 + `/x"]: invalid key "a` + domain253 + `/x": the prefix before / must be a lower-case DNS subdomain (example.com/role)`}},
		{"empty label prefix", with("kubelet:", "  labels:", "    /x: y"),
			[]string{`node.yaml:9: kubelet.labels["/x"]: invalid key "/x": the prefix before / must be a lower-case DNS subdomain (example.com/role)`}},
		{"sandbox image of 255 characters", with("containerd:", "  sandboxImage: "+image255), nil},
		{"sandbox image of 256 characters", with("containerd:", "  sandboxImage: a"+image255),
			[]string{`node.yaml:8: containerd.sandboxImage: not an image reference: "a` + image255 + `" (e.g. drover.dev/pause:3.10)`}},
		{"registry port 65535", with("containerd:", "  mirrors:", "    registry.example.com:65535: [\"https://m.example.com\"]"), nil},
		{"registry port 0", with("containerd:", "  mirrors:", "    registry.example.com:0: [\"https://m.example.com\"]"),
			[]string{`node.yaml:9: containerd.mirrors["registry.example.com:0"]: port "0" is not in 1-65535`}},
		{"registry port 99999", with("containerd:", "  mirrors:", "    registry.example.com:99999: [\"https://m.example.com\"]"),
			[]string{`node.yaml:9: containerd.mirrors["registry.example.com:99999"]: port "99999" is not in 1-65535`}},
		{"mirror port 65536", with("containerd:", "  mirrors:", "    docker.io: [\"https://m.example.com:65536\"]"),
			[]string{`node.yaml:9: containerd.mirrors["docker.io"][0]: port "65536" is not in 1-65535`}},
		{"mirror with a trailing slash", with("containerd:", "  mirrors:", "    docker.io: [\"https://m.example.com:5000/\"]"), nil},
		{"mirror without host", with("containerd:", "  mirrors:", "    docker.io: [\"https:///x\"]"),
			[]string{`node.yaml:9: containerd.mirrors["docker.io"][0]: must name a host, got "https:///x"`}},
		{"mirror with credentials", with("containerd:", "  mirrors:", "    docker.io: [\"https://u:p@m.example.com\"]"),
			[]string{`node.yaml:9: containerd.mirrors["docker.io"][0]: must not carry credentials`}},
		{"mirror with query", with("containerd:", "  mirrors:", "    docker.io: [\"https://m.example.com?x\"]"),
			[]string{`node.yaml:9: containerd.mirrors["docker.io"][0]: must not have a query or fragment, got "https://m.example.com?x"`}},
		{"mirror not a URL", with("containerd:", "  mirrors:", "    docker.io: [\"http://[::1\"]"),
			[]string{`node.yaml:9: containerd.mirrors["docker.io"][0]: not a URL (parse "http://[::1": missing ']' in host); write it as http(s)://<host>[:<port>]`}},
		{"mirrors not a mapping", with("containerd:", "  mirrors: [docker.io]"),
			[]string{`node.yaml:8: containerd.mirrors: must be a mapping, got a list`}},
		{"mirror list not a list", with("containerd:", "  mirrors:", "    docker.io: https://m.example.com"),
			[]string{`node.yaml:9: containerd.mirrors["docker.io"]: must be a list, got the string "https://m.example.com"`}},
		{"registry twice", with("containerd:", "  mirrors:", "    docker.io: [\"https://a.example.com\"]", "    docker.io: [\"https://b.example.com\"]"),
			[]string{`node.yaml:10: containerd.mirrors["docker.io"]: set twice (first on line 9); keep one`}},
		{"registry key not a string", with("containerd:", "  mirrors:", "    5000: [\"https://a.example.com\"]"),
			[]string{`node.yaml:9: containerd.mirrors: keys must be strings, got the integer 5000 (quote it: "5000")`}},
		{"label key a list", with("kubelet:", "  labels:", "    ? [a]", "    : b"),
			[]string{`node.yaml:9: kubelet.labels: keys must be strings, got a list`}},
		{"field name not a string", with("1: x"),
			[]string{`node.yaml:7: field names must be strings, got the integer 1`}},
		{"DNS entry null", with("  dns: [~]"),
			[]string{`node.yaml:7: cluster.dns[0]: must be a string, got null`}},
		{"DNS entry a number", with("  dns: [1.5]"),
			[]string{`node.yaml:7: cluster.dns[0]: must be a string, got the number 1.5 (quote it: "1.5")`}},
		{"DNS entry with a zone", with("  dns: [\"fe80::1%eth0\"]"),
			[]string{`node.yaml:7: cluster.dns[0]: must be an IP address, got "fe80::1%eth0"`}},
		{"token with a binary tag", clusterWith(good[0], good[1], "  bootstrapToken: !!binary YWJj"),
			[]string{`node.yaml:6: cluster.bootstrapToken: must be a string, got !!binary "YWJj" (quote it: "YWJj")`}},
		{"token redacted but not upper case", clusterWith(good[0], good[1], "  bootstrapToken: abcdef.Redacted"),
			[]string{`node.yaml:6: cluster.bootstrapToken: must match [a-z0-9]{6}.[a-z0-9]{16} (create one with kubeadm token create)`}},
		{"YAML error without a line", "\x01",
			[]string{`node.yaml: invalid YAML: control characters are not allowed`}},
		{"YAML error in a second document", with("---", "x: ["),
			[]string{`node.yaml:8: invalid YAML: did not find expected node content`}},
		{"null document", "null\n",
			[]string{`node.yaml:1: the document is empty; see docs/node-config.md for a complete example`}},
		{"taint with an empty key", with("kubelet:", "  taints: [\":NoSchedule\"]"),
			[]string{`node.yaml:8: kubelet.taints[0]: taint invalid key "": the name must be 1-63 characters of letters, digits, '-', '_' and '.', starting and ending with a letter or digit`}},
		{"taint with a bad value", with("kubelet:", "  taints: [\"a=-b-:NoSchedule\"]"),
			[]string{`node.yaml:8: kubelet.taints[0]: taint invalid value "-b-": at most 63 characters of letters, digits, '-', '_' and '.', starting and ending with a letter or digit`}},
		{"same taint key, other effects", with("kubelet:", "  taints: [a=b:NoSchedule, a=b:NoExecute, a:PreferNoSchedule]"), nil},
		{"other taint keys, same effect", with("kubelet:", "  taints: [a:NoSchedule, b:NoSchedule]"), nil},
		{"a bad taint twice is reported once each", with("kubelet:", "  taints: [a:Never, a:Never]"),
			[]string{
				`node.yaml:8: kubelet.taints[0]: invalid taint effect "Never"; use NoSchedule, PreferNoSchedule or NoExecute`,
				`node.yaml:8: kubelet.taints[1]: invalid taint effect "Never"; use NoSchedule, PreferNoSchedule or NoExecute`,
			}},
		{"taints not a list", with("kubelet:", "  taints: a:NoSchedule"),
			[]string{`node.yaml:8: kubelet.taints: must be a list, got the string "a:NoSchedule"`}},
		{"labels not a mapping", with("kubelet:", "  labels: [a]"),
			[]string{`node.yaml:8: kubelet.labels: must be a mapping, got a list`}},
		{"cluster not a mapping", doc(head[0], head[1], "cluster: x"),
			[]string{`node.yaml:3: cluster: must be a mapping, got the string "x"`}},
		{"containerd not a mapping", with("containerd: 1"),
			[]string{`node.yaml:7: containerd: must be a mapping, got the integer 1`}},
		{"apiVersion not a string", doc("apiVersion: 1", head[1], head[2], good[0], good[1], good[2]),
			[]string{`node.yaml:1: apiVersion: must be a string, got the integer 1 (quote it: "1")`}},
		{"kind not a string", doc(head[0], "kind: [NodeConfig]", head[2], good[0], good[1], good[2]),
			[]string{`node.yaml:2: kind: must be a string, got a list`}},
		{"null fields are unset", doc(head[0], head[1], head[2], good[0], good[1], good[2], "  dns: ~", "kubelet: ~", "containerd: null"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, p := range Validate([]byte(tc.in), "node.yaml") {
				got = append(got, p.String())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Validate:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestParseEmptyCollections: an empty labels or mirrors mapping leaves the
// Config's field nil, like leaving it out; null fields take the defaults.
func TestParseEmptyCollections(t *testing.T) {
	c, err := Parse([]byte(with("  dns: ~", "  domain: ~", "kubelet:", "  labels: {}", "  maxPods: ~", "containerd:", "  mirrors: {}", "  sandboxImage: ~")), "node.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Kubelet.Labels != nil || c.Containerd.Mirrors != nil {
		t.Errorf("labels %#v, mirrors %#v; want both nil", c.Kubelet.Labels, c.Containerd.Mirrors)
	}
	if !reflect.DeepEqual(c.Cluster.DNS, []string{DefaultClusterDNS}) || c.Cluster.Domain != DefaultDomain ||
		c.Kubelet.MaxPods != DefaultMaxPods || c.Containerd.SandboxImage != DefaultSandboxImage {
		t.Errorf("defaults not applied: %+v", c)
	}
}

// TestParseCanonicalValues: addresses are kept in canonical form, a
// second CA certificate is kept, and the values read are the ones written.
func TestParseCanonicalValues(t *testing.T) {
	c, err := Parse([]byte(with("  dns: [\"FD00::000A\", 10.96.0.10]", "  domain: example.internal",
		"kubelet:", "  maxPods: 250", "  labels: {kubernetes.io: x, evilkubernetes.io/y: z}",
		"containerd:", "  sandboxImage: registry.example.com:5000/pause:3.9")), "node.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Cluster.DNS, []string{"fd00::a", "10.96.0.10"}; !reflect.DeepEqual(got, want) {
		t.Errorf("DNS = %q, want %q", got, want)
	}
	if c.Cluster.Domain != "example.internal" || c.Kubelet.MaxPods != 250 || c.Containerd.SandboxImage != "registry.example.com:5000/pause:3.9" {
		t.Errorf("config = %+v", c)
	}
	if got, want := c.Kubelet.Labels, map[string]string{"kubernetes.io": "x", "evilkubernetes.io/y": "z"}; !reflect.DeepEqual(got, want) {
		t.Errorf("labels = %v, want %v", got, want)
	}
}

// TestUserLabelNamespaces: the kubelet refuses to start with a label under
// kubernetes.io or k8s.io other than its own few; those it allows pass.
func TestUserLabelNamespaces(t *testing.T) {
	for key, refusedNS := range map[string]string{
		"kubernetes.io/hostname":                "",
		"kubernetes.io/arch":                    "",
		"node.kubernetes.io/pool":               "",
		"x.node.kubernetes.io/pool":             "",
		"kubelet.kubernetes.io/x":               "",
		"example.com/x":                         "",
		"k8s.io.example.com/x":                  "",
		"kubernetes.io":                         "",
		"kubernetes.io/pool":                    "kubernetes.io",
		"k8s.io/pool":                           "k8s.io",
		"team.k8s.io/pool":                      "team.k8s.io",
		"node-role.kubernetes.io/control-plane": "node-role.kubernetes.io",
	} {
		msg := checkUserLabelKey(key)
		switch {
		case refusedNS == "" && msg != "":
			t.Errorf("%s refused: %s", key, msg)
		case refusedNS != "" && !strings.HasPrefix(msg, "the kubelet may not set labels under "+refusedNS+"/ "):
			t.Errorf("%s: %q, want it refused under %s/", key, msg, refusedNS)
		}
	}
	for _, key := range reservedLabels {
		if msg := checkUserLabelKey(key); !strings.HasPrefix(msg, "reserved: ") {
			t.Errorf("%s: %q, want it reserved", key, msg)
		}
	}
}

// TestCADataBundles: a bundle of certificates is accepted; anything else in
// it is named by its position.
func TestCADataBundles(t *testing.T) {
	ca := load(t, "full").Cluster.CAData
	key := "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
	bad := "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
	for _, tc := range []struct {
		name, in, want string
	}{
		{"one certificate", ca, ""},
		{"two certificates", ca + ca, ""},
		{"trailing blank lines", ca + "\n\n  \n", ""},
		{"key after a certificate", ca + key, "PEM block 2 is a PRIVATE KEY; only the CA's CERTIFICATE blocks belong here"},
		{"second certificate broken", ca + bad, "PEM certificate 2 does not parse ("},
		{"text after", ca + "junk\n", "has text after the last PEM certificate; remove it"},
	} {
		got := checkCAData(tc.in)
		if tc.want == "" && got != "" || !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: checkCAData = %q, want %q", tc.name, got, tc.want)
		}
	}
}
