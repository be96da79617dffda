package nodeconfig

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// Each check returns "" when the value is fine, else the message of the
// problem, phrased so the user knows what to write instead.

var (
	bootstrapToken = regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`)
	redactedToken  = regexp.MustCompile(`^[a-z0-9]{6}\.` + RedactedSecret + `$`)
	caHashRE       = regexp.MustCompile(`^sha256:[0-9a-fA-F]{64}$`)
	dnsLabel       = `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
	dnsSubdomain   = regexp.MustCompile(`^` + dnsLabel + `(\.` + dnsLabel + `)*$`)
	labelName      = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)
	registryHost   = regexp.MustCompile(`^` + dnsLabel + `(\.` + dnsLabel + `)*(:[0-9]{1,5})?$`)
	// The distribution reference grammar, trimmed to what a sandbox image
	// needs: [host[:port]/]path[:tag][@sha256:digest].
	imageRef = regexp.MustCompile(`^` +
		`([a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?(\.[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?)*(:[0-9]+)?/)?` +
		`[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*` +
		`(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?` +
		`(@sha256:[a-f0-9]{64})?$`)
)

func checkServer(v string) string {
	u, err := url.Parse(v)
	if err != nil {
		return fmt.Sprintf("not a URL (%v); write it as https://<host>:<port>", err)
	}
	if u.Scheme != "https" {
		return fmt.Sprintf("must be an https URL (the kubelet checks the API server against the cluster CA), got %q", v)
	}
	if u.Hostname() == "" {
		return "must name a host, e.g. https://10.0.0.1:6443"
	}
	if u.User != nil {
		return "must not carry credentials; the bootstrap token authenticates the node"
	}
	if u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return fmt.Sprintf("must not have a query or fragment, got %q", v)
	}
	if msg := checkPort(u.Port()); msg != "" {
		return msg
	}
	return ""
}

func checkPort(port string) string {
	if port == "" {
		return ""
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Sprintf("port %q is not in 1-65535", port)
	}
	return ""
}

func checkCAData(v string) string {
	rest := []byte(v)
	n := 0
	for {
		block, r := pem.Decode(rest)
		if block == nil {
			break
		}
		rest = r
		n++
		if block.Type != "CERTIFICATE" {
			return fmt.Sprintf("PEM block %d is a %s; only the CA's CERTIFICATE blocks belong here", n, block.Type)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return fmt.Sprintf("PEM certificate %d does not parse (%v); copy the cluster's ca.crt again", n, err)
		}
	}
	if n == 0 {
		return "must hold the cluster CA as PEM (-----BEGIN CERTIFICATE-----), e.g. the contents of /etc/kubernetes/pki/ca.crt"
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return "has text after the last PEM certificate; remove it"
	}
	return ""
}

// checkCAHash returns the pin in lower case, as CAHash computes it.
func checkCAHash(v string) (string, string) {
	if !caHashRE.MatchString(v) {
		return v, "must be sha256:<64 hex digits>, the SHA-256 of the CA certificate's public key info (kubeadm's --discovery-token-ca-cert-hash)"
	}
	return strings.ToLower(v), ""
}

func checkIP(v string) (string, string) {
	a, err := netip.ParseAddr(v)
	if err != nil || a.Zone() != "" {
		return v, fmt.Sprintf("must be an IP address, got %q", v)
	}
	return a.String(), ""
}

func checkDomain(v string) string {
	if len(v) > 253 || !dnsSubdomain.MatchString(v) {
		return fmt.Sprintf("must be a lower-case DNS domain such as cluster.local, got %q", v)
	}
	return ""
}

// checkLabelKey checks the syntax of a label or taint key: [prefix/]name.
func checkLabelKey(key string) string {
	prefix, name, hasPrefix := strings.Cut(key, "/")
	if !hasPrefix {
		name, prefix = prefix, ""
	}
	switch {
	case hasPrefix && (prefix == "" || len(prefix) > 253 || !dnsSubdomain.MatchString(prefix)):
		return fmt.Sprintf("invalid key %q: the prefix before / must be a lower-case DNS subdomain (example.com/role)", key)
	case len(name) > 63 || !labelName.MatchString(name):
		return fmt.Sprintf("invalid key %q: the name must be 1-63 characters of letters, digits, '-', '_' and '.', starting and ending with a letter or digit", key)
	}
	return ""
}

func checkLabelValue(v string) string {
	if v == "" {
		return ""
	}
	if len(v) > 63 || !labelName.MatchString(v) {
		return fmt.Sprintf("invalid value %q: at most 63 characters of letters, digits, '-', '_' and '.', starting and ending with a letter or digit", v)
	}
	return ""
}

// Labels drover sets itself from the ECS metadata (see NodeLabels), with the
// deprecated aliases that would contradict them.
var reservedLabels = []string{
	"topology.kubernetes.io/region",
	"topology.kubernetes.io/zone",
	"node.kubernetes.io/instance-type",
	"failure-domain.beta.kubernetes.io/region",
	"failure-domain.beta.kubernetes.io/zone",
	"beta.kubernetes.io/instance-type",
	LabelSecureBoot,
	LabelBuildID,
	LabelNodeConfig,
}

// kubeletLabels are the keys under kubernetes.io and k8s.io that the kubelet
// accepts in --node-labels (k8s.io/kubernetes pkg/kubelet/apis
// IsKubeletLabel); any other key there makes the kubelet exit at start.
var kubeletLabels = []string{
	"kubernetes.io/hostname",
	"kubernetes.io/os",
	"kubernetes.io/arch",
	"beta.kubernetes.io/os",
	"beta.kubernetes.io/arch",
	"beta.kubernetes.io/instance-type",
	"node.kubernetes.io/instance-type",
	"topology.kubernetes.io/region",
	"topology.kubernetes.io/zone",
	"failure-domain.beta.kubernetes.io/region",
	"failure-domain.beta.kubernetes.io/zone",
}

func inNamespace(ns, domain string) bool {
	return ns == domain || strings.HasSuffix(ns, "."+domain)
}

func checkUserLabelKey(key string) string {
	if msg := checkLabelKey(key); msg != "" {
		return msg
	}
	if contains(reservedLabels, key) {
		return "reserved: drover sets this label from the ECS instance metadata; remove it"
	}
	ns, _, _ := strings.Cut(key, "/")
	if !strings.Contains(key, "/") {
		ns = ""
	}
	restricted := inNamespace(ns, "kubernetes.io") || inNamespace(ns, "k8s.io")
	allowed := contains(kubeletLabels, key) || inNamespace(ns, "kubelet.kubernetes.io") || inNamespace(ns, "node.kubernetes.io")
	if restricted && !allowed {
		return fmt.Sprintf("the kubelet may not set labels under %s/ (only under node.kubernetes.io/, kubelet.kubernetes.io/ and a few well-known keys); use your own prefix or label the Node from the control plane", ns)
	}
	return ""
}

var taintEffects = []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}

func parseTaint(v string) (Taint, string) {
	i := strings.LastIndexByte(v, ':')
	if i < 0 {
		return Taint{}, fmt.Sprintf("must be key[=value]:effect, got %q", v)
	}
	kv, effect := v[:i], v[i+1:]
	key, value, _ := strings.Cut(kv, "=")
	t := Taint{Key: key, Value: value, Effect: effect}
	if !contains(taintEffects, effect) {
		return t, fmt.Sprintf("invalid taint effect %q; use NoSchedule, PreferNoSchedule or NoExecute", effect)
	}
	if msg := checkLabelKey(key); msg != "" {
		return t, "taint " + msg
	}
	if msg := checkLabelValue(value); msg != "" {
		return t, "taint " + msg
	}
	return t, ""
}

func checkImage(v string) string {
	if len(v) > 255 || !imageRef.MatchString(v) {
		return fmt.Sprintf("not an image reference: %q (e.g. %s)", v, DefaultSandboxImage)
	}
	return ""
}

func checkRegistryHost(host string) string {
	if !registryHost.MatchString(host) {
		return "must be a registry host such as docker.io or registry.example.com:5000"
	}
	_, port, _ := strings.Cut(host, ":")
	return checkPort(port)
}

func checkMirrorURL(v string) string {
	u, err := url.Parse(v)
	if err != nil {
		return fmt.Sprintf("not a URL (%v); write it as http(s)://<host>[:<port>]", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("must be an http or https URL, got %q", v)
	case u.Hostname() == "":
		return fmt.Sprintf("must name a host, got %q", v)
	case u.User != nil:
		return "must not carry credentials"
	case u.RawQuery != "" || u.Fragment != "" || u.Opaque != "":
		return fmt.Sprintf("must not have a query or fragment, got %q", v)
	case u.Path != "" && u.Path != "/":
		return fmt.Sprintf("must not have a path, got %q; containerd adds /v2/ itself", v)
	}
	return checkPort(u.Port())
}
