//go:build integration

package cluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestIntegrationCluster starts a real control plane and walks the whole
// kubelet TLS bootstrap without a kubelet: the bootstrap token creates a
// node client CSR, kube-controller-manager approves and signs it, and the
// signed certificate then acts as the node. A second start from the same
// state dir must keep the CA and etcd's data.
func TestIntegrationCluster(t *testing.T) {
	ctx := context.Background()
	state := t.TempDir()
	cfg := Config{StateDir: state, CacheDir: testCacheDir(), Version: testVersion, Log: testLog{t}, Scheduler: true}

	start := time.Now()
	c, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Start took %s", time.Since(start).Round(time.Second))
	pids := []int{c.apiserver.cmd.Process.Pid, c.controller.cmd.Process.Pid, c.scheduler.cmd.Process.Pid}
	stopped := false
	defer func() {
		if !stopped {
			c.Stop()
		}
	}()

	if err := c.client.do(ctx, http.MethodGet, "/readyz", nil, nil); err != nil {
		t.Fatalf("readyz: %v", err)
	}
	checkBootstrapObjects(t, c)
	kp := bootstrapNode(t, c, "test-node")
	checkNodeAndPods(t, c, kp, "test-node")
	checkAdminKubeconfig(t, c)
	firstCA := string(c.CAPEM())

	if err := c.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	stopped = true
	checkNoProcesses(t, state, pids)

	// Restart from the same state dir: same CA, the node is still there.
	c2, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Stop()
	if string(c2.CAPEM()) != firstCA {
		t.Errorf("restart made a new CA")
	}
	if c2.BootstrapToken() == c.BootstrapToken() {
		t.Errorf("restart reused the bootstrap token")
	}
	if _, err := c2.Node(ctx, "test-node"); err != nil {
		t.Errorf("after restart: %v", err)
	}
	pids = []int{c2.apiserver.cmd.Process.Pid, c2.controller.cmd.Process.Pid}
	if err := c2.Stop(); err != nil {
		t.Errorf("Stop after restart: %v", err)
	}
	checkNoProcesses(t, state, pids)
}

func checkBootstrapObjects(t *testing.T, c *Cluster) {
	t.Helper()
	ctx := context.Background()
	id, _, err := splitToken(c.BootstrapToken())
	if err != nil {
		t.Fatal(err)
	}
	var secret struct {
		Type string
		Data map[string]string
	}
	if err := c.client.do(ctx, http.MethodGet, "/api/v1/namespaces/kube-system/secrets/bootstrap-token-"+id, nil, &secret); err != nil {
		t.Fatalf("token secret: %v", err)
	}
	if secret.Type != "bootstrap.kubernetes.io/token" || secret.Data["auth-extra-groups"] != base64.StdEncoding.EncodeToString([]byte(BootstrapExtraGroup)) {
		t.Errorf("token secret = %+v", secret)
	}
	for name, role := range map[string]string{
		"drover:kubelet-bootstrap":                     "system:node-bootstrapper",
		"drover:node-autoapprove-bootstrap":            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
		"drover:node-autoapprove-certificate-rotation": "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
	} {
		var crb struct {
			RoleRef  struct{ Name string }
			Subjects []struct{ Kind, Name string }
		}
		if err := c.client.do(ctx, http.MethodGet, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/"+name, nil, &crb); err != nil {
			t.Errorf("binding %s: %v", name, err)
			continue
		}
		if crb.RoleRef.Name != role || len(crb.Subjects) != 1 || crb.Subjects[0].Kind != "Group" {
			t.Errorf("binding %s = %+v", name, crb)
		}
	}
	// cluster-info is readable without credentials, and bootstrapsigner
	// signs it with the token (proves the controller runs).
	anon, err := newRESTClient(c.Server(), c.CAPEM(), nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer anon.close()
	poll(t, "cluster-info to be signed for token "+id, func() error {
		var cm struct{ Data map[string]string }
		if err := anon.do(ctx, http.MethodGet, "/api/v1/namespaces/kube-public/configmaps/cluster-info", nil, &cm); err != nil {
			return err
		}
		if !strings.Contains(cm.Data["kubeconfig"], "server: "+c.GuestServer()) {
			return fmt.Errorf("kubeconfig lacks the guest server:\n%s", cm.Data["kubeconfig"])
		}
		if cm.Data["jws-kubeconfig-"+id] == "" {
			return errors.New("no jws-kubeconfig-" + id + " yet")
		}
		return nil
	})
}

// bootstrapNode does what a kubelet's TLS bootstrap does and returns the
// node's key pair.
func bootstrapNode(t *testing.T, c *Cluster, node string) tls.Certificate {
	t.Helper()
	ctx := context.Background()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	boot, err := newRESTClient(c.Server(), c.CAPEM(), nil, c.BootstrapToken())
	if err != nil {
		t.Fatal(err)
	}
	defer boot.close()
	const csrs = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
	name := "node-csr-" + node
	csr := map[string]any{
		"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"request":    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			"signerName": "kubernetes.io/kube-apiserver-client-kubelet",
			"usages":     []string{"digital signature", "client auth"},
		},
	}
	if err := boot.do(ctx, http.MethodPost, csrs, csr, nil); err != nil {
		t.Fatalf("creating CSR as the bootstrap token: %v", err)
	}
	var certPEM []byte
	poll(t, "CSR "+name+" to be approved and signed", func() error {
		var got struct {
			Spec   struct{ Username string }
			Status struct {
				Conditions  []struct{ Type, Status string }
				Certificate []byte
			}
		}
		if err := boot.do(ctx, http.MethodGet, csrs+"/"+name, nil, &got); err != nil {
			return err
		}
		if len(got.Status.Certificate) == 0 {
			return fmt.Errorf("not signed yet (conditions %+v)", got.Status.Conditions)
		}
		if !strings.HasPrefix(got.Spec.Username, "system:bootstrap:") {
			t.Errorf("CSR username = %q, want system:bootstrap:<id>", got.Spec.Username)
		}
		certPEM = got.Status.Certificate
		return nil
	})
	cert, err := parseCertPEM(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(c.pki.CA.Cert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("signed node certificate does not chain to the cluster CA: %v", err)
	}
	if cert.Subject.CommonName != "system:node:"+node {
		t.Errorf("signed certificate subject = %v", cert.Subject)
	}
	t.Logf("node certificate signed: %s, valid until %s", cert.Subject, cert.NotAfter.Format(time.RFC3339))
	return tls.Certificate{Certificate: [][]byte{cert.Raw}, PrivateKey: key}
}

// checkNodeAndPods acts as the node with its new certificate (Node
// authorizer + NodeRestriction let it create its own Node) and then uses
// the Cluster query methods.
func checkNodeAndPods(t *testing.T, c *Cluster, kp tls.Certificate, node string) {
	t.Helper()
	ctx := context.Background()
	asNode, err := newRESTClient(c.Server(), c.CAPEM(), &kp, "")
	if err != nil {
		t.Fatal(err)
	}
	defer asNode.close()
	obj := map[string]any{"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]any{"name": node, "labels": map[string]string{"topology.kubernetes.io/zone": "cn-test-a"}},
		"spec":     map[string]any{"providerID": "cn-test.i-test"}}
	if err := asNode.do(ctx, http.MethodPost, "/api/v1/nodes", obj, nil); err != nil {
		t.Fatalf("creating Node as system:node:%s: %v", node, err)
	}
	nodes, err := c.Nodes(ctx)
	if err != nil || len(nodes) != 1 {
		t.Fatalf("Nodes = %+v, %v", nodes, err)
	}
	n := nodes[0]
	if n.Name != node || n.ProviderID != "cn-test.i-test" || n.Labels["topology.kubernetes.io/zone"] != "cn-test-a" || n.Ready {
		t.Errorf("node = %+v", n)
	}
	if _, err := c.Node(ctx, "no-such-node"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Node(no-such-node) err = %v, want ErrNotFound", err)
	}

	pod := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"smoke"},
		"spec":{"nodeName":"` + node + `","containers":[{"name":"c","image":"registry.invalid/pause:1"}]}}`
	if err := c.CreatePod(ctx, "default", []byte(pod)); err != nil {
		t.Fatal(err)
	}
	p, err := c.Pod(ctx, "default", "smoke")
	if err != nil || p.Phase != "Pending" || p.NodeName != node {
		t.Errorf("Pod = %+v, %v", p, err)
	}
	pods, err := c.Pods(ctx, "default")
	if err != nil || len(pods) != 1 || pods[0].Name != "smoke" {
		t.Errorf("Pods = %+v, %v", pods, err)
	}
}

func checkAdminKubeconfig(t *testing.T, c *Cluster) {
	t.Helper()
	data, err := os.ReadFile(c.AdminKubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "server: "+c.Server()) || !strings.Contains(string(data), "client-certificate-data: ") {
		t.Errorf("admin kubeconfig:\n%s", data)
	}
}

// checkNoProcesses asserts that the component pids are gone and that no
// process runs a binary from the state dir or is a child of the test.
func checkNoProcesses(t *testing.T, state string, pids []int) {
	t.Helper()
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d still exists after Stop (kill 0: %v)", pid, err)
		}
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && strings.HasPrefix(exe, state) {
			t.Errorf("process %d still runs %s", pid, exe)
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The fields after the ")" that ends the command name: state ppid …
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 {
			f := strings.Fields(string(stat[i+1:]))
			if len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) {
				t.Errorf("process %d (%s) is still a child of the test", pid, stat[:i+1])
			}
		}
	}
}

// poll retries f every half second for up to two minutes.
func poll(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
