package nodeconfig

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"strings"
)

// Facts are what the ECS instance metadata says about this instance; the
// agent's provider gathers them (meta-data/instance-id, region-id, zone-id,
// instance/instance-type, hostname, private-ipv4).
type Facts struct {
	InstanceID   string
	RegionID     string
	ZoneID       string
	InstanceType string
	Hostname     string
	PrivateIPv4  string
	// SecureBoot is "true" or "false" as drover-init read the firmware's
	// SecureBoot variable; "" when unknown (no label then).
	SecureBoot string
	// NTPServers are the instance's time servers (meta-data
	// ntp-conf/ntp-servers), host names or addresses; none if unknown.
	NTPServers []string
	// CPUs and MemTotal are the instance's size as the kubelet reports
	// its capacity (the online CPUs, /proc/meminfo's MemTotal in bytes),
	// read on the node at every boot (an instance type change resizes it);
	// 0 when unknown. The reservations are computed from them (Reserve).
	CPUs     int
	MemTotal uint64
	// BuildID is the image's build ID and ConfigDigest the digest of the
	// user-data the instance was launched with (nodecontract.UserDataLabel, 40 hex
	// digits); drover rollout compares both with the launch template's.
	BuildID, ConfigDigest string
	// ACRProvider says the image ships the ACR credential provider
	// (ACRProviderPath): the kubelet is configured to use it.
	ACRProvider bool
	// CachedRepositories are the repositories of the image's cached
	// images (ImageCache.Repositories): the kubelet never makes a pod
	// re-verify its pull credentials for them (KubeletConfig).
	CachedRepositories []string
	// KubeletVersion is the kubelet's Kubernetes version (v1.37.2); ""
	// when not known.
	KubeletVersion string
}

// Labels set from the facts; a node file may not set them (see
// reservedLabels).
const (
	LabelRegion       = "topology.kubernetes.io/region"
	LabelZone         = "topology.kubernetes.io/zone"
	LabelInstanceType = "node.kubernetes.io/instance-type"
	// LabelSecureBoot says whether the node booted with UEFI Secure
	// Boot enforced, so workloads can require it (a nodeSelector).
	LabelSecureBoot = "drover.dev/secure-boot"
	// LabelBuildID is the image's build ID (the manifest's buildID).
	LabelBuildID = "drover.dev/build-id"
	// LabelNodeConfig is the first 40 hex digits of the digest of the
	// user-data without its bootstrap token (nodecontract.ConfigLabel).
	LabelNodeConfig = "drover.dev/node-config"
)

// ProviderID is the Node's spec.providerID as the Alibaba Cloud
// cloud-controller-manager expects it: "<region-id>.<instance-id>".
func ProviderID(f Facts) string {
	return f.RegionID + "." + f.InstanceID
}

// Check reports facts that cannot go into the kubelet configuration. The
// metadata service is trusted, but a value it returns ends up in a flag or
// a label, and the kubelet refusing it at start is a worse place to learn.
func (f Facts) Check() error {
	var errs []error
	bad := func(key, v, why string) {
		errs = append(errs, fmt.Errorf("metadata %s %q %s", key, v, why))
	}
	if f.InstanceID == "" {
		errs = append(errs, errors.New("metadata instance-id is empty"))
	} else if !isToken(f.InstanceID) {
		bad("instance-id", f.InstanceID, "has characters other than letters, digits, '-' and '_'")
	}
	if f.RegionID == "" {
		errs = append(errs, errors.New("metadata region-id is empty"))
	} else if checkLabelValue(f.RegionID) != "" || !isToken(f.RegionID) {
		bad("region-id", f.RegionID, "is not a valid label value")
	}
	if f.ZoneID != "" && checkLabelValue(f.ZoneID) != "" {
		bad("zone-id", f.ZoneID, "is not a valid label value")
	}
	if f.InstanceType != "" && checkLabelValue(f.InstanceType) != "" {
		bad("instance/instance-type", f.InstanceType, "is not a valid label value")
	}
	if f.Hostname != "" {
		if h := strings.ToLower(f.Hostname); len(h) > 253 || !dnsSubdomain.MatchString(h) {
			bad("hostname", f.Hostname, "is not a valid node name (a DNS subdomain)")
		}
	}
	if f.BuildID != "" && checkLabelValue(f.BuildID) != "" {
		bad("BUILD_ID (/usr/lib/os-release)", f.BuildID, "is not a valid label value")
	}
	if f.PrivateIPv4 != "" {
		if a, err := netip.ParseAddr(f.PrivateIPv4); err != nil || !a.Is4() {
			bad("private-ipv4", f.PrivateIPv4, "is not an IPv4 address")
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("checking ECS instance facts (compare with the instance in the ECS console): %w", err)
	}
	return nil
}

func isToken(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// NodeLabels is the node file's labels plus those taken from the facts.
// Parse already refused node files that set the fact labels.
func NodeLabels(c *Config, f Facts) (map[string]string, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	labels := maps.Clone(c.Kubelet.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	for key, v := range map[string]string{LabelRegion: f.RegionID, LabelZone: f.ZoneID, LabelInstanceType: f.InstanceType, LabelSecureBoot: f.SecureBoot,
		LabelBuildID: f.BuildID, LabelNodeConfig: f.ConfigDigest} {
		if v == "" {
			continue
		}
		if old, ok := labels[key]; ok && old != v {
			return nil, fmt.Errorf("node label %s=%s conflicts with the instance's %s; remove it from kubelet.labels", key, old, v)
		}
		labels[key] = v
	}
	return labels, nil
}
