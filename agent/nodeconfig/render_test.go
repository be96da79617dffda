package nodeconfig

import (
	"bytes"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

var facts = Facts{
	InstanceID:   "i-bp1abcdefghijklmnop",
	RegionID:     "cn-hangzhou",
	ZoneID:       "cn-hangzhou-h",
	InstanceType: "ecs.g7.xlarge",
	Hostname:     "iZbp1abcdefghijklmnopZ",
	PrivateIPv4:  "172.16.0.10",
	// ecs.g7.xlarge: 4 vCPUs, 16 GiB, of which the kernel reports this.
	CPUs:     4,
	MemTotal: 16009520 << 10,
}

func load(t *testing.T, name string) *Config {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "node", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(data, name+".yaml")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to create it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run with -update and review the diff):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func TestRenderGolden(t *testing.T) {
	for _, name := range []string{"full", "minimal"} {
		t.Run(name, func(t *testing.T) {
			c := load(t, name)
			kc, err := KubeletConfig(c, facts)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, name+".kubelet-config.yaml", kc)

			flags, err := KubeletFlags(c, facts, "")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, name+".kubelet-flags.txt", []byte(strings.Join(flags, "\n")+"\n"))

			golden(t, name+".containerd-config.toml", ContainerdConfig(c))

			hosts := HostsToml(c)
			var all bytes.Buffer
			for _, path := range slices.Sorted(maps.Keys(hosts)) {
				all.WriteString("==> " + path + " <==\n")
				all.Write(hosts[path])
			}
			golden(t, name+".hosts.toml", all.Bytes())

			if c.Cluster.CAData != "" {
				bk, err := BootstrapKubeconfig(c)
				if err != nil {
					t.Fatal(err)
				}
				golden(t, name+".bootstrap-kubeconfig.yaml", bk)
			}
		})
	}
}

// Rendering twice gives the same bytes: maps are never iterated into output.
func TestRenderDeterministic(t *testing.T) {
	c := load(t, "full")
	for range 20 {
		a, _ := KubeletConfig(c, facts)
		b, _ := KubeletConfig(c, facts)
		fa, _ := KubeletFlags(c, facts, "")
		fb, _ := KubeletFlags(c, facts, "")
		if !bytes.Equal(a, b) || !slices.Equal(fa, fb) {
			t.Fatal("two renders of the same input differ")
		}
	}
}

// The rendered file decodes strictly into the kubelet's type with drover's
// settings and the overrides in place, the overrides merged, not replacing.
func TestKubeletConfigContent(t *testing.T) {
	out, err := KubeletConfig(load(t, "full"), facts)
	if err != nil {
		t.Fatal(err)
	}
	var kc kubeletv1beta1.KubeletConfiguration
	if err := yaml.UnmarshalStrict(out, &kc); err != nil {
		t.Fatalf("rendered config does not decode strictly: %v", err)
	}
	checks := []struct {
		what string
		ok   bool
	}{
		{"apiVersion", kc.APIVersion == "kubelet.config.k8s.io/v1beta1" && kc.Kind == "KubeletConfiguration"},
		{"cgroupDriver", kc.CgroupDriver == "systemd"},
		{"containerRuntimeEndpoint", kc.ContainerRuntimeEndpoint == "unix:///run/containerd/containerd.sock"},
		{"providerID", kc.ProviderID == "cn-hangzhou.i-bp1abcdefghijklmnop"},
		{"webhook authn", kc.Authentication.Webhook.Enabled != nil && *kc.Authentication.Webhook.Enabled},
		{"anonymous off", kc.Authentication.Anonymous.Enabled != nil && !*kc.Authentication.Anonymous.Enabled},
		{"client CA", kc.Authentication.X509.ClientCAFile == "/etc/kubernetes/pki/ca.crt"},
		{"authorization", kc.Authorization.Mode == kubeletv1beta1.KubeletAuthorizationModeWebhook},
		{"readOnlyPort", kc.ReadOnlyPort == 0},
		{"rotateCertificates", kc.RotateCertificates && !kc.ServerTLSBootstrap},
		{"maxPods", kc.MaxPods == 64},
		{"clusterDNS", slices.Equal(kc.ClusterDNS, []string{"10.96.0.10"}) && kc.ClusterDomain == "cluster.local"},
		{"taints", len(kc.RegisterWithTaints) == 2 && kc.RegisterWithTaints[1].Key == "example.com/gpu" && kc.RegisterWithTaints[1].Effect == "PreferNoSchedule"},
		{"no static pods", kc.StaticPodPath == ""},
		{"failSwapOn", kc.FailSwapOn != nil && *kc.FailSwapOn},
		{"overrides", kc.ImageGCHighThresholdPercent != nil && *kc.ImageGCHighThresholdPercent == 80 && kc.EvictionHard["memory.available"] == "200Mi" && kc.KubeReserved["cpu"] == "100m" && kc.SerializeImagePulls != nil && !*kc.SerializeImagePulls},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: not as expected in\n%s", c.what, out)
		}
	}
}

func TestKubeletFlagsNodeIP(t *testing.T) {
	c := load(t, "minimal")
	flags, err := KubeletFlags(c, facts, "192.168.7.8")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf",
		"--cert-dir=/var/lib/kubelet/pki",
		"--config=/etc/kubernetes/kubelet-config.yaml",
		"--hostname-override=izbp1abcdefghijklmnopz",
		"--kubeconfig=/var/lib/kubelet/kubeconfig",
		"--node-ip=192.168.7.8",
		"--node-labels=node.kubernetes.io/instance-type=ecs.g7.xlarge,topology.kubernetes.io/region=cn-hangzhou,topology.kubernetes.io/zone=cn-hangzhou-h",
	}
	if !slices.Equal(flags, want) {
		t.Errorf("KubeletFlags =\n%s\nwant\n%s", strings.Join(flags, "\n"), strings.Join(want, "\n"))
	}
	if _, err := KubeletFlags(c, facts, "not-an-ip"); err == nil || err.Error() != `rendering the kubelet flags: node IP "not-an-ip" is not an IP address` {
		t.Errorf("bad node IP: err = %v", err)
	}
	bare := Facts{InstanceID: "i-1", RegionID: "cn-beijing"}
	flags, err = KubeletFlags(c, bare, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(flags, " "); got != "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --cert-dir=/var/lib/kubelet/pki --config=/etc/kubernetes/kubelet-config.yaml --kubeconfig=/var/lib/kubelet/kubeconfig --node-labels=topology.kubernetes.io/region=cn-beijing" {
		t.Errorf("flags with bare facts = %s", got)
	}
}

func TestProviderID(t *testing.T) {
	if got := ProviderID(facts); got != "cn-hangzhou.i-bp1abcdefghijklmnop" {
		t.Errorf("ProviderID = %q", got)
	}
}

func TestFactsCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    Facts
		want string
	}{
		{"no instance id", Facts{RegionID: "cn-hangzhou"},
			"checking ECS instance facts (compare with the instance in the ECS console): metadata instance-id is empty"},
		{"bad zone", Facts{InstanceID: "i-1", RegionID: "cn-hangzhou", ZoneID: "zone h"},
			`checking ECS instance facts (compare with the instance in the ECS console): metadata zone-id "zone h" is not a valid label value`},
		{"bad hostname and ip", Facts{InstanceID: "i-1", RegionID: "r", Hostname: "a_b", PrivateIPv4: "::1"},
			"checking ECS instance facts (compare with the instance in the ECS console): metadata hostname \"a_b\" is not a valid node name (a DNS subdomain)\nmetadata private-ipv4 \"::1\" is not an IPv4 address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.f.Check()
			if err == nil || err.Error() != tc.want {
				t.Errorf("Check() = %v\nwant %s", err, tc.want)
			}
			if _, err := KubeletConfig(load(t, "minimal"), tc.f); err == nil {
				t.Error("KubeletConfig accepted the facts")
			}
		})
	}
	if err := facts.Check(); err != nil {
		t.Errorf("good facts: %v", err)
	}
}

// A Config built in code (not by Parse) with a fact label is caught at
// render time.
func TestNodeLabelsConflict(t *testing.T) {
	c := load(t, "minimal")
	c.Kubelet.Labels = map[string]string{LabelZone: "cn-hangzhou-k"}
	_, err := NodeLabels(c, facts)
	want := "node label topology.kubernetes.io/zone=cn-hangzhou-k conflicts with the instance's cn-hangzhou-h; remove it from kubelet.labels"
	if err == nil || err.Error() != want {
		t.Errorf("NodeLabels err = %v, want %s", err, want)
	}
}

func TestKubeletConfigBadOverride(t *testing.T) {
	c := load(t, "minimal")
	c.Kubelet.Config = []byte(`{"noSuchField": 1}`)
	_, err := KubeletConfig(c, facts)
	want := `merging kubelet.config into the kubelet configuration: json: unknown field "noSuchField"`
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
}

func TestCAHash(t *testing.T) {
	pemData, err := os.ReadFile("../../testdata/pki/ca.crt")
	if err != nil {
		t.Fatal(err)
	}
	// The pin was computed with openssl (see ../../testdata/README.md).
	got, err := CAHash(pemData)
	if err != nil || got != pin {
		t.Errorf("CAHash = %q, %v; want %q", got, err, pin)
	}
	if _, err := PinnedCA(pemData, strings.ToUpper(pin[7:])); err == nil {
		t.Error("PinnedCA accepted a pin without the sha256: prefix")
	}
	if got, err := PinnedCA(append([]byte("junk\n"), pemData...), pin); err != nil || !bytes.Equal(got, pemData) {
		t.Errorf("PinnedCA = %q, %v", got, err)
	}
	other := "sha256:" + strings.Repeat("0", 64)
	want := "checking the cluster CA against cluster.caHash " + other + ": no certificate matches; the API server is not the one the node file names, or the pin is stale"
	if _, err := PinnedCA(pemData, other); err == nil || err.Error() != want {
		t.Errorf("PinnedCA(other) = %v", err)
	}
	if _, err := CAHash([]byte("nothing")); err == nil || err.Error() != "computing the CA pin: no PEM CERTIFICATE block found" {
		t.Errorf("CAHash(nothing) = %v", err)
	}
}

func TestBootstrapKubeconfigNeedsCA(t *testing.T) {
	c := load(t, "minimal")
	_, err := BootstrapKubeconfig(c)
	want := "rendering the bootstrap kubeconfig: the cluster CA is not known (the node file pins it by caHash only); discover it, keep the certificate PinnedCA selects and set Cluster.CAData"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
}

func TestHostsTomlPaths(t *testing.T) {
	hosts := HostsToml(load(t, "full"))
	for _, p := range []string{"/etc/containerd/certs.d/docker.io/hosts.toml", "/etc/containerd/certs.d/registry.k8s.io/hosts.toml"} {
		if _, ok := hosts[p]; !ok {
			t.Errorf("no %s in %v", p, slices.Sorted(maps.Keys(hosts)))
		}
	}
	if len(HostsToml(load(t, "minimal"))) != 0 {
		t.Error("hosts.toml files rendered without mirrors")
	}
}

func TestTomlString(t *testing.T) {
	if got := tomlString("a\"b\\c\n"); got != `"a\"b\\c\u000A"` {
		t.Errorf("tomlString = %s", got)
	}
}
