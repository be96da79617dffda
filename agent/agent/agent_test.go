package agent

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/agent/kube"
	"github.com/drover-os/drover/agent/nodeconfig"
	"github.com/drover-os/drover/agent/provider"
	"github.com/drover-os/drover/agent/status"
	"github.com/drover-os/drover/agent/systemd"
)

type fakeProvider struct {
	data    []byte
	present bool
}

func (f *fakeProvider) Name() string { return "fake" }
func (f *fakeProvider) UserData(context.Context) ([]byte, bool, error) {
	return f.data, f.present, nil
}
func (f *fakeProvider) Facts(context.Context) (provider.Facts, error) {
	return provider.Facts{InstanceID: "i-bp1abc", RegionID: "cn-hangzhou", ZoneID: "cn-hangzhou-h",
		InstanceType: "ecs.g7.large", Hostname: "iZbp1abcZ", PrivateIPv4: "10.0.2.15", MAC: "52:54:00:12:34:56"}, nil
}

type fakeAPI struct {
	conds  []kube.Condition
	events []string
}

func (f *fakeAPI) GetNode(ctx context.Context, name string) (*kube.Node, error) {
	n := &kube.Node{}
	n.Metadata.Name = name
	n.Status.Conditions = []kube.Condition{{Type: "Ready", Status: "True", Reason: "KubeletReady", Message: "kubelet is posting ready status"}}
	return n, nil
}
func (f *fakeAPI) SetCondition(ctx context.Context, name string, c kube.Condition) error {
	f.conds = append(f.conds, c)
	return nil
}
func (f *fakeAPI) Event(ctx context.Context, node, uid, reason, msg string) error {
	f.events = append(f.events, reason+": "+msg)
	return nil
}

func testCA(t testing.TB) string {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubernetes"}, IsCA: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// userData renders an Ignition config writing a node file and one extra file.
func userData(t testing.TB, extra string) []byte {
	ca := testCA(t)
	node := "apiVersion: drover.dev/v1alpha1\nkind: NodeConfig\ncluster:\n  server: https://10.0.2.2:6443\n  bootstrapToken: abcdef.0123456789abcdef\n  caData: |\n    " +
		strings.ReplaceAll(strings.TrimSpace(ca), "\n", "\n    ") + "\ncontainerd:\n  mirrors:\n    100.64.0.2:5000: [\"http://100.64.0.2:5000\"]\n"
	cfg := map[string]any{
		"ignition": map[string]any{"version": "3.4.0"},
		"storage": map[string]any{"files": []any{
			map[string]any{"path": NodeFile, "mode": 0o600, "contents": map[string]any{"source": "data:," + url.PathEscape(node)}},
			map[string]any{"path": "/etc/motd", "mode": 0o644, "contents": map[string]any{"source": "data:," + url.PathEscape(extra)}},
		}},
	}
	b, _ := json.Marshal(cfg)
	return b
}

type rig struct {
	root string
	sd   *systemd.Fake
	api  *fakeAPI
	prov *fakeProvider
	log  []string
}

func newRig(t *testing.T, data []byte) *rig {
	return &rig{root: t.TempDir(), sd: &systemd.Fake{}, api: &fakeAPI{}, prov: &fakeProvider{data: data, present: data != nil}}
}

func (r *rig) agent() *Agent {
	env := Env{
		Root: r.root, Provider: r.prov, Systemd: r.sd,
		Network: func(ctx context.Context, mac string) (Primary, error) {
			return Primary{Link: "eth0", MAC: mac, IPv4: "10.0.2.15", Gateway: "10.0.2.2"}, nil
		},
		Prepare: func(string) error { return nil },
		Healthz: func(ctx context.Context) error {
			// The kubelet gets its certificate once healthy.
			os.MkdirAll(filepath.Join(r.root, filepath.Dir(KubeletCert)), 0o755)
			return os.WriteFile(filepath.Join(r.root, KubeletCert), []byte("cert"), 0o600)
		},
		Kube:    func(string, []byte, string) (NodeAPI, error) { return r.api, nil },
		Console: func(s string) { r.log = append(r.log, s) },
		Uptime:  func() float64 { return 1 },
		Poll:    10 * time.Millisecond,
	}
	return New(env, DefaultDeadlines)
}

func TestProvisionJoinsAndDeletesBootstrap(t *testing.T) {
	r := newRig(t, userData(t, "hello"))
	if err := r.agent().Run(context.Background()); err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(r.log, "\n"))
	}
	st, _ := status.Read(r.root)
	if st.State != "joined" || len(st.Phases) != 10 {
		t.Fatalf("status %+v", st)
	}
	names := map[string]status.Phase{}
	for _, p := range st.Phases {
		names[p.Name] = p
	}
	// containerd starts right after apply, beside network and runtime.
	if c, r := names["containerd"], names["runtime"]; c.Result != "ok" || c.Started.Before(names["apply"].Ended) || c.Ended.After(r.Ended) {
		t.Errorf("containerd phase %+v must run after apply and end before runtime %+v", c, r)
	}
	if got := strings.Join(r.sd.Calls, ","); got != "reload,start containerd.service,start kubelet.service" {
		t.Errorf("systemd calls %s", got)
	}
	for _, p := range []string{"/etc/motd", "/etc/containerd/config.toml", "/etc/containerd/certs.d/100.64.0.2:5000/hosts.toml", "/etc/kubernetes/kubelet-config.yaml", "/etc/default/kubelet", StoredConfig} {
		if !fileExists(filepath.Join(r.root, p)) {
			t.Errorf("%s not written", p)
		}
	}
	if fileExists(filepath.Join(r.root, "/etc/kubernetes/bootstrap-kubelet.conf")) {
		t.Error("bootstrap kubeconfig not deleted")
	}
	args, _ := os.ReadFile(filepath.Join(r.root, "/etc/default/kubelet"))
	for _, want := range []string{"--node-ip=10.0.2.15", "--hostname-override=izbp1abcz", "topology.kubernetes.io/zone=cn-hangzhou-h"} {
		if !strings.Contains(string(args), want) {
			t.Errorf("kubelet args lack %s: %s", want, args)
		}
	}
	kc, _ := os.ReadFile(filepath.Join(r.root, "/etc/kubernetes/kubelet-config.yaml"))
	if !strings.Contains(string(kc), "providerID: cn-hangzhou.i-bp1abc") {
		t.Errorf("kubelet config lacks providerID:\n%s", kc)
	}
}

// TestMetadataWaitsForNetwork: on ECS the user-data is fetched only once
// a default route exists, and a containerd that fails to start fails the
// join naming it.
func TestMetadataWaitsForNetwork(t *testing.T) {
	r := newRig(t, userData(t, "hello"))
	r.sd.Fail = map[string]error{"containerd.service": errors.New("containerd.service failed; see journalctl -u containerd.service")}
	a := r.agent()
	a.env.MetadataOverNetwork = true
	var calls []string
	a.env.Network = func(ctx context.Context, mac string) (Primary, error) {
		calls = append(calls, "network "+mac)
		return Primary{Link: "eth0", MAC: mac, IPv4: "10.0.2.15", Gateway: "10.0.2.2"}, nil
	}
	err := a.Run(context.Background())
	if len(calls) != 2 || calls[0] != "network " {
		t.Errorf("network waits %q: want one without a MAC before the metadata, then the primary's", calls)
	}
	if err == nil || !strings.Contains(err.Error(), "containerd (started after apply): containerd.service failed") {
		t.Errorf("want the containerd failure, got %v", err)
	}
}

// TestKernelPrerequisitesFailJoin: modules and sysctls load from the
// start, beside config; their failure fails the network phase naming them.
func TestKernelPrerequisitesFailJoin(t *testing.T) {
	r := newRig(t, userData(t, "hello"))
	a := r.agent()
	a.env.Kernel = func() error { return errors.New("loading br_netfilter: no such module") }
	err := a.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "kernel prerequisites (loaded since the agent started): loading br_netfilter") {
		t.Fatalf("want the kernel failure, got %v", err)
	}
	st, _ := status.Read(r.root)
	if st.Phases[0].Name != "kernel" && st.Phases[1].Name != "kernel" {
		t.Errorf("the kernel phase must start with the agent: %+v", st.Phases)
	}
}

func TestRefusedConfigWritesNothing(t *testing.T) {
	bad := []byte(`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/usr/bin/x","contents":{"source":"data:,x"}}]}}`)
	r := newRig(t, bad)
	err := r.agent().Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "$.storage.files[0].path") {
		t.Fatalf("want a path-addressed refusal, got %v", err)
	}
	st, _ := status.Read(r.root)
	if st.State != "failed" || !strings.Contains(st.Error, "$.storage.files[0].path") {
		t.Errorf("status %+v", st)
	}
	if fileExists(filepath.Join(r.root, StoredConfig)) || fileExists(filepath.Join(r.root, "/usr/bin/x")) {
		t.Error("something was written after a refusal")
	}
	if !strings.Contains(strings.Join(r.log, "\n"), "apply: FAILED: ") {
		t.Errorf("no console line:\n%s", strings.Join(r.log, "\n"))
	}
}

func TestSecondBootReappliesStoredAndRefusesChange(t *testing.T) {
	r := newRig(t, userData(t, "v1"))
	if err := r.agent().Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Reboot: /etc is a fresh tmpfs; /var (and the kubelet's kubeconfig) persist.
	os.RemoveAll(filepath.Join(r.root, "etc"))
	os.WriteFile(filepath.Join(r.root, "/var/lib/kubelet/kubeconfig"), []byte("kubeconfig"), 0o600)
	r.prov.data = userData(t, "v2")
	r.log = nil
	if err := r.agent().Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	motd, _ := os.ReadFile(filepath.Join(r.root, "/etc/motd"))
	if string(motd) != "v1" {
		t.Errorf("stored config not re-applied: motd %q", motd)
	}
	if !strings.Contains(strings.Join(r.log, "\n"), "REFUSED: user-data changed since first boot") {
		t.Errorf("refusal not on the console:\n%s", strings.Join(r.log, "\n"))
	}
	st, _ := status.Read(r.root)
	if st.State != "joined" || !strings.Contains(st.Error, ErrImmutable.Error()) {
		t.Errorf("status %+v", st)
	}
	if fileExists(filepath.Join(r.root, "/etc/kubernetes/bootstrap-kubelet.conf")) {
		t.Error("bootstrap kubeconfig rewritten on a joined node")
	}
}

func TestNoUserDataLeavesNodeUnconfigured(t *testing.T) {
	r := newRig(t, nil)
	if err := r.agent().Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	st, _ := status.Read(r.root)
	if st.State != "unconfigured" {
		t.Errorf("state %s", st.State)
	}
}

func TestDriftIsReported(t *testing.T) {
	r := newRig(t, userData(t, "hello"))
	a := r.agent()
	if err := a.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := CheckDrift(r.root, a.managed); len(d) != 0 {
		t.Fatalf("drift right after apply: %v", d)
	}
	os.WriteFile(filepath.Join(r.root, "/etc/motd"), []byte("edited"), 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	a.Guard(ctx, 10*time.Millisecond)
	if len(r.api.events) != 1 || !strings.Contains(r.api.events[0], "/etc/motd") {
		t.Errorf("events %v", r.api.events)
	}
	if len(r.api.conds) != 1 || r.api.conds[0].Status != "True" {
		t.Errorf("conditions %+v", r.api.conds)
	}
	if !strings.Contains(strings.Join(r.log, "\n"), "DRIFT: local change to managed files: /etc/motd") {
		t.Errorf("console:\n%s", strings.Join(r.log, "\n"))
	}
}

// TestCAPinnedByHash: a node file with only caHash gets its CA from the
// cluster, accepted only when it matches the pin.
func TestCAPinnedByHash(t *testing.T) {
	ca := testCA(t)
	pin, err := nodeconfig.CAHash([]byte(ca))
	if err != nil {
		t.Fatal(err)
	}
	node := "apiVersion: drover.dev/v1alpha1\nkind: NodeConfig\ncluster:\n  server: https://10.0.2.2:6443\n  bootstrapToken: abcdef.0123456789abcdef\n  caHash: " + pin + "\n"
	cfg, _ := json.Marshal(map[string]any{"ignition": map[string]any{"version": "3.4.0"},
		"storage": map[string]any{"files": []any{map[string]any{"path": NodeFile, "mode": 0o600,
			"contents": map[string]any{"source": "data:," + url.PathEscape(node)}}}}})
	for _, tc := range []struct {
		served string
		ok     bool
	}{{ca, true}, {testCA(t), false}} {
		r := newRig(t, cfg)
		a := r.agent()
		a.env.DiscoverCA = func(context.Context, string) ([]byte, error) { return []byte(tc.served), nil }
		err := a.Run(context.Background())
		if tc.ok && err != nil {
			t.Fatalf("pinned CA refused: %v", err)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "no certificate matches")) {
			t.Fatalf("a CA not matching the pin was accepted: %v", err)
		}
		if tc.ok {
			got, _ := os.ReadFile(filepath.Join(r.root, nodeconfig.CAFile))
			if string(got) != tc.served {
				t.Error("the discovered CA was not written for the kubelet")
			}
		}
	}
}
