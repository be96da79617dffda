package cluster

import (
	"slices"
	"strings"
	"testing"
)

func TestAPIServerArgs(t *testing.T) {
	l := layout{dir: "/s"}
	args := apiServerArgs(l, "http://127.0.0.1:2379", "127.0.0.1", 6443, "100.64.0.2")
	for _, want := range []string{
		"--etcd-servers=http://127.0.0.1:2379", "--secure-port=6443", "--advertise-address=100.64.0.2",
		"--client-ca-file=/s/pki/ca.crt", "--tls-cert-file=/s/pki/apiserver.crt",
		"--service-account-signing-key-file=/s/pki/sa.key", "--service-account-key-file=/s/pki/sa.pub",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
		"--enable-bootstrap-token-auth=true", "--service-cluster-ip-range=10.96.0.0/12", "--allow-privileged=true",
		"--kubelet-preferred-address-types=InternalIP",
	} {
		if !slices.Contains(args, want) {
			t.Errorf("apiserver args lack %s", want)
		}
	}
}

func TestControllerManagerArgs(t *testing.T) {
	args := controllerManagerArgs(layout{dir: "/s"}, 10257)
	for _, want := range []string{
		"--kubeconfig=/s/controller-manager.kubeconfig", "--cluster-signing-cert-file=/s/pki/ca.crt",
		"--cluster-signing-key-file=/s/pki/ca.key", "--controllers=*,bootstrapsigner,tokencleaner",
		"--root-ca-file=/s/pki/ca.crt", "--service-account-private-key-file=/s/pki/sa.key",
		"--use-service-account-credentials=true", "--leader-elect=false", "--allocate-node-cidrs=false",
		"--secure-port=10257", "--bind-address=127.0.0.1",
	} {
		if !slices.Contains(args, want) {
			t.Errorf("controller-manager args lack %s", want)
		}
	}
}

func TestComponents(t *testing.T) {
	comps, err := components("v1.36.3", nil)
	if err != nil || len(comps) != 2 {
		t.Fatalf("components = %+v, %v", comps, err)
	}
	if comps[0].Package != "k8s.io/kubernetes/cmd/kube-apiserver" || comps[1].Package != "k8s.io/kubernetes/cmd/kube-controller-manager" {
		t.Errorf("packages %s, %s", comps[0].Package, comps[1].Package)
	}
	ld := strings.Join(comps[0].Ldflags, " ")
	for _, want := range []string{"-s -w", "gitVersion=v1.36.3", "gitMajor=1", "gitMinor=36"} {
		if !strings.Contains(ld, want) {
			t.Errorf("ldflags %q lack %q", ld, want)
		}
	}
	for _, bad := range []string{"", "1.36.3", "v1.36", "v1.36.3-rc.0", "latest", "v2.0.0"} {
		if _, err := components(bad, nil); err == nil {
			t.Errorf("version %q accepted", bad)
		}
	}
}

func TestSchedulerArgs(t *testing.T) {
	args := schedulerArgs(layout{dir: "/s"}, 10259)
	for _, want := range []string{
		"--kubeconfig=/s/scheduler.kubeconfig", "--authentication-kubeconfig=/s/scheduler.kubeconfig",
		"--tls-cert-file=/s/pki/scheduler-serving.crt", "--leader-elect=false", "--secure-port=10259", "--bind-address=127.0.0.1",
	} {
		if !slices.Contains(args, want) {
			t.Errorf("scheduler args lack %s", want)
		}
	}
}

// TestTestComponents: the scheduler and the e2e suite are built like the
// control plane (version stamped), the suite as a test binary.
func TestTestComponents(t *testing.T) {
	s, err := schedulerComponent("v1.37.2", nil)
	if err != nil || s.Package != "k8s.io/kubernetes/cmd/kube-scheduler" || s.Test {
		t.Errorf("scheduler %+v, %v", s, err)
	}
	e, err := e2eComponent("v1.37.2", nil)
	if err != nil || e.Package != E2EPackage || !e.Test || !strings.Contains(strings.Join(e.Ldflags, " "), "gitVersion=v1.37.2") {
		t.Errorf("e2e %+v, %v", e, err)
	}
	if _, err := e2eComponent("latest", nil); err == nil {
		t.Error("e2e version latest accepted")
	}
}
