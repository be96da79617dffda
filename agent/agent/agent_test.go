package agent

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-os/drover/agent/boot"
	"github.com/drover-os/drover/agent/containerd"
	"github.com/drover-os/drover/agent/kube"
	"github.com/drover-os/drover/agent/kube/kubetest"
	"github.com/drover-os/drover/agent/nodeconfig"
	"github.com/drover-os/drover/agent/provider"
	"github.com/drover-os/drover/agent/status"
	"github.com/drover-os/drover/agent/systemd"
)

type fakeProvider struct {
	data    []byte
	present bool
	ntp     string // ntp-conf/ntp-servers
	// hold makes UserData wait until it is closed, as a metadata service
	// not reachable yet would; err makes it fail.
	hold chan struct{}
	err  error
}

func (f *fakeProvider) Name() string { return "fake" }
func (f *fakeProvider) UserData(ctx context.Context) ([]byte, bool, error) {
	if f.hold != nil {
		select {
		case <-f.hold:
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
	return f.data, f.present, f.err
}
func (f *fakeProvider) Facts(context.Context) (provider.Facts, error) {
	return provider.Facts{InstanceID: "i-bp1abc", RegionID: "cn-hangzhou", ZoneID: "cn-hangzhou-h",
		InstanceType: "ecs.g7.large", Hostname: "iZbp1abcZ", PrivateIPv4: "10.0.2.15", MAC: "52:54:00:12:34:56", NTPServers: f.ntp}, nil
}

type fakeAPI struct {
	mu     sync.Mutex
	conds  []kube.Condition
	events []string
	// refuse makes the next refuse calls of SetCondition and Event fail,
	// as an API server that is down would.
	refuse int
	// staleReady: the Node's Ready condition was last posted an hour ago,
	// as one left from before a reboot.
	staleReady bool
	cordoned   []string // Nodes Cordon was called for
}

func (f *fakeAPI) refused() bool {
	if f.refuse > 0 {
		f.refuse--
		return true
	}
	return false
}

func (f *fakeAPI) GetNode(ctx context.Context, name string) (*kube.Node, error) {
	n := &kube.Node{}
	n.Metadata.Name = name
	hb := time.Now()
	if f.staleReady {
		hb = hb.Add(-time.Hour)
	}
	n.Status.Conditions = []kube.Condition{{Type: "Ready", Status: "True", Reason: "KubeletReady", Message: "kubelet is posting ready status",
		LastHeartbeatTime: hb.UTC().Format(time.RFC3339)}}
	return n, nil
}
func (f *fakeAPI) SetCondition(ctx context.Context, name string, c kube.Condition) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refused() {
		return errors.New("503 Service Unavailable")
	}
	f.conds = append(f.conds, c)
	return nil
}
func (f *fakeAPI) Cordon(ctx context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refused() {
		return errors.New("503 Service Unavailable")
	}
	f.cordoned = append(f.cordoned, name)
	return nil
}
func (f *fakeAPI) Event(ctx context.Context, node, uid, reason, msg string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refused() {
		return errors.New("503 Service Unavailable")
	}
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

// clientCert is a kubelet client certificate and key (PEM, as the kubelet
// writes kubelet-client-current.pem) valid until notAfter.
func clientCert(notAfter time.Time) []byte {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "system:node:izbp1abcz", Organization: []string{"system:nodes"}},
		NotBefore: notAfter.Add(-2 * time.Hour), NotAfter: notAfter, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	kder, _ := x509.MarshalECPrivateKey(key)
	return append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})...)
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
			map[string]any{"path": "/etc/opt/motd", "mode": 0o644, "contents": map[string]any{"source": "data:," + url.PathEscape(extra)}},
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

	mu         sync.Mutex
	prefetched []string // Env.Prefetch's paths, in call order
	imports    []string // Env.Images's archive and labels, one string per call
	importErr  error    // what Env.Images fails with (nil: it succeeds)
}

func newRig(t *testing.T, data []byte) *rig {
	r := &rig{root: t.TempDir(), sd: &systemd.Fake{}, api: &fakeAPI{}, prov: &fakeProvider{data: data, present: data != nil}}
	// The image's sandbox archive (its content is agent/containerd's
	// business).
	archive := filepath.Join(r.root, nodeconfig.SandboxArchive)
	os.MkdirAll(filepath.Dir(archive), 0o755)
	os.WriteFile(archive, []byte("oci layout"), 0o644)
	return r
}

func (r *rig) agent() *Agent {
	env := Env{
		Root: r.root, Provider: r.prov, Systemd: r.sd,
		Network: func(ctx context.Context, mac string) (Primary, error) {
			return Primary{Link: "eth0", MAC: mac, IPv4: "10.0.2.15", Gateway: "10.0.2.2"}, nil
		},
		Prepare: func(string) error { return nil },
		Healthz: func(ctx context.Context) error {
			// The kubelet gets its certificate once healthy (and renews
			// one that has expired).
			if clientCertErr(filepath.Join(r.root, KubeletCert), time.Now()) == nil {
				return nil
			}
			os.MkdirAll(filepath.Join(r.root, filepath.Dir(KubeletCert)), 0o755)
			os.WriteFile(filepath.Join(r.root, nodeconfig.KubeconfigPath), []byte("kubeconfig naming "+KubeletCert), 0o600)
			return os.WriteFile(filepath.Join(r.root, KubeletCert), clientCert(time.Now().Add(time.Hour)), 0o600)
		},
		Kube:    func(string, []byte, string) (NodeAPI, error) { return r.api, nil },
		Console: func(s string) { r.log = append(r.log, s) },
		Prefetch: func(paths ...string) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.prefetched = append(r.prefetched, paths...)
		},
		Images: func(ctx context.Context, archive string, labels map[string]string) (containerd.Result, error) {
			// Like a call to containerd: a context that ends while it
			// runs ends it.
			time.Sleep(20 * time.Millisecond)
			if err := ctx.Err(); err != nil {
				return containerd.Result{}, fmt.Errorf("containerd /containerd.services.leases.v1.Leases/Create: %w", err)
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			r.imports = append(r.imports, fmt.Sprint(archive, " ", labels))
			if r.importErr != nil {
				return containerd.Result{}, r.importErr
			}
			return containerd.Result{Written: 7, Created: []string{"drover.dev/pause:3.10", "drover.dev/pause@sha256:a9c3"}}, nil
		},
		Uptime: func() float64 { return 1 },
		Poll:   10 * time.Millisecond,
	}
	return New(env, DefaultDeadlines)
}

func TestProvisionJoinsAndDeletesBootstrap(t *testing.T) {
	r := newRig(t, userData(t, "hello"))
	if err := r.agent().Run(context.Background()); err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(r.log, "\n"))
	}
	st, _ := status.Read(r.root)
	if st.State != "joined" || len(st.Phases) != 13 {
		t.Fatalf("status %+v", st)
	}
	names := map[string]status.Phase{}
	for _, p := range st.Phases {
		names[p.Name] = p
	}
	// The sandbox image is imported once containerd is up, beside the
	// kubelet, and the node is joined only after it.
	wantImport := filepath.Join(r.root, nodeconfig.SandboxArchive) + " map[io.cri-containerd.pinned:pinned]"
	if got := strings.Join(r.imports, "; "); got != wantImport {
		t.Errorf("imports %q, want %q", got, wantImport)
	}
	if sb := names["sandbox"]; sb.Result != "ok" || sb.Started.Before(names["containerd"].Ended) || sb.Ended.After(names["ready"].Ended) {
		t.Errorf("sandbox phase %+v must run after containerd %+v and end before ready %+v", sb, names["containerd"], names["ready"])
	}
	// containerd starts right after apply, beside network and runtime.
	if c, r := names["containerd"], names["runtime"]; c.Result != "ok" || c.Started.Before(names["apply"].Ended) || c.Ended.After(r.Ended) {
		t.Errorf("containerd phase %+v must run after apply and end before runtime %+v", c, r)
	}
	// timesyncd starts once runtime has written its drop-in, and the
	// join waits for it, not the kubelet.
	if tm := names["time"]; tm.Result != "ok" || tm.Started.Before(names["network"].Ended) {
		t.Errorf("time phase %+v must start after network", tm)
	}
	// The kubelet's binary is read ahead once containerd starts.
	if got, want := strings.Join(r.prefetched, " "), strings.Join(KubeletBinaries, " "); got != want {
		t.Errorf("prefetched %q, want %q", got, want)
	}
	// The config writes no unit: no daemon-reload.
	checkCalls(t, r.sd.Calls, "start containerd.service", "start systemd-resolved.service", "start systemd-timesyncd.service", "start kubelet.service")
	for _, p := range []string{"/etc/opt/motd", "/etc/containerd/config.toml", "/etc/containerd/certs.d/100.64.0.2:5000/hosts.toml", "/etc/kubernetes/kubelet-config.yaml", "/etc/default/kubelet", StoredConfig} {
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

// TestChangedUserDataFailsClosed: a later boot whose user-data differs
// from the one the instance was launched with is refused, and nothing is
// applied or started: the stored copy cannot be confirmed against it.
func TestChangedUserDataFailsClosed(t *testing.T) {
	r := newRig(t, userData(t, "v1"))
	if err := r.agent().Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Reboot: /etc is a fresh tmpfs; /var (and the kubelet's kubeconfig) persist.
	os.RemoveAll(filepath.Join(r.root, "etc"))
	r.prov.data = userData(t, "v2")
	r.log, r.sd.Calls = nil, nil
	err := r.agent().Run(context.Background())
	if !errors.Is(err, ErrImmutable) {
		t.Fatalf("want ErrImmutable, got %v", err)
	}
	if fileExists(filepath.Join(r.root, "/etc/opt/motd")) || fileExists(filepath.Join(r.root, NodeFile)) {
		t.Error("a file was applied although the user-data was refused")
	}
	for _, c := range r.sd.Calls {
		if strings.HasPrefix(c, "start ") || c == "reload" {
			t.Errorf("systemd call %q after a refusal", c)
		}
	}
	if !strings.Contains(strings.Join(r.log, "\n"), "REFUSED: user-data changed since first boot") {
		t.Errorf("refusal not on the console:\n%s", strings.Join(r.log, "\n"))
	}
	st, _ := status.Read(r.root)
	if st.State != "failed" || !strings.Contains(st.Error, ErrImmutable.Error()) {
		t.Errorf("status %+v", st)
	}
	if fileExists(filepath.Join(r.root, "/etc/kubernetes/bootstrap-kubelet.conf")) {
		t.Error("bootstrap kubeconfig rewritten on a joined node")
	}
}

// TestLaterBootWaitsForTheMetadata: a later boot writes and starts
// nothing before the metadata service has answered, and fails closed,
// naming the metadata, when it does not: nothing on /var is applied in
// its place.
func TestLaterBootWaitsForTheMetadata(t *testing.T) {
	r := newRig(t, userData(t, "v1"))
	if err := r.agent().Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(r.root, "etc"))
	r.sd.Calls = nil
	r.prov.hold = make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- r.agent().Run(context.Background()) }()
	time.Sleep(300 * time.Millisecond)
	if fileExists(filepath.Join(r.root, "/etc/opt/motd")) {
		t.Error("the stored config was applied before the metadata answered")
	}
	if len(r.sd.Calls) != 0 {
		t.Errorf("systemd calls before the metadata answered: %v", r.sd.Calls)
	}
	close(r.prov.hold)
	if err := <-done; err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(r.log, "\n"))
	}
	if !fileExists(filepath.Join(r.root, "/etc/opt/motd")) {
		t.Error("the confirmed config was not applied once the metadata answered")
	}

	// A metadata service that fails fails the boot in the config phase,
	// naming the metadata; nothing is applied.
	os.RemoveAll(filepath.Join(r.root, "etc"))
	r.sd.Calls = nil
	r.prov.hold, r.prov.err = nil, errors.New("GET user-data: 500 Internal Server Error")
	err := r.agent().Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "fetching user-data from fake: GET user-data: 500") || !strings.Contains(err.Error(), "never falls back") {
		t.Fatalf("want the metadata failure, got %v", err)
	}
	if fileExists(filepath.Join(r.root, "/etc/opt/motd")) || r.sd.Called("start kubelet.service") || r.sd.Called("start containerd.service") {
		t.Errorf("applied or started without the metadata: calls %v", r.sd.Calls)
	}
	st, _ := status.Read(r.root)
	if st.State != "failed" {
		t.Errorf("state %q, want failed", st.State)
	}
}

// TestRebootMarksStaleReady: on a later boot the Node's Ready condition,
// posted before the reboot, is marked Unknown before the kubelet starts
// (so the kubelet's fast status update is not skipped); on the first boot
// nothing is marked, and an API error is in the runtime phase's detail,
// not a failed join.
func TestRebootMarksStaleReady(t *testing.T) {
	r := newRig(t, userData(t, "v1"))
	if err := r.agent().Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(r.api.conds) != 0 {
		t.Fatalf("first boot set conditions %+v", r.api.conds)
	}
	os.RemoveAll(filepath.Join(r.root, "etc"))
	r.sd.Calls = nil
	done, release := runHeld(t, r, r.agent(), "kubelet.service", "start kubelet.service", "the kubelet", "the kubelet was not started")
	r.api.mu.Lock()
	conds := slices.Clone(r.api.conds)
	r.api.mu.Unlock()
	release()
	if err := <-done; err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(r.log, "\n"))
	}
	if len(conds) != 1 || conds[0].Type != "Ready" || conds[0].Status != "Unknown" || conds[0].Reason != "NodeRebooted" {
		t.Errorf("conditions when the kubelet started: %+v, want Ready Unknown (NodeRebooted)", conds)
	}

	// The API server refuses: the join goes on, with a note.
	os.RemoveAll(filepath.Join(r.root, "etc"))
	r.sd.Hold, r.api.conds, r.api.refuse, r.log = nil, nil, 1, nil
	if err := r.agent().Run(context.Background()); err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(r.log, "\n"))
	}
	st, _ := status.Read(r.root)
	var detail string
	for _, p := range st.Phases {
		if p.Name == "runtime" {
			detail = p.Detail
		}
	}
	if !strings.Contains(detail, "stays until the kubelet posts status (503") {
		t.Errorf("runtime detail %q does not say the mark was refused", detail)
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
	if d := CheckDrift(r.root, a.watch.list()); len(d) != 0 {
		t.Fatalf("drift right after apply: %v", d)
	}
	os.WriteFile(filepath.Join(r.root, "/etc/opt/motd"), []byte("edited"), 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	a.Guard(ctx, 10*time.Millisecond)
	if len(r.api.events) != 1 || !strings.Contains(r.api.events[0], "/etc/opt/motd contents") {
		t.Errorf("events %v", r.api.events)
	}
	if len(r.api.conds) != 1 || r.api.conds[0].Status != "True" {
		t.Errorf("conditions %+v", r.api.conds)
	}
	if !strings.Contains(strings.Join(r.log, "\n"), "DRIFT: local change to what the node is meant to hold: /etc/opt/motd contents") {
		t.Errorf("console:\n%s", strings.Join(r.log, "\n"))
	}
}

func pinnedUserData(t *testing.T, server, pin string) []byte {
	node := "apiVersion: drover.dev/v1alpha1\nkind: NodeConfig\ncluster:\n  server: " + server + "\n  bootstrapToken: abcdef.0123456789abcdef\n  caHash: " + pin + "\n"
	cfg, _ := json.Marshal(map[string]any{"ignition": map[string]any{"version": "3.4.0"},
		"storage": map[string]any{"files": []any{map[string]any{"path": NodeFile, "mode": 0o600,
			"contents": map[string]any{"source": "data:," + url.PathEscape(node)}}}}})
	return cfg
}

// TestCAPinnedByHash: a node file with only caHash gets its CA by
// discovery, accepted only when it matches the pin, and only the pinned
// certificate is trusted.
func TestCAPinnedByHash(t *testing.T) {
	ca := testCA(t)
	pin, err := nodeconfig.CAHash([]byte(ca))
	if err != nil {
		t.Fatal(err)
	}
	cfg := pinnedUserData(t, "https://10.0.2.2:6443", pin)
	for _, tc := range []struct {
		served string
		ok     bool
	}{{ca, true}, {testCA(t) + ca, true}, {testCA(t), false}} {
		r := newRig(t, cfg)
		a := r.agent()
		a.env.DiscoverCA = func(_ context.Context, _, token, p string) ([]byte, error) {
			if token != "abcdef.0123456789abcdef" || p != pin {
				t.Errorf("DiscoverCA(token %q, pin %q)", token, p)
			}
			return []byte(tc.served), nil
		}
		err := a.Run(context.Background())
		if tc.ok && err != nil {
			t.Fatalf("pinned CA refused: %v", err)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "no certificate matches")) {
			t.Fatalf("a CA not matching the pin was accepted: %v", err)
		}
		if tc.ok {
			for _, p := range []string{nodeconfig.CAFile, ClusterCA} {
				if got, _ := os.ReadFile(filepath.Join(r.root, p)); string(got) != ca {
					t.Errorf("%s holds %q, want the pinned certificate alone", p, got)
				}
			}
		}
	}
}

// TestCADiscoveredOnce: discovery runs on the first boot only. The second
// boot trusts the stored CA, even though the server now serves another
// one (properly signed with the token): what the network serves later
// cannot change what the node trusts.
func TestCADiscoveredOnce(t *testing.T) {
	genuine, other := kubetest.NewCA(t, "kubernetes"), kubetest.NewCA(t, "kubernetes")
	srv := kubetest.NewServer(t, genuine)
	srv.Set(kubetest.ClusterInfo(kubetest.Kubeconfig(srv.URL, genuine), "abcdef.0123456789abcdef"))
	pin, err := nodeconfig.CAHash(genuine.PEM)
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, pinnedUserData(t, srv.URL, pin))
	boot := func() error {
		a := r.agent()
		a.env.DiscoverCA = kube.DiscoverCA
		return a.Run(context.Background())
	}
	if err := boot(); err != nil {
		t.Fatalf("first boot: %v", err)
	}
	first := srv.Gets()
	if first == 0 {
		t.Fatal("first boot did not ask cluster-info")
	}
	// Between boots the server changes its CA. /etc is rebuilt at boot.
	srv.Set(kubetest.ClusterInfo(kubetest.Kubeconfig(srv.URL, other), "abcdef.0123456789abcdef"))
	if err := os.RemoveAll(filepath.Join(r.root, "etc")); err != nil {
		t.Fatal(err)
	}
	if err := boot(); err != nil {
		t.Fatalf("second boot: %v", err)
	}
	if log := strings.Join(r.log, "\n"); !strings.Contains(log, "cluster CA: discovered from cluster-info") || !strings.Contains(log, "not discovered again") {
		t.Errorf("console does not tell discovery from the stored CA:\n%s", log)
	}
	if n := srv.Gets(); n != first {
		t.Errorf("second boot asked cluster-info again (%d requests, %d on the first boot)", n, first)
	}
	if got, _ := os.ReadFile(filepath.Join(r.root, nodeconfig.CAFile)); string(got) != string(genuine.PEM) {
		t.Errorf("second boot trusts %q, want the CA pinned on the first boot", got)
	}
}

// TestCADiscoveryRetriesUnsigned: a token bootstrapsigner has not signed
// yet is waited for; a wrong signature is not.
func TestCADiscoveryRetriesUnsigned(t *testing.T) {
	genuine := kubetest.NewCA(t, "kubernetes")
	srv := kubetest.NewServer(t, genuine)
	kc := kubetest.Kubeconfig(srv.URL, genuine)
	srv.Set(map[string]string{"kubeconfig": kc})
	pin, _ := nodeconfig.CAHash(genuine.PEM)
	r := newRig(t, pinnedUserData(t, srv.URL, pin))
	a := r.agent()
	calls := 0
	a.env.DiscoverCA = func(ctx context.Context, server, token, pin string) ([]byte, error) {
		if calls++; calls == 3 {
			srv.Set(kubetest.ClusterInfo(kc, token))
		}
		return kube.DiscoverCA(ctx, server, token, pin)
	}
	if err := a.Run(context.Background()); err != nil || calls != 3 {
		t.Fatalf("calls %d: %v", calls, err)
	}
	r = newRig(t, pinnedUserData(t, srv.URL, pin))
	srv.Set(kubetest.ClusterInfo(kc, "abcdef.ffffffffffffffff"))
	a = r.agent()
	calls = 0
	a.env.DiscoverCA = func(ctx context.Context, server, token, pin string) ([]byte, error) {
		calls++
		return kube.DiscoverCA(ctx, server, token, pin)
	}
	if err := a.Run(context.Background()); err == nil || calls != 1 || !strings.Contains(err.Error(), "signature does not match") {
		t.Fatalf("calls %d: %v", calls, err)
	}
}

// countingFetcher serves one body and counts requests.
type countingFetcher struct {
	body []byte
	gets int
}

func (f *countingFetcher) Get(context.Context, string) ([]byte, error) {
	f.gets++
	return f.body, nil
}

// TestRemoteContentsFetchedOnce: the config's https contents are fetched
// on the first boot and come from /var/lib/drover/contents afterwards.
func TestRemoteContentsFetchedOnce(t *testing.T) {
	body := []byte("listen = 8080\n")
	sum := sha256.Sum256(body)
	var cfg map[string]any
	if err := json.Unmarshal(userData(t, "hello"), &cfg); err != nil {
		t.Fatal(err)
	}
	files := cfg["storage"].(map[string]any)["files"].([]any)
	cfg["storage"].(map[string]any)["files"] = append(files, map[string]any{"path": "/etc/opt/app.conf",
		"contents": map[string]any{"source": "https://files.example.test/app.conf",
			"verification": map[string]any{"hash": "sha256-" + hex.EncodeToString(sum[:])}}})
	data, _ := json.Marshal(cfg)
	r := newRig(t, data)
	f := &countingFetcher{body: body}
	for boot := 1; boot <= 2; boot++ {
		a := r.agent()
		a.env.Fetcher = f
		if err := a.Run(context.Background()); err != nil {
			t.Fatalf("boot %d: %v", boot, err)
		}
		if got, _ := os.ReadFile(filepath.Join(r.root, "etc/opt/app.conf")); string(got) != string(body) {
			t.Fatalf("boot %d: /etc/opt/app.conf = %q", boot, got)
		}
		os.RemoveAll(filepath.Join(r.root, "etc")) // /etc is rebuilt at boot
	}
	if f.gets != 1 {
		t.Errorf("%d fetches over two boots, want 1", f.gets)
	}
	if !fileExists(filepath.Join(r.root, ContentsDir, "sha256-"+hex.EncodeToString(sum[:]))) {
		t.Error("no content-addressed copy in " + ContentsDir)
	}
}

// TestSecureBootReachesStatusAndLabel: what drover-init recorded about
// Secure Boot goes into the status file and the kubelet's node labels;
// without a record there is neither.
func TestSecureBootReachesStatusAndLabel(t *testing.T) {
	for _, tc := range []struct {
		record string
		want   *bool
		label  string
	}{
		{`{"enabled":true,"state":"on","source":"EFI variable SecureBoot = 1","signedUKI":true}`, ptr(true), "drover.dev/secure-boot=true"},
		{`{"enabled":false,"state":"off","source":"EFI variable SecureBoot = 0"}`, ptr(false), "drover.dev/secure-boot=false"},
		{`{"enabled":true,"source":"EFI variable SecureBoot = 1"}`, ptr(true), "drover.dev/secure-boot=true"}, // before "state"
		// Unreadable is neither true nor false: no label, and the status
		// says so.
		{`{"enabled":false,"state":"unknown","source":"mounting efivarfs: no such device","signedUKI":true}`, nil, ""},
		{"", nil, ""},
	} {
		r := newRig(t, userData(t, "hello"))
		if tc.record != "" {
			p := filepath.Join(r.root, boot.SecureBootPath)
			os.MkdirAll(filepath.Dir(p), 0o755)
			os.WriteFile(p, []byte(tc.record), 0o644)
		}
		if err := r.agent().Run(context.Background()); err != nil {
			t.Fatalf("%v\n%s", err, strings.Join(r.log, "\n"))
		}
		st, _ := status.Read(r.root)
		if (st.SecureBoot == nil) != (tc.want == nil) || (st.SecureBoot != nil && *st.SecureBoot != *tc.want) {
			t.Errorf("record %q: status secureBoot %v, want %v", tc.record, st.SecureBoot, tc.want)
		}
		args, _ := os.ReadFile(filepath.Join(r.root, "/etc/default/kubelet"))
		if tc.label != "" && !strings.Contains(string(args), tc.label) {
			t.Errorf("record %q: kubelet args lack %s: %s", tc.record, tc.label, args)
		}
		if tc.label == "" && strings.Contains(string(args), "drover.dev/secure-boot") {
			t.Errorf("record %q: no known state, yet kubelet args carry a secure-boot label: %s", tc.record, args)
		}
		if tc.record != "" {
			var rec boot.SecureBoot
			json.Unmarshal([]byte(tc.record), &rec)
			wantState := rec.State
			if wantState == "" {
				wantState = "on"
			}
			if st.SecureBootState != wantState || st.SignedUKI != rec.SignedUKI || st.SecureBootSource != rec.Source {
				t.Errorf("record %q: status state %q, signed UKI %v, source %q", tc.record, st.SecureBootState, st.SignedUKI, st.SecureBootSource)
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }

// checkCalls checks that the agent made exactly these systemd calls, in
// this order except for containerd's and timesyncd's starts, which their
// own phases make beside the others: containerd's after apply (and its
// reload or re-runs), beside network and runtime; timesyncd's once
// runtime has rendered, beside containerd's start-up and the kubelet's.
// Neither's place among the other calls, nor their order, is fixed.
func checkCalls(t *testing.T, got []string, want ...string) {
	t.Helper()
	const ctrd, tsd = "start containerd.service", "start systemd-timesyncd.service"
	strip := func(calls []string) []string {
		var out []string
		for _, c := range calls {
			if c != ctrd && c != tsd {
				out = append(out, c)
			}
		}
		return out
	}
	at := func(calls []string, c string) int { return slices.Index(calls, c) }
	g, w := strings.Join(strip(got), ","), strings.Join(strip(want), ",")
	count := func(calls []string, c string) (n int) {
		for _, x := range calls {
			if x == c {
				n++
			}
		}
		return n
	}
	if g != w || count(got, ctrd) != count(want, ctrd) || count(got, tsd) != count(want, tsd) ||
		at(got, ctrd) < at(got, "reload") || at(got, tsd) < at(got, "reload") {
		t.Errorf("systemd calls %s, want %s (containerd's and timesyncd's starts after apply's reload, in any order)", strings.Join(got, ","), strings.Join(want, ","))
	}
}

// TestRerunsBootServicesForTheirDirectories: a config that writes a sysctl
// file gets systemd-sysctl run again after apply (the agent is not ordered
// after it); one that writes nothing there does not (TestReloadOnlyForUnits).
func TestRerunsBootServicesForTheirDirectories(t *testing.T) {
	var cfg map[string]any
	if err := json.Unmarshal(userData(t, "hello"), &cfg); err != nil {
		t.Fatal(err)
	}
	storage := cfg["storage"].(map[string]any)
	storage["files"] = append(storage["files"].([]any),
		map[string]any{"path": "/etc/sysctl.d/90-pool.conf", "contents": map[string]any{"source": "data:,vm.max_map_count%3D262144%0A"}},
		map[string]any{"path": "/etc/modules-load.d/pool.conf", "contents": map[string]any{"source": "data:,dummy%0A"}})
	data, _ := json.Marshal(cfg)
	r := newRig(t, data)
	if err := r.agent().Run(context.Background()); err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(r.log, "\n"))
	}
	checkCalls(t, r.sd.Calls, "restart systemd-modules-load.service", "restart systemd-sysctl.service", "start containerd.service", "start systemd-resolved.service", "start systemd-timesyncd.service", "start kubelet.service")
}

// TestReloadOnlyForUnits: a config that carries a unit gets a daemon-reload
// at the end of apply, before containerd starts, so systemd sees the unit.
func TestReloadOnlyForUnits(t *testing.T) {
	var cfg map[string]any
	if err := json.Unmarshal(userData(t, "hello"), &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["systemd"] = map[string]any{"units": []any{map[string]any{"name": "hello.service", "contents": "[Service]\nExecStart=/bin/true\n"}}}
	data, _ := json.Marshal(cfg)
	r := newRig(t, data)
	if err := r.agent().Run(context.Background()); err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(r.log, "\n"))
	}
	checkCalls(t, r.sd.Calls, "reload", "start containerd.service", "start systemd-resolved.service", "start systemd-timesyncd.service", "start kubelet.service")
	if !fileExists(filepath.Join(r.root, "/etc/systemd/system/hello.service")) {
		t.Error("hello.service not written")
	}
}

// runHeld runs a (made by r) with unit's start job held and waits until
// the fake systemd has seen call. It returns Run's result and the release
// of the held job. Run returning first ("before starting what"),
// or call not coming within 10 s (late), fails the test.
func runHeld(t *testing.T, r *rig, a *Agent, unit, call, what, late string) (<-chan error, func()) {
	t.Helper()
	hold := make(chan struct{})
	r.sd.Hold = map[string]chan struct{}{unit: hold}
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background()) }()
	deadline := time.After(10 * time.Second)
	for !r.sd.Called(call) {
		select {
		case err := <-done:
			t.Fatalf("Run returned %v before starting %s", err, what)
		case <-deadline:
			close(hold)
			<-done
			t.Fatalf("%s: calls %v", late, r.sd.Calls)
		case <-time.After(5 * time.Millisecond):
		}
	}
	return done, func() { close(hold) }
}

// TestTimesyncdStartsWhileContainerdStarts: the runtime phase starts
// timesyncd without waiting for containerd's start-up to finish.
func TestTimesyncdStartsWhileContainerdStarts(t *testing.T) {
	r := newRig(t, userData(t, "hello"))
	done, release := runHeld(t, r, r.agent(), "containerd.service", "start "+TimesyncdUnit, "timesyncd", "timesyncd was not started while containerd was starting")
	if r.sd.Called("start kubelet.service") {
		t.Error("the kubelet started before containerd's start-up finished")
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(r.log, "\n"))
	}
}

// TestKubeletDoesNotWaitForTimesyncd: the kubelet starts while
// timesyncd's start job still runs, and the node is joined only once it
// has finished; a timesyncd that fails to start fails the join.
func TestKubeletDoesNotWaitForTimesyncd(t *testing.T) {
	r := newRig(t, userData(t, "hello"))
	a := r.agent()
	done, release := runHeld(t, r, a, TimesyncdUnit, "start kubelet.service", "the kubelet", "the kubelet waited for timesyncd")
	select {
	case err := <-done:
		t.Fatalf("Run returned %v while timesyncd was still starting", err)
	case <-time.After(100 * time.Millisecond):
	}
	release()
	if err := <-done; err != nil || a.Status().Snapshot().State != "joined" {
		t.Fatalf("Run: %v, state %s", err, a.Status().Snapshot().State)
	}

	r = newRig(t, userData(t, "hello"))
	r.sd.Fail = map[string]error{TimesyncdUnit: errors.New("unit masked")}
	err := r.agent().Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "systemd-timesyncd") || !strings.Contains(err.Error(), "unit masked") {
		t.Fatalf("Run with a timesyncd that cannot start: %v", err)
	}
}

// TestReadyNotFromBeforeTheKubelet: a Ready condition posted before this
// boot's kubelet started (the Node's, from before a reboot) does not end
// the ready phase.
func TestReadyNotFromBeforeTheKubelet(t *testing.T) {
	r := newRig(t, userData(t, "hello"))
	r.api.staleReady = true
	a := r.agent()
	a.dl.Ready = 300 * time.Millisecond
	err := a.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "before this boot's kubelet started") {
		t.Fatalf("Run with a stale Ready condition: %v", err)
	}
}

// TestSandboxImportFailureFailsJoin: a node whose sandbox image cannot be
// imported could start no pod; it must not count as joined, and the error
// says what failed and what containerd said.
func TestSandboxImportFailureFailsJoin(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(r *rig)
		want  string
	}{
		{"containerd refuses", func(r *rig) {
			r.importErr = errors.New("image drover.dev/pause:3.10: containerd /containerd.services.images.v1.Images/Create: PermissionDenied: no")
		}, "importing the sandbox image drover.dev/pause:3.10 from /usr/lib/drover/images/pause.tar into containerd: image drover.dev/pause:3.10: containerd /containerd.services.images.v1.Images/Create: PermissionDenied: no"},
		{"no archive in the image", func(r *rig) { os.Remove(filepath.Join(r.root, nodeconfig.SandboxArchive)) },
			"the image has no /usr/lib/drover/images/pause.tar (it predates drover shipping one): rebuild the image with this drover"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, userData(t, "hello"))
			tc.setup(r)
			err := r.agent().Run(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run: %v, want %q", err, tc.want)
			}
			st, _ := status.Read(r.root)
			if st.State == "joined" {
				t.Errorf("state %q after a failed import", st.State)
			}
		})
	}
}

// TestACRProviderFollowsTheImage: the kubelet is told to use the ACR
// credential provider exactly when the image ships it (a kubelet told to
// use a plugin that is not there does not start).
func TestACRProviderFollowsTheImage(t *testing.T) {
	for _, ships := range []bool{false, true} {
		r := newRig(t, userData(t, "hello"))
		if ships {
			bin := filepath.Join(r.root, nodeconfig.ACRProviderPath)
			os.MkdirAll(filepath.Dir(bin), 0o755)
			os.WriteFile(bin, []byte("provider"), 0o755)
		}
		if err := r.agent().Run(context.Background()); err != nil {
			t.Fatalf("%v\n%s", err, strings.Join(r.log, "\n"))
		}
		args, _ := os.ReadFile(filepath.Join(r.root, nodeconfig.KubeletDefaultsPath))
		cp, _ := os.ReadFile(filepath.Join(r.root, nodeconfig.CredentialProviderConfigPath))
		flag := "--image-credential-provider-config=" + nodeconfig.CredentialProviderConfigPath
		if strings.Contains(string(args), flag) != ships || (len(cp) > 0) != ships {
			t.Errorf("image ships the provider: %v; kubelet args %s; %s: %q", ships, args, nodeconfig.CredentialProviderConfigPath, cp)
		}
		if ships && !strings.Contains(string(cp), "'*-registry.cn-hangzhou.cr.aliyuncs.com'") {
			t.Errorf("the provider's patterns are not the instance region's:\n%s", cp)
		}
	}
}
