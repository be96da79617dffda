package nodeconfig

import (
	"fmt"
	"strings"
)

// kubelet.config is checked against an allowlist: every top-level field of
// KubeletConfiguration is in kubeletFields, either permitted (passed
// through to the kubelet, merged over what drover renders) or drover's
// (refused, naming the field, what it can do to the node and what to do
// instead). An allowlist rather than a list of forbidden fields because
// the type grows with every kubelet release (v0.36 added
// imagePullCredentialsVerificationPolicy, its allowlist and
// failCgroupV1 within a few releases): a new field is refused until
// someone decides, and TestKubeletFieldsCoverTheType fails on the
// module bump until the field is classified here. A drover field is
// refused even when restating drover's value: one way to say each thing
// keeps node files reviewable, and drover's value may change.
//
// The rules are per top-level field: authentication and authorization
// are drover's whole (a webhook cacheTTL decides how long a revoked
// token or a removed RBAC binding still opens the kubelet API).

// kubeletField is one top-level field of KubeletConfiguration.
type kubeletField struct {
	name    string
	drovers bool   // refused in kubelet.config
	why     string // what the field does to the node
	instead string // for a drover field: what to do instead
}

// Reasons shared by several fields.
const (
	tuning       = "resource, scheduling or performance tuning of the node's pods; does not reach the kubelet API's security, what the node runs or where it comes from"
	noStaticPods = "drover nodes run no static pods: everything comes from the API server, through its admission"
	askDrover    = "if a pool needs it, change drover (agent/nodeconfig/allowlist.go), not the user-data"
	cgroupLayout = "the cgroup layout the image, containerd's systemd cgroup driver and the agent's reservations rely on"
)

// kubeletFields lists every JSON field of KubeletConfiguration (v1beta1)
// in the type's order; docs/node-config.md's table is generated from it.
var kubeletFields = []kubeletField{
	{"apiVersion", true, "the document's type", "drover writes apiVersion and kind itself; remove it"},
	{"kind", true, "the document's type", "drover writes apiVersion and kind itself; remove it"},
	{"enableServer", true, "false turns off the kubelet API (10250): no logs or exec, and the agent's check of the port fails", askDrover},
	{"staticPodPath", true, "pods from a node directory bypass the API server's admission (Pod Security, policies) and run with any privilege; " + noStaticPods, "run the workload as a DaemonSet"},
	{"podLogsDir", true, "the kubelet writes container output, as root, wherever it points (e.g. into /etc or the kubelet's PKI)", askDrover},
	{"syncFrequency", false, tuning, ""},
	{"fileCheckFrequency", true, "only used with staticPodPath; " + noStaticPods, "remove it"},
	{"httpCheckFrequency", true, "only used with staticPodURL; " + noStaticPods, "remove it"},
	{"staticPodURL", true, "pods fetched from a URL bypass the API server's admission and run with any privilege; " + noStaticPods, "run the workload as a DaemonSet"},
	{"staticPodURLHeader", true, "headers (credentials) for staticPodURL; " + noStaticPods, "remove it"},
	{"address", true, "the kubelet API's bind address: the API server must reach it for logs and exec, and the agent probes it on 127.0.0.1", "restrict who reaches port 10250 with the security group"},
	{"port", true, "the kubelet API's port: the agent checks that 10250 refuses callers without credentials, and the API server reaches it through the Node's daemon endpoints", askDrover},
	{"readOnlyPort", true, "the read-only port (10255) serves pods and node metrics with no authentication at all", "read metrics through the authenticated port 10250"},
	{"tlsCertFile", true, "a serving certificate named here comes with its key in the user-data, which anything reaching the metadata service can read", "keep the kubelet's self-signed serving certificate"},
	{"tlsPrivateKeyFile", true, "a serving key named here would travel in the user-data, which anything reaching the metadata service can read", "keep the kubelet's self-signed serving certificate"},
	{"tlsCipherSuites", true, "lowers the kubelet API's TLS to weaker ciphers", askDrover},
	{"tlsCurvePreferences", true, "lowers the kubelet API's TLS key exchange", askDrover},
	{"tlsMinVersion", true, "lowers the kubelet API's TLS version", askDrover},
	{"rotateCertificates", true, "without rotation the bootstrap client certificate expires and the node drops out of the cluster", "remove it; the kubelet renews its certificate itself"},
	{"serverTLSBootstrap", true, "serving-certificate CSRs are not approved automatically: the kubelet API would have no certificate", askDrover},
	{"authentication", true, "who the kubelet API accepts: anonymous callers, client certificates of which CA, bearer tokens and how long a revoked token stays cached (webhook cacheTTL)", "remove it; drover turns anonymous off, webhook on and pins the cluster CA"},
	{"authorization", true, "what the kubelet API lets a caller do: AlwaysAllow gives exec into every pod to any authenticated caller; the webhook cache TTLs keep a removed RBAC binding working", "remove it; the API server's RBAC decides (mode Webhook)"},
	{"registryPullQPS", false, tuning, ""},
	{"registryBurst", false, tuning, ""},
	{"imagePullCredentialsVerificationPolicy", true, "whether a pod may use an image pulled with another pod's credentials (a private image's contents); drover keeps the kubelet's default, or NeverVerifyAllowlistedImages when the image caches images", askDrover},
	{"preloadedImagesVerificationAllowlist", true, "images exempt from the credential verification above: drover lists the image's cached repositories", askDrover},
	{"eventRecordQPS", false, tuning, ""},
	{"eventBurst", false, tuning, ""},
	{"enableDebuggingHandlers", true, "the exec, attach, port-forward, logs and run endpoints of the kubelet API: what kubectl exec and logs use", askDrover},
	{"enableContentionProfiling", true, "profiling of the kubelet, served on its API", askDrover},
	{"healthzPort", true, "healthz is unauthenticated; the agent polls it on 127.0.0.1:10248", askDrover},
	{"healthzBindAddress", true, "healthz is unauthenticated; off loopback it tells anyone on the network about the kubelet", askDrover},
	{"oomScoreAdj", true, "the kubelet's own OOM score: it must outlive pods under memory pressure", askDrover},
	{"clusterDomain", true, "the cluster's DNS domain", "set cluster.domain instead"},
	{"clusterDNS", true, "the cluster's DNS servers", "set cluster.dns instead"},
	{"streamingConnectionIdleTimeout", true, "0 keeps idle exec and port-forward streams open forever (CIS 4.2.5)", askDrover},
	{"nodeStatusUpdateFrequency", false, tuning, ""},
	{"nodeStatusReportFrequency", false, tuning, ""},
	{"nodeLeaseDurationSeconds", false, tuning, ""},
	{"imageMinimumGCAge", false, tuning, ""},
	{"imageMaximumGCAge", false, tuning, ""},
	{"imageGCHighThresholdPercent", false, tuning, ""},
	{"imageGCLowThresholdPercent", false, tuning, ""},
	{"volumeStatsAggPeriod", false, tuning, ""},
	{"kubeletCgroups", true, cgroupLayout, askDrover},
	{"systemCgroups", true, cgroupLayout, askDrover},
	{"cgroupRoot", true, cgroupLayout + "; pods placed elsewhere escape the reservations", askDrover},
	{"cgroupsPerQOS", true, "false drops the QoS cgroups: pods are no longer held within the node's allocatable", askDrover},
	{"cgroupDriver", true, cgroupLayout + "; a mismatch with containerd's fails every pod", askDrover},
	{"cpuManagerPolicy", false, tuning, ""},
	{"singleProcessOOMKill", false, tuning, ""},
	{"cpuManagerPolicyOptions", false, tuning, ""},
	{"cpuManagerReconcilePeriod", false, tuning, ""},
	{"memoryManagerPolicy", false, tuning, ""},
	{"topologyManagerPolicy", false, tuning, ""},
	{"topologyManagerScope", false, tuning, ""},
	{"topologyManagerPolicyOptions", false, tuning, ""},
	{"qosReserved", false, tuning, ""},
	{"runtimeRequestTimeout", false, tuning, ""},
	{"hairpinMode", false, tuning, ""},
	{"maxPods", true, "the node's pod capacity", "set kubelet.maxPods instead"},
	{"podCIDR", true, "only used by a kubelet without an API server; the cluster assigns pod ranges", "remove it"},
	{"podPidsLimit", false, tuning + " (drover sizes a default to the instance)", ""},
	{"resolvConf", true, "the DNS servers pods resolve through: another file sends pods' lookups elsewhere", askDrover},
	{"runOnce", true, "the kubelet runs static pods once and exits: the node never joins", "remove it"},
	{"cpuCFSQuota", false, tuning, ""},
	{"cpuCFSQuotaPeriod", false, tuning, ""},
	{"nodeStatusMaxImages", false, tuning, ""},
	{"maxOpenFiles", false, tuning, ""},
	{"contentType", false, tuning, ""},
	{"kubeAPIQPS", false, tuning, ""},
	{"kubeAPIBurst", false, tuning, ""},
	{"serializeImagePulls", false, tuning, ""},
	{"maxParallelImagePulls", false, tuning, ""},
	{"evictionHard", false, tuning, ""},
	{"evictionSoft", false, tuning, ""},
	{"evictionSoftGracePeriod", false, tuning, ""},
	{"evictionPressureTransitionPeriod", false, tuning, ""},
	{"evictionMaxPodGracePeriod", false, tuning, ""},
	{"evictionMinimumReclaim", false, tuning, ""},
	{"mergeDefaultEvictionSettings", false, tuning, ""},
	{"podsPerCore", false, tuning, ""},
	{"enableControllerAttachDetach", false, tuning, ""},
	{"protectKernelDefaults", true, "the kubelet would retune kernel settings behind the image's back; the agent sets what it checks (KubeletSysctls)", "remove it"},
	{"makeIPTablesUtilChains", true, "the KUBE-FIREWALL chain drops martian packets to 127.0.0.1 services (CVE-2020-8558)", askDrover},
	{"iptablesMasqueradeBit", true, "must match kube-proxy's; a mismatch masquerades or drops the wrong traffic", askDrover},
	{"iptablesDropBit", true, "must match kube-proxy's; a mismatch masquerades or drops the wrong traffic", askDrover},
	{"featureGates", true, "a gate changes what the kubelet enforces (authorization, certificate rotation, credential checks) or turns on alpha code; drover sets none", askDrover},
	{"failSwapOn", true, "drover nodes have no swap: secrets in pod memory never reach a disk", "remove it"},
	{"memorySwap", true, "drover nodes have no swap: secrets in pod memory never reach a disk", "remove it"},
	{"containerLogMaxSize", false, tuning, ""},
	{"containerLogMaxFiles", false, tuning, ""},
	{"containerLogMaxWorkers", false, tuning, ""},
	{"containerLogMonitorInterval", false, tuning, ""},
	{"configMapAndSecretChangeDetectionStrategy", false, tuning, ""},
	{"systemReserved", false, tuning + " (drover sizes a default to the instance)", ""},
	{"kubeReserved", false, tuning + " (drover sizes a default to the instance)", ""},
	{"reservedSystemCPUs", false, tuning, ""},
	{"showHiddenMetricsForVersion", false, tuning, ""},
	{"systemReservedCgroup", true, cgroupLayout, askDrover},
	{"kubeReservedCgroup", true, cgroupLayout, askDrover},
	{"enforceNodeAllocatable", true, "which cgroups the kubelet holds to their reservation; " + cgroupLayout, askDrover},
	{"allowedUnsafeSysctls", false, "namespaced sysctls pods may set in their own namespaces (the kubelet refuses node-wide ones; Pod Security still decides who may)", ""},
	{"volumePluginDir", true, "the kubelet runs, as root, every FlexVolume driver it finds there", askDrover},
	{"providerID", true, "must be <region-id>.<instance-id> for the cloud controller manager to adopt the Node", "remove it; drover sets it from the ECS metadata"},
	{"kernelMemcgNotification", false, tuning, ""},
	{"logging", false, "the kubelet's log format and verbosity", ""},
	{"enableSystemLogHandler", true, "serves the node's /var/log on the kubelet API", askDrover},
	{"enableSystemLogQuery", true, "serves the node's journal on the kubelet API", askDrover},
	{"shutdownGracePeriod", false, tuning + " (the spot watch relies on graceful shutdown; see Reservations)", ""},
	{"shutdownGracePeriodCriticalPods", false, tuning, ""},
	{"shutdownGracePeriodByPodPriority", false, tuning, ""},
	{"crashLoopBackOff", false, tuning, ""},
	{"reservedMemory", false, tuning, ""},
	{"enableProfilingHandler", true, "pprof of the kubelet, served on its API", askDrover},
	{"enableDebugFlagsHandler", true, "lets a caller of the kubelet API change its log verbosity at run time", askDrover},
	{"seccompDefault", false, "true gives every pod the runtime's default seccomp profile; drover leaves the kubelet's default (false), so this can only tighten", ""},
	{"memoryThrottlingFactor", false, tuning, ""},
	{"memoryReservationPolicy", false, tuning, ""},
	{"registerWithTaints", true, "the node's taints at registration", "set kubelet.taints instead"},
	{"registerNode", true, "false: the kubelet never registers the Node and the node never joins", "remove it"},
	{"tracing", true, "sends the kubelet's traces (pod and API details) to an endpoint off the node", askDrover},
	{"localStorageCapacityIsolation", false, tuning, ""},
	{"containerRuntimeEndpoint", true, "the runtime the kubelet runs pods with: another socket is a runtime outside the image's guarantees", askDrover},
	{"imageServiceEndpoint", true, "where images come from: another socket serves images outside the image's guarantees", askDrover},
	{"failCgroupV1", true, "drover images run cgroup v2 only", "remove it"},
	{"userNamespaces", false, tuning, ""},
}

// droverKubeletField returns the field's entry when kubelet.config may not
// set it; ok is false for a permitted field. A name the table does not
// know is drover's too (an allowlist): checkKubeletValue reports names
// the type does not have either, so a name reaching here unknown is a
// field of a newer type not yet classified.
func droverKubeletField(name string) (kubeletField, bool) {
	for _, f := range kubeletFields {
		if f.name == name {
			return f, f.drovers
		}
	}
	return kubeletField{name: name, drovers: true, why: "not on drover's list of fields a node file may set", instead: askDrover}, true
}

func (f kubeletField) message() string {
	return fmt.Sprintf("set by drover (%s); %s", f.why, f.instead)
}

// KubeletFieldsTable is the table of docs/node-config.md: every field,
// whether kubelet.config may set it, and why.
func KubeletFieldsTable() string {
	var b strings.Builder
	b.WriteString("| field | in `kubelet.config` | why |\n|---|---|---|\n")
	for _, f := range kubeletFields {
		who := "permitted"
		why := f.why
		if f.drovers {
			who = "drover's"
			why += "; " + f.instead
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", f.name, who, strings.ReplaceAll(why, "|", `\|`))
	}
	return b.String()
}
