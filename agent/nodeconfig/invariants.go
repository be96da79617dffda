package nodeconfig

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	sigsyaml "sigs.k8s.io/yaml"
)

// A kubeletInvariant is a setting of the rendered KubeletConfiguration the
// node's security rests on: the kubelet's API (port 10250) must stay
// behind the cluster's authentication and authorization, and nothing
// unauthenticated may listen off the node. KubeletConfig sets each one.
// Every invariant's field is drover's (allowlist.go), so Parse refuses a
// kubelet.config that sets it at all; the table is what KubeletConfig
// checks again after the merge (a Config built by hand) and what the
// agent checks in the configuration the kubelet loaded.
type kubeletInvariant struct {
	field string // JSON path below kubelet.config
	want  string // what it must be, as the message says it
	why   string
	set   func(*kubeletv1beta1.KubeletConfiguration)
	holds func(*kubeletv1beta1.KubeletConfiguration) bool
}

var kubeletInvariants = []kubeletInvariant{
	{"authentication.anonymous.enabled", "false",
		"anonymous requests to the kubelet API would reach pods' logs, exec and the node's metrics without credentials",
		func(k *kubeletv1beta1.KubeletConfiguration) { k.Authentication.Anonymous.Enabled = ptr(false) },
		func(k *kubeletv1beta1.KubeletConfiguration) bool {
			return k.Authentication.Anonymous.Enabled != nil && !*k.Authentication.Anonymous.Enabled
		}},
	{"authentication.webhook.enabled", "true",
		"the kubelet checks bearer tokens (service accounts, users) with the API server; without it only client certificates would be checked, and differently from the cluster",
		func(k *kubeletv1beta1.KubeletConfiguration) { k.Authentication.Webhook.Enabled = ptr(true) },
		func(k *kubeletv1beta1.KubeletConfiguration) bool {
			return k.Authentication.Webhook.Enabled != nil && *k.Authentication.Webhook.Enabled
		}},
	{"authentication.x509.clientCAFile", CAFile,
		"client certificates must be those of the cluster CA the node was pinned to (cluster.caData or cluster.caHash)",
		func(k *kubeletv1beta1.KubeletConfiguration) { k.Authentication.X509.ClientCAFile = CAFile },
		func(k *kubeletv1beta1.KubeletConfiguration) bool { return k.Authentication.X509.ClientCAFile == CAFile }},
	{"authorization.mode", string(kubeletv1beta1.KubeletAuthorizationModeWebhook),
		"the API server's RBAC decides who may use the kubelet API; AlwaysAllow would let any authenticated caller exec into every pod",
		func(k *kubeletv1beta1.KubeletConfiguration) {
			k.Authorization.Mode = kubeletv1beta1.KubeletAuthorizationModeWebhook
		},
		func(k *kubeletv1beta1.KubeletConfiguration) bool {
			return k.Authorization.Mode == kubeletv1beta1.KubeletAuthorizationModeWebhook
		}},
	{"readOnlyPort", "0",
		"the read-only port (10255) serves pods and node metrics with no authentication at all",
		func(k *kubeletv1beta1.KubeletConfiguration) { k.ReadOnlyPort = 0 },
		func(k *kubeletv1beta1.KubeletConfiguration) bool { return k.ReadOnlyPort == 0 }},
	{"healthzBindAddress", "a loopback address (127.0.0.1 or ::1)",
		"healthz is unauthenticated: the agent polls it on 127.0.0.1:10248, and off the node it would only tell others about the kubelet; metrics are served on the authenticated port 10250, which has no bind address of its own",
		func(k *kubeletv1beta1.KubeletConfiguration) { k.HealthzBindAddress = "127.0.0.1" },
		func(k *kubeletv1beta1.KubeletConfiguration) bool {
			a, err := netip.ParseAddr(k.HealthzBindAddress)
			return err == nil && a.IsLoopback()
		}},
	{"protectKernelDefaults", "true",
		"the kubelet must not retune kernel settings behind the image's back; the agent sets the values the kubelet expects before it starts (nodeconfig.KubeletSysctls)",
		func(k *kubeletv1beta1.KubeletConfiguration) { k.ProtectKernelDefaults = true },
		func(k *kubeletv1beta1.KubeletConfiguration) bool { return k.ProtectKernelDefaults }},
	{"rotateCertificates", "true",
		"the client certificate from the bootstrap expires; without rotation the node drops out of the cluster and would need a new bootstrap token",
		func(k *kubeletv1beta1.KubeletConfiguration) { k.RotateCertificates = true },
		func(k *kubeletv1beta1.KubeletConfiguration) bool { return k.RotateCertificates }},
	{"tlsCipherSuites", "drover's ECDHE AES-GCM and ChaCha20 suites (" + strings.Join(KubeletCipherSuites, ",") + ")",
		"without it the kubelet API's TLS 1.2 takes Go's default suites, which include the CBC ones CIS ACK 4.2.10 does not permit; TLS 1.3's are all strong and not configurable",
		func(k *kubeletv1beta1.KubeletConfiguration) { k.TLSCipherSuites = slices.Clone(KubeletCipherSuites) },
		func(k *kubeletv1beta1.KubeletConfiguration) bool {
			return slices.Equal(k.TLSCipherSuites, KubeletCipherSuites)
		}},
	{"serverTLSBootstrap", "false",
		"drover kubelets serve with a self-signed certificate; serving-certificate CSRs are not approved automatically, so with it the kubelet API (logs, exec) would have no certificate",
		func(k *kubeletv1beta1.KubeletConfiguration) { k.ServerTLSBootstrap = false },
		func(k *kubeletv1beta1.KubeletConfiguration) bool { return !k.ServerTLSBootstrap }},
	{"tlsCertFile", "unset",
		"a serving certificate named here would have to come with its private key in the user-data, which anything reaching the metadata service can read",
		func(k *kubeletv1beta1.KubeletConfiguration) { k.TLSCertFile = "" },
		func(k *kubeletv1beta1.KubeletConfiguration) bool { return k.TLSCertFile == "" }},
	{"tlsPrivateKeyFile", "unset",
		"a serving key named here would have to be in the user-data, which anything reaching the metadata service can read",
		func(k *kubeletv1beta1.KubeletConfiguration) { k.TLSPrivateKeyFile = "" },
		func(k *kubeletv1beta1.KubeletConfiguration) bool { return k.TLSPrivateKeyFile == "" }},
}

// KubeletCipherSuites are the kubelet API's TLS 1.2 cipher suites: those
// of the CIS ACK benchmark's 4.2.10 with forward secrecy (ECDHE), leaving
// out its two static-RSA ones. The serving certificate is P-256, so the
// ECDSA ones are those negotiated; the RSA ones serve a pool that names an
// RSA pair, should drover ever let it.
var KubeletCipherSuites = []string{
	"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
	"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
	"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
}

// KubeletSysctls are the kernel settings the kubelet requires when
// protectKernelDefaults is on (it refuses to start if one differs, instead
// of setting it); the agent applies them before starting the kubelet.
func KubeletSysctls() map[string]string {
	return map[string]string{
		"vm.overcommit_memory":      "1",
		"vm.panic_on_oom":           "0",
		"kernel.panic":              "10",
		"kernel.panic_on_oops":      "1",
		"kernel.keys.root_maxkeys":  "1000000",
		"kernel.keys.root_maxbytes": "25000000",
	}
}

// setInvariants writes every invariant into kc.
func setInvariants(kc *kubeletv1beta1.KubeletConfiguration) {
	for _, inv := range kubeletInvariants {
		inv.set(kc)
	}
}

// brokenInvariants lists the invariants kc does not hold.
func brokenInvariants(kc *kubeletv1beta1.KubeletConfiguration) []kubeletInvariant {
	var out []kubeletInvariant
	for _, inv := range kubeletInvariants {
		if !inv.holds(kc) {
			out = append(out, inv)
		}
	}
	return out
}

func (inv kubeletInvariant) message() string {
	return fmt.Sprintf("may not be lowered: it must be %s (%s); remove it from kubelet.config", inv.want, inv.why)
}

// BrokenKubeletInvariants lists, as "field = want", the invariants a
// KubeletConfiguration document breaks: the check of the file the running
// kubelet loaded. A field the document leaves unset counts as broken,
// whatever the kubelet's default: the agent renders every one.
func BrokenKubeletInvariants(doc []byte) []string {
	var kc kubeletv1beta1.KubeletConfiguration
	if err := sigsyaml.Unmarshal(doc, &kc); err != nil {
		return []string{"a readable KubeletConfiguration (" + err.Error() + ")"}
	}
	var out []string
	for _, inv := range brokenInvariants(&kc) {
		out = append(out, inv.field+" = "+inv.want)
	}
	return out
}
