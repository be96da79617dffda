package nodeconfig

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/semver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

// Where the rendered files go on the node. The kubeconfig the kubelet writes
// after the bootstrap lives under /var, which persists: /etc is rebuilt at
// every boot and the bootstrap token is deleted once the node has joined.
const (
	KubeletConfigPath       = "/etc/kubernetes/kubelet-config.yaml"
	BootstrapKubeconfigPath = "/etc/kubernetes/bootstrap-kubelet.conf"
	KubeconfigPath          = "/var/lib/kubelet/kubeconfig"
	CertDir                 = "/var/lib/kubelet/pki"
	CAFile                  = "/etc/kubernetes/pki/ca.crt"
	ContainerRuntimeSocket  = "unix:///run/containerd/containerd.sock"
)

// KubeletConfig renders the KubeletConfiguration for this node as YAML:
// drover's settings, then the node file's kubelet.config merged over them
// field by field (objects merge, lists and scalars replace).
func KubeletConfig(c *Config, f Facts) ([]byte, error) {
	if err := f.Check(); err != nil {
		return nil, fmt.Errorf("rendering the kubelet configuration: %w", err)
	}
	taints := make([]corev1.Taint, len(c.Kubelet.Taints))
	for i, t := range c.Kubelet.Taints {
		taints[i] = corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)}
	}
	typeMeta := metav1.TypeMeta{APIVersion: kubeletv1beta1.SchemeGroupVersion.String(), Kind: "KubeletConfiguration"}
	kc := kubeletv1beta1.KubeletConfiguration{
		TypeMeta:                 typeMeta,
		CgroupDriver:             "systemd",
		ContainerRuntimeEndpoint: ContainerRuntimeSocket,
		// The security settings (authentication, authorization, ports,
		// certificates) are the invariants of invariants.go.
		HealthzPort:        ptr(int32(10248)),
		ProviderID:         ProviderID(f),
		ClusterDNS:         slices.Clone(c.Cluster.DNS),
		ClusterDomain:      c.Cluster.Domain,
		MaxPods:            c.Kubelet.MaxPods,
		RegisterWithTaints: taints,
		// No static pods: everything a node runs comes from the API server.
		StaticPodPath: "",
		FailSwapOn:    ptr(true),
		// drover images resolve through systemd-resolved, whose
		// /etc/resolv.conf names the 127.0.0.53 stub that pods cannot
		// reach; the upstream servers are in this file.
		ResolverConfig: ptr("/run/systemd/resolve/resolv.conf"),
		// After a reboot the Node still holds the previous boot's
		// Ready=True, so the kubelet's fast status update (which posts
		// only while the Node is not Ready) does nothing, and this boot's
		// Ready waits for the periodic sync: 9-12 s after the kubelet had
		// its certificate at the default 10 s. With the node lease as the
		// heartbeat, the sync writes the status only when it changed (or
		// every nodeStatusReportFrequency, 5 min), so a shorter period
		// costs a local computation, not API server writes.
		NodeStatusUpdateFrequency:       metav1.Duration{Duration: NodeStatusUpdateFrequency},
		ShutdownGracePeriod:             metav1.Duration{Duration: ShutdownGracePeriod},
		ShutdownGracePeriodCriticalPods: metav1.Duration{Duration: ShutdownGracePeriodCriticalPods},
		// The kubelet's own default, written out: a file that left it
		// unset reads "0s", which CIS ACK 4.2.5 (not 0) fails when an
		// auditor reads the file instead of /configz.
		StreamingConnectionIdleTimeout: metav1.Duration{Duration: 4 * time.Hour},
	}
	if len(f.CachedRepositories) > 0 && verifiesPulledImages(f.KubeletVersion) {
		// A cached image is on the node for every pod, as a preloaded
		// image is under the kubelet's default policy
		// (NeverVerifyPreloadedImages). But that default counts an image
		// as preloaded only while the kubelet has no pull record of its
		// image ID: once it pulled the same content under another name (a
		// registry's other endpoint, a mirror), a pod naming the cached
		// repository must pull again to show its credentials, and with
		// the registry unreachable it never starts. The allowlist exempts
		// the cached repositories whatever the kubelet pulled; every other
		// image present on the node is verified, as the default does for
		// images the kubelet pulled (drover preloads nothing else the
		// kubelet runs: the sandbox image is containerd's).
		kc.ImagePullCredentialsVerificationPolicy = kubeletv1beta1.NeverVerifyAllowlistedImages
		kc.PreloadedImagesVerificationAllowlist = slices.Clone(f.CachedRepositories)
	}
	if r, ok := Reserve(f.CPUs, f.MemTotal); ok {
		kc.KubeReserved, kc.SystemReserved, kc.EvictionHard = r.KubeReserved, r.SystemReserved, r.EvictionHard
		kc.PodPidsLimit = ptr(r.PodPidsLimit)
	}
	setInvariants(&kc)
	if len(c.Kubelet.Config) > 0 {
		// Parse checked the overrides against the type and the
		// allowlist already; these checks only guard against a Config
		// built by hand.
		var top map[string]json.RawMessage
		if err := json.Unmarshal(c.Kubelet.Config, &top); err != nil {
			return nil, fmt.Errorf("merging kubelet.config into the kubelet configuration: %w", err)
		}
		known := jsonFields(kubeletConfType)
		for _, name := range slices.Sorted(maps.Keys(top)) {
			if _, isField := known[name]; !isField {
				continue // the strict decode below names it
			}
			if f, drovers := droverKubeletField(name); drovers {
				return nil, fmt.Errorf("rendering the kubelet configuration: kubelet.config.%s: %s", name, f.message())
			}
		}
		dec := json.NewDecoder(bytes.NewReader(c.Kubelet.Config))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&kc); err != nil {
			return nil, fmt.Errorf("merging kubelet.config into the kubelet configuration: %w", err)
		}
		kc.TypeMeta = typeMeta
		kc.ProviderID = ProviderID(f)
	}
	// Parse refused overrides that break an invariant; this guards a
	// Config built by hand.
	if broken := brokenInvariants(&kc); len(broken) > 0 {
		return nil, fmt.Errorf("rendering the kubelet configuration: kubelet.config.%s %s", broken[0].field, broken[0].message())
	}
	out, err := yaml.Marshal(&kc)
	if err != nil {
		return nil, fmt.Errorf("encoding the kubelet configuration: %w", err)
	}
	return out, nil
}

// NodeStatusUpdateFrequency is how often the kubelet computes the node's
// status (KubeletConfig); kubelet.config can set another.
const NodeStatusUpdateFrequency = 4 * time.Second

func ptr[T any](v T) *T { return &v }

// verifiesPulledImages says whether a kubelet of this version verifies a
// pod's credentials for an image already on the node, and so takes
// imagePullCredentialsVerificationPolicy: its feature gate
// KubeletEnsureSecretPulledImages is beta and on from 1.35, alpha and off
// before (kubernetes.io, feature gates), and drover sets no gates
// (featureGates is drover's). With the gate off the kubelet refuses a
// configuration that sets the policy or its allowlist, so an unknown
// version sets neither.
func verifiesPulledImages(version string) bool {
	return semver.IsValid(version) && semver.Compare(semver.Canonical(version), "v1.35.0") >= 0
}

// KubeletFlags gives the kubelet's command-line flags for what the
// configuration file cannot say, sorted. nodeIP is the address the Node
// reports; empty means the instance's private IPv4.
func KubeletFlags(c *Config, f Facts, nodeIP string) ([]string, error) {
	labels, err := NodeLabels(c, f)
	if err != nil {
		return nil, fmt.Errorf("rendering the kubelet flags: %w", err)
	}
	flags := []string{
		"--bootstrap-kubeconfig=" + BootstrapKubeconfigPath,
		"--cert-dir=" + CertDir,
		"--config=" + KubeletConfigPath,
		"--kubeconfig=" + KubeconfigPath,
	}
	if f.Hostname != "" {
		// ECS hostnames carry upper case (iZbp1…Z); a Node name may not.
		flags = append(flags, "--hostname-override="+strings.ToLower(f.Hostname))
	}
	if nodeIP == "" {
		nodeIP = f.PrivateIPv4
	}
	if nodeIP != "" {
		a, err := netip.ParseAddr(nodeIP)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("rendering the kubelet flags: node IP %q is not an IP address", nodeIP)
		}
		flags = append(flags, "--node-ip="+a.String())
	}
	cp, err := credentialProviderFlags(c, f)
	if err != nil {
		return nil, fmt.Errorf("rendering the kubelet flags: %w", err)
	}
	flags = append(flags, cp...)
	if len(labels) > 0 {
		pairs := make([]string, 0, len(labels))
		for k, v := range labels {
			pairs = append(pairs, k+"="+v)
		}
		slices.Sort(pairs)
		flags = append(flags, "--node-labels="+strings.Join(pairs, ","))
	}
	slices.Sort(flags)
	return flags, nil
}

type kubeconfig struct {
	APIVersion     string         `json:"apiVersion"`
	Kind           string         `json:"kind"`
	Clusters       []namedCluster `json:"clusters"`
	Users          []namedUser    `json:"users"`
	Contexts       []namedContext `json:"contexts"`
	CurrentContext string         `json:"current-context"`
	Preferences    struct{}       `json:"preferences"`
}

type namedCluster struct {
	Name    string `json:"name"`
	Cluster struct {
		Server                   string `json:"server"`
		CertificateAuthorityData []byte `json:"certificate-authority-data"`
	} `json:"cluster"`
}

type namedUser struct {
	Name string `json:"name"`
	User struct {
		Token string `json:"token"`
	} `json:"user"`
}

type namedContext struct {
	Name    string `json:"name"`
	Context struct {
		Cluster string `json:"cluster"`
		User    string `json:"user"`
	} `json:"context"`
}

// BootstrapKubeconfig renders the kubeconfig the kubelet uses once, to
// request its client certificate: the server, the CA and the bootstrap
// token. A node file that only pins the CA by caHash has no CA to embed:
// the join discovers the CA, keeps the certificate PinnedCA selects and
// sets Cluster.CAData first.
func BootstrapKubeconfig(c *Config) ([]byte, error) {
	if c.Cluster.CAData == "" {
		return nil, errors.New("rendering the bootstrap kubeconfig: the cluster CA is not known (the node file pins it by caHash only); discover it, keep the certificate PinnedCA selects and set Cluster.CAData")
	}
	if c.Cluster.Redacted() {
		return nil, errors.New("rendering the bootstrap kubeconfig: the node's bootstrap token was redacted once the kubelet had its certificate, and the user-data with the token is not available to bootstrap again (see docs/agent.md, \"Secrets\"); replace the instance")
	}
	kc := kubeconfig{APIVersion: "v1", Kind: "Config", CurrentContext: "default"}
	var cl namedCluster
	cl.Name = "default"
	cl.Cluster.Server = c.Cluster.Server
	cl.Cluster.CertificateAuthorityData = []byte(c.Cluster.CAData)
	var u namedUser
	u.Name = "kubelet-bootstrap"
	u.User.Token = c.Cluster.BootstrapToken
	var ctx namedContext
	ctx.Name = "default"
	ctx.Context.Cluster = cl.Name
	ctx.Context.User = u.Name
	kc.Clusters = []namedCluster{cl}
	kc.Users = []namedUser{u}
	kc.Contexts = []namedContext{ctx}
	out, err := yaml.Marshal(&kc)
	if err != nil {
		return nil, fmt.Errorf("encoding the bootstrap kubeconfig: %w", err)
	}
	return out, nil
}

// CAHash gives the pin of a CA certificate in the form cluster.caHash takes:
// "sha256:" and the hex SHA-256 of its DER SubjectPublicKeyInfo.
func CAHash(certPEM []byte) (string, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return "", errors.New("computing the CA pin: no PEM CERTIFICATE block found")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return "", fmt.Errorf("computing the CA pin: parsing the certificate: %w", err)
	}
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// PinnedCA returns, as PEM, the one certificate of a bundle whose public
// key matches the pin, as kubeadm's discovery keeps it: trusting the whole
// bundle would let a bundle "attacker CA + genuine CA" pass the pin and
// then trust the attacker's CA too.
func PinnedCA(certsPEM []byte, pin string) ([]byte, error) {
	pin = strings.ToLower(pin)
	rest := certsPEM
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		one := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: block.Bytes})
		got, err := CAHash(one)
		if err != nil {
			return nil, err
		}
		if got == pin {
			return one, nil
		}
	}
	return nil, fmt.Errorf("checking the cluster CA against cluster.caHash %s: no certificate matches; the API server is not the one the node file names, or the pin is stale", pin)
}
