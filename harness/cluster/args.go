package cluster

import (
	"net"
	"path/filepath"
	"strconv"
)

// Cluster-wide settings. The service range's first address (10.96.0.1) is
// in the serving certificate; the issuer is what kubeadm uses.
const (
	ServiceCIDR          = "10.96.0.0/12"
	ServiceAccountIssuer = "https://kubernetes.default.svc.cluster.local"
	ClusterName          = "drover-local"
)

// layout names the files of a state dir.
type layout struct{ dir string }

// dirs are the directories Start creates.
func (l layout) dirs() []string {
	return []string{l.dir, filepath.Join(l.dir, "bin"), filepath.Join(l.dir, "logs")}
}

func (l layout) bin(name string) string     { return filepath.Join(l.dir, "bin", name) }
func (l layout) pki() string                { return filepath.Join(l.dir, "pki") }
func (l layout) pkiFile(name string) string { return filepath.Join(l.dir, "pki", name) }
func (l layout) etcd() string               { return filepath.Join(l.dir, "etcd") }
func (l layout) log(name string) string     { return filepath.Join(l.dir, "logs", name+".log") }
func (l layout) path(name string) string    { return filepath.Join(l.dir, name) }
func (l layout) kubeconfig(name string) string {
	return filepath.Join(l.dir, name+".kubeconfig")
}

// apiServerArgs are kube-apiserver's flags: Node+RBAC authorization and
// NodeRestriction as on a real cluster, bootstrap tokens for kubelet TLS
// bootstrap, and every credential from the state dir's PKI.
func apiServerArgs(l layout, etcdURL, bind string, port int, advertise string) []string {
	return []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=" + bind,
		"--secure-port=" + strconv.Itoa(port),
		"--advertise-address=" + advertise,
		"--tls-cert-file=" + l.pkiFile("apiserver.crt"),
		"--tls-private-key-file=" + l.pkiFile("apiserver.key"),
		"--client-ca-file=" + l.pkiFile("ca.crt"),
		"--kubelet-client-certificate=" + l.pkiFile("apiserver-kubelet-client.crt"),
		"--kubelet-client-key=" + l.pkiFile("apiserver-kubelet-client.key"),
		// The Node's InternalIP, as kubeadm prefers: the default tries
		// its Hostname first (an ECS hostname no resolver here knows),
		// and the egress to the guest's kubelet (DialNode) takes its
		// address only.
		"--kubelet-preferred-address-types=InternalIP",
		"--service-account-key-file=" + l.pkiFile("sa.pub"),
		"--service-account-signing-key-file=" + l.pkiFile("sa.key"),
		"--service-account-issuer=" + ServiceAccountIssuer,
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--enable-bootstrap-token-auth=true",
		"--service-cluster-ip-range=" + ServiceCIDR,
		"--allow-privileged=true",
		// Without it the apiserver would write self-signed certificates
		// to /var/run/kubernetes when a cert flag is wrong.
		"--cert-dir=" + l.pki(),
		"--profiling=false",
	}
}

// componentArgs are the flags kube-controller-manager and kube-scheduler
// share: their own kubeconfig (name's identity) for the API server and for
// checking their callers, the cluster CA, health served on loopback at a
// port of its own with a serving certificate of the cluster CA, so Start
// can wait for it.
func componentArgs(l layout, name string, port int) []string {
	kc := l.kubeconfig(name)
	return []string{
		"--kubeconfig=" + kc,
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		"--client-ca-file=" + l.pkiFile("ca.crt"),
		// There is no front proxy: without this it would look for its
		// request-header CA in the cluster and log an error a second.
		"--authentication-skip-lookup=true",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + l.pkiFile(name+"-serving.crt"),
		"--tls-private-key-file=" + l.pkiFile(name+"-serving.key"),
	}
}

// controllerManagerArgs are kube-controller-manager's flags: it signs
// kubelet client certificates with the cluster CA and approves the
// bootstrap and renewal CSRs (csrapproving is in "*"); bootstrapsigner and
// tokencleaner are off by default and needed for cluster-info signing and
// token expiry. It serves its health endpoint on loopback only, at a port
// of its own so that several clusters can run on one host.
func controllerManagerArgs(l layout, port int) []string {
	return append(componentArgs(l, "controller-manager", port),
		"--cluster-name="+ClusterName,
		"--cluster-signing-cert-file="+l.pkiFile("ca.crt"),
		"--cluster-signing-key-file="+l.pkiFile("ca.key"),
		"--controllers=*,bootstrapsigner,tokencleaner",
		"--root-ca-file="+l.pkiFile("ca.crt"),
		"--service-account-private-key-file="+l.pkiFile("sa.key"),
		"--use-service-account-credentials=true",
		"--leader-elect=false",
		"--allocate-node-cidrs=false",
		"--service-cluster-ip-range="+ServiceCIDR,
		"--profiling=false",
	)
}

// httpsURL formats an https URL for host and port.
func httpsURL(host string, port int) string {
	return "https://" + net.JoinHostPort(host, strconv.Itoa(port))
}
