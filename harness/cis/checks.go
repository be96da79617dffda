package cis

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

type kc = kubeletv1beta1.KubeletConfiguration

// checks is section 4 of CIS ACK 1.0 in its order (the audits and
// expectations of kube-bench's cfg/ack-1.0/node.yaml), then the kubelet
// checks CIS Kubernetes 1.9 (cfg/cis-1.9/node.yaml) added.
var checks = []check{
	{id: "4.1.1", benchmark: ACK, kind: Automated,
		title: "kubelet service file permissions are 644 or more restrictive",
		judge: func(v *view) (Status, string) { return v.unitFiles(v.modeAtMost) }},
	{id: "4.1.2", benchmark: ACK, kind: Automated,
		title: "kubelet service file ownership is root:root",
		judge: func(v *view) (Status, string) {
			return v.unitFiles(func(_ uint32, p ...string) (Status, string) { return v.ownedByRoot(p...) })
		}},
	{id: "4.1.3", benchmark: ACK, kind: Manual,
		title:  "proxy kubeconfig file permissions are 644 or more restrictive, if it exists",
		advice: "a kube-proxy DaemonSet's kubeconfig is in its ConfigMap and service account, outside the node image",
		judge:  func(v *view) (Status, string) { return v.proxyFiles(v.modeAtMost) }},
	{id: "4.1.4", benchmark: ACK, kind: Manual,
		title:  "proxy kubeconfig file ownership is root:root, if it exists",
		advice: "a kube-proxy DaemonSet's kubeconfig is in its ConfigMap and service account, outside the node image",
		judge: func(v *view) (Status, string) {
			return v.proxyFiles(func(_ uint32, p ...string) (Status, string) { return v.ownedByRoot(p...) })
		}},
	{id: "4.1.5", benchmark: ACK, kind: Automated,
		title: "--kubeconfig kubelet.conf file permissions are 644 or more restrictive",
		judge: func(v *view) (Status, string) { return v.flagFileCheck("kubeconfig", v.modeAtMost) }},
	{id: "4.1.6", benchmark: ACK, kind: Manual,
		title:  "--kubeconfig kubelet.conf file ownership is root:root",
		advice: "the kubelet writes this file itself after its TLS bootstrap; it must stay root's",
		judge: func(v *view) (Status, string) {
			return v.flagFileCheck("kubeconfig", func(_ uint32, p ...string) (Status, string) { return v.ownedByRoot(p...) })
		}},
	{id: "4.1.7", benchmark: ACK, kind: Manual,
		title:  "certificate authorities file permissions are 644 or more restrictive",
		advice: "the file is the cluster CA the node was pinned to (cluster.caData or cluster.caHash), rendered by the agent at every boot",
		judge:  func(v *view) (Status, string) { return v.clientCA(v.modeAtMost) }},
	{id: "4.1.8", benchmark: ACK, kind: Manual,
		title:  "client certificate authorities file ownership is root:root",
		advice: "the file is the cluster CA the node was pinned to, rendered by the agent at every boot",
		judge: func(v *view) (Status, string) {
			return v.clientCA(func(_ uint32, p ...string) (Status, string) { return v.ownedByRoot(p...) })
		}},
	{id: "4.1.9", benchmark: ACK, kind: Automated,
		title: "kubelet --config configuration file permissions are 644 or more restrictive",
		judge: func(v *view) (Status, string) { return v.flagFileCheck("config", v.modeAtMost) }},
	{id: "4.1.10", benchmark: ACK, kind: Automated,
		title: "kubelet --config configuration file ownership is root:root",
		judge: func(v *view) (Status, string) {
			return v.flagFileCheck("config", func(_ uint32, p ...string) (Status, string) { return v.ownedByRoot(p...) })
		}},
	{id: "4.2.1", benchmark: ACK, kind: Automated,
		title: "--anonymous-auth is false",
		judge: func(v *view) (Status, string) {
			return v.judgeSetting(setting{flag: "anonymous-auth", path: "authentication.anonymous.enabled",
				fromConfig: func(k *kc) (string, bool) { return boolText(k.Authentication.Anonymous.Enabled) },
				ok:         isValue("false")})
		}},
	{id: "4.2.2", benchmark: ACK, kind: Automated,
		title: "--authorization-mode is not AlwaysAllow",
		judge: func(v *view) (Status, string) {
			return v.judgeSetting(setting{flag: "authorization-mode", path: "authorization.mode",
				fromConfig: func(k *kc) (string, bool) {
					return string(k.Authorization.Mode), k.Authorization.Mode != ""
				},
				ok: func(s string) bool { return !slices.Contains(strings.Split(s, ","), "AlwaysAllow") }})
		}},
	{id: "4.2.3", benchmark: ACK, kind: Automated,
		title: "--client-ca-file is set as appropriate",
		judge: func(v *view) (Status, string) {
			return v.judgeSetting(setting{flag: "client-ca-file", path: "authentication.x509.clientCAFile",
				fromConfig: func(k *kc) (string, bool) {
					return k.Authentication.X509.ClientCAFile, k.Authentication.X509.ClientCAFile != ""
				},
				ok: func(s string) bool { return s != "" }})
		}},
	{id: "4.2.4", benchmark: ACK, kind: Manual,
		title:  "--read-only-port is 0",
		advice: "nothing may listen on 10255 (the smoke's socket check and the agent's guard check it too)",
		judge: func(v *view) (Status, string) {
			// configz omits a zero readOnlyPort: not set is 0.
			return v.judgeSetting(setting{flag: "read-only-port", path: "readOnlyPort", unsetOK: true,
				fromConfig: func(k *kc) (string, bool) { return strconv.Itoa(int(k.ReadOnlyPort)), k.ReadOnlyPort != 0 },
				ok:         isValue("0")})
		}},
	{id: "4.2.5", benchmark: ACK, kind: Manual,
		title:  "--streaming-connection-idle-timeout is not 0",
		advice: "the kubelet's default (4h) closes an idle exec or port-forward stream after 4 hours; shorten it in drover if the pool's policy wants",
		judge: func(v *view) (Status, string) {
			return v.judgeSetting(setting{flag: "streaming-connection-idle-timeout", path: "streamingConnectionIdleTimeout", unsetOK: true,
				fromConfig: func(k *kc) (string, bool) {
					// /configz is defaulted: 0 here is an explicit 0.
					return k.StreamingConnectionIdleTimeout.Duration.String(), true
				},
				ok: func(s string) bool { return s != "0" && s != "0s" }})
		}},
	{id: "4.2.6", benchmark: ACK, kind: Manual,
		title:  "--protect-kernel-defaults is true",
		advice: "the agent sets the kernel tunables the kubelet expects before it starts (nodeconfig.KubeletSysctls)",
		judge: func(v *view) (Status, string) {
			return v.judgeSetting(setting{flag: "protect-kernel-defaults", path: "protectKernelDefaults",
				fromConfig: func(k *kc) (string, bool) { return "true", k.ProtectKernelDefaults },
				ok:         isValue("true")})
		}},
	{id: "4.2.7", benchmark: ACK, kind: Automated,
		title: "--make-iptables-util-chains is true",
		judge: func(v *view) (Status, string) {
			return v.judgeSetting(setting{flag: "make-iptables-util-chains", path: "makeIPTablesUtilChains", unsetOK: true,
				fromConfig: func(k *kc) (string, bool) { return boolText(k.MakeIPTablesUtilChains) },
				ok:         isValue("true")})
		}},
	{id: "4.2.8", benchmark: ACK, kind: Manual,
		title:  "--event-qps is 0 or a level which ensures appropriate event capture",
		advice: "whether the kubelet's rate (its default, 50 events/s, burst 100) captures the events the cluster's audit needs",
		judge: func(v *view) (Status, string) {
			return v.judgeSetting(setting{flag: "event-qps", path: "eventRecordQPS", unsetOK: true,
				fromConfig: func(k *kc) (string, bool) {
					if k.EventRecordQPS == nil {
						return "", false
					}
					return strconv.Itoa(int(*k.EventRecordQPS)), true
				},
				ok: func(s string) bool { n, err := strconv.Atoi(s); return err == nil && n >= 0 }})
		}},
	{id: "4.2.9", benchmark: ACK, kind: Manual,
		title:  "--tls-cert-file and --tls-private-key-file are set as appropriate",
		advice: "drover uses neither these settings nor serverTLSBootstrap, on purpose (docs/cis.md)",
		judge:  (*view).servingCert},
	{id: "4.2.10", benchmark: ACK, kind: Manual,
		title:  "the kubelet only uses strong cryptographic ciphers (--tls-cipher-suites)",
		advice: "TLS 1.3 suites are not configurable and all strong",
		judge:  (*view).ciphers},
	{id: "4.2.10", benchmark: K8s9, kind: Automated,
		title: "--rotate-certificates is not false",
		judge: func(v *view) (Status, string) {
			return v.judgeSetting(setting{flag: "rotate-certificates", path: "rotateCertificates",
				fromConfig: func(k *kc) (string, bool) { return "true", k.RotateCertificates },
				ok:         isValue("true")})
		}},
	{id: "4.2.11", benchmark: K8s9, kind: Manual,
		title:  "RotateKubeletServerCertificate is true",
		advice: "the gate rotates the serving certificate the kubelet requests from the cluster (serverTLSBootstrap)",
		judge: func(v *view) (Status, string) {
			if v.kc == nil {
				return Fail, v.kcError
			}
			if !v.kc.ServerTLSBootstrap {
				// The gate decides only whether the kubelet renews a
				// serving certificate it got from a CSR.
				return NotApplicable, "/configz serverTLSBootstrap=false: the kubelet requests no serving certificate from the cluster, so there is none for the gate to rotate; it serves the self-signed pair the agent writes to --cert-dir (4.2.9)"
			}
			st, s := Pass, "/configz featureGates.RotateKubeletServerCertificate not set (the kubelet's default, true)"
			if on, set := v.kc.FeatureGates["RotateKubeletServerCertificate"]; set {
				s = fmt.Sprintf("/configz featureGates.RotateKubeletServerCertificate=%v", on)
				if !on {
					st = Fail
				}
			}
			if g := v.flags["feature-gates"]; strings.Contains(g, "RotateKubeletServerCertificate=false") {
				st, s = Fail, s+"; --feature-gates="+g
			}
			return st, s
		}},
	{id: "4.2.13", benchmark: K8s9, kind: Manual,
		title:  "a limit is set on pod PIDs",
		advice: "the limit is sized to the instance at each boot (docs/node-config.md); whether it suits the pool's workloads",
		judge: func(v *view) (Status, string) {
			return v.judgeSetting(setting{flag: "pod-max-pids", path: "podPidsLimit",
				fromConfig: func(k *kc) (string, bool) {
					if k.PodPidsLimit == nil {
						return "", false
					}
					return strconv.FormatInt(*k.PodPidsLimit, 10), true
				},
				// -1 is the kubelet's "unlimited", 0 its "unset".
				ok: func(s string) bool { n, err := strconv.ParseInt(s, 10, 64); return err == nil && n > 0 }})
		}},
}

// unitFiles applies a file check to every file of kubelet.service as
// systemd loaded it: kube-bench's $kubeletsvc is the file holding the
// kubelet's flags, which on drover are the unit's fragment, its drop-ins
// and its EnvironmentFile (/etc/default/kubelet, KUBELET_ARGS).
func (v *view) unitFiles(fn func(uint32, ...string) (Status, string)) (Status, string) {
	if v.ev.Unit.Fragment == "" {
		return Fail, "systemd has no unit file for kubelet.service"
	}
	return fn(0o644, v.ev.Unit.Paths()...)
}

// proxyFiles applies a file check to the kubeconfig of every kube-proxy on
// the node.
func (v *view) proxyFiles(fn func(uint32, ...string) (Status, string)) (Status, string) {
	if len(v.ev.KubeProxy) == 0 {
		return NotApplicable, "no kube-proxy runs on the node: the image ships none, and a cluster's kube-proxy runs as a DaemonSet whose kubeconfig is in its pod, not a node file"
	}
	var paths []string
	for _, p := range v.ev.KubeProxy {
		if p.Kubeconfig == "" {
			return Fail, fmt.Sprintf("kube-proxy (pid %d) has no --kubeconfig to judge", p.PID)
		}
		paths = append(paths, p.Kubeconfig)
	}
	return fn(0o644, paths...)
}

// flagFileCheck applies a file check to the file the kubelet's --name
// flag names.
func (v *view) flagFileCheck(name string, fn func(uint32, ...string) (Status, string)) (Status, string) {
	p := v.flagFile(name)
	if p == "" {
		return Fail, "the kubelet runs without --" + name
	}
	st, s := fn(0o644, p)
	return st, "--" + name + " " + s
}

// clientCA applies a file check to the kubelet's client CA file.
func (v *view) clientCA(fn func(uint32, ...string) (Status, string)) (Status, string) {
	p, from := v.clientCAFile()
	if p == "" {
		if v.kc == nil {
			return Fail, v.kcError
		}
		return Fail, "the kubelet has no client CA file (--client-ca-file, authentication.x509.clientCAFile)"
	}
	st, s := fn(0o644, p)
	return st, from + " " + s
}

// servingCert judges 4.2.9. drover names no serving pair: the kubelet
// serves the one in its --cert-dir (kubelet.crt, kubelet.key), which the
// agent writes self-signed. The check fails if a pair named by the
// settings, or the --cert-dir pair, is missing, or the key is readable by
// others than root.
func (v *view) servingCert() (Status, string) {
	if v.kc == nil {
		return Fail, v.kcError
	}
	cert, key := v.kc.TLSCertFile, v.kc.TLSPrivateKeyFile
	if f := v.flags["tls-cert-file"]; f != "" {
		cert = f
	}
	if f := v.flags["tls-private-key-file"]; f != "" {
		key = f
	}
	s := "tlsCertFile and tlsPrivateKeyFile set"
	if cert == "" && key == "" {
		dir := v.flags["cert-dir"]
		if dir == "" {
			return Fail, "neither tlsCertFile/tlsPrivateKeyFile nor --cert-dir: the kubelet serves a certificate it keeps in memory"
		}
		cert, key = dir+"/kubelet.crt", dir+"/kubelet.key"
		s = "tlsCertFile and tlsPrivateKeyFile unset, serverTLSBootstrap " + strconv.FormatBool(v.kc.ServerTLSBootstrap) + ": the kubelet serves --cert-dir's pair"
	} else if cert == "" || key == "" {
		return Fail, "only one of tlsCertFile and tlsPrivateKeyFile is set"
	}
	cst, cs := v.modeAtMost(0o644, cert)
	kst, ks := v.modeAtMost(0o600, key)
	ost, os := v.ownedByRoot(key)
	st := Pass
	if cst != Pass || kst != Pass || ost != Pass {
		st = Fail
	}
	return st, fmt.Sprintf("%s: %s; %s; key owner %s", s, cs, ks, os)
}

// ciphers judges 4.2.10 by the configuration and by its effect: every
// TLS 1.2 suite the kubelet's API accepted must be one the benchmark
// permits (a configuration naming none leaves Go's defaults, which
// include CBC suites it does not).
func (v *view) ciphers() (Status, string) {
	if v.kc == nil {
		return Fail, v.kcError
	}
	st := Pass
	set := v.kc.TLSCipherSuites
	if f := v.flags["tls-cipher-suites"]; f != "" {
		set = strings.Split(f, ",")
	}
	s := "tlsCipherSuites " + strings.Join(set, ",")
	if len(set) == 0 {
		st, s = Fail, "tlsCipherSuites not set (Go's defaults)"
	}
	for _, c := range set {
		if !cipherAllowed(c) {
			st, s = Fail, s+"; "+c+" is not permitted"
		}
	}
	if v.ev.TLS12Offered == 0 {
		return Fail, s + "; the kubelet's TLS 1.2 suites were not probed"
	}
	var bad []string
	for _, c := range v.ev.TLS12Accepted {
		if !cipherAllowed(c) {
			bad = append(bad, c)
		}
	}
	if len(v.ev.TLS12Accepted) == 0 {
		return Fail, s + fmt.Sprintf("; the kubelet's API accepted none of %d TLS 1.2 suites offered", v.ev.TLS12Offered)
	}
	s += fmt.Sprintf("; 127.0.0.1:10250 accepted %d of %d TLS 1.2 suites offered one at a time", len(v.ev.TLS12Accepted), v.ev.TLS12Offered)
	if len(bad) > 0 {
		st, s = Fail, s+", not permitted: "+strings.Join(bad, ", ")
	}
	return st, s
}
