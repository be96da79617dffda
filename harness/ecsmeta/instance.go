// Package ecsmeta emulates the Alibaba Cloud ECS instance metadata service
// (http://100.100.100.200/latest/…) for drover's QEMU harness (`drover run --ecs`)
// and for the agent's unit tests.
//
// The emulator is an http.Handler (Server). It serves user-data, the meta-data tree
// with the keys listed in /work/shared/ECS.md, and the hardened ("security
// hardening") token protocol:
//
//	PUT /latest/api/token  X-aliyun-ecs-metadata-token-ttl-seconds: 1..21600  → token body
//	GET /latest/…          X-aliyun-ecs-metadata-token: <token>
//
// with the service's refusals: TTL out of range → 400, a PUT carrying
// X-Forwarded-For → 403 (the service refuses tokens requested through a proxy),
// a bad or expired token → 401, a tokenless GET when tokens are required → 403.
// Options.TokenEndpoint=false emulates an old service without the token endpoint.
//
// With Instance.RAMRole set it serves the role as ECS does:
// meta-data/ram/security-credentials/ lists it, and its key answers STS
// credentials as JSON (AccessKeyId, AccessKeySecret, SecurityToken,
// Expiration, LastUpdated, Code), issued by the server, rotated halfway
// through their life and kept for RoleCredentials, so that an emulated API
// (harness/acrapi) can check a request's signature against them.
// DetachRAMRole makes the directory 404 again.
//
// Faults (error rate, runs of failures, delays, early token expiry) can be changed
// while the server runs, and every request is logged (Requests) so tests can assert
// what the client actually did on the wire rather than what it claims it did.
//
// A QEMU guest reaches the emulator at 100.100.100.200:80 through user-network
// forwarding (guestfwd); Serve only needs a listener on the host.
package ecsmeta

import (
	"encoding/json"
	"sort"
	"strings"
)

// Instance is what the emulated metadata service knows about its instance.
// Empty string fields are not served (404), so a test can remove a key by
// clearing it.
type Instance struct {
	InstanceID         string
	RegionID           string
	ZoneID             string
	InstanceType       string
	InstanceName       string
	Hostname           string
	ImageID            string
	VPCID              string
	VPCCIDR            string
	VSwitchID          string
	VSwitchCIDR        string
	MAC                string
	PrivateIPv4        string
	Netmask            string
	Gateway            string
	NetworkInterfaceID string
	Nameservers        []string
	NTPServers         []string
	// Tags are served under meta-data/tags/instance/<key>. nil means instance
	// metadata tags are disabled: the whole tags/ directory is 404.
	Tags map[string]string
	// UserData is served at /latest/user-data; nil means none (404).
	UserData []byte
	// SpotTerminationTime is served at
	// meta-data/instance/spot/termination-time: a spot instance's reclaim
	// notice (a UTC time, 2026-12-02T08:00:00Z). Empty: no notice (404).
	SpotTerminationTime string
	// RAMRole is the name of the RAM role attached to the instance: listed
	// at meta-data/ram/security-credentials/, whose key of that name
	// answers the role's STS credentials (Server issues and rotates them).
	// Empty: no role attached, the directory is 404 (a role detached).
	RAMRole string
}

// DefaultInstance returns a plausible ECS instance whose network values match
// QEMU user networking (guest 10.0.2.15/24, gateway 10.0.2.2, DNS 10.0.2.3,
// QEMU's default MAC), so the guest's DHCP lease and the metadata agree.
func DefaultInstance() Instance {
	return Instance{
		InstanceID:         "i-bp1dr0v3remu1a2b3c4",
		RegionID:           "cn-hangzhou",
		ZoneID:             "cn-hangzhou-h",
		InstanceType:       "ecs.g7.large",
		InstanceName:       "drover-smoke",
		Hostname:           "iZbp1dr0v3remu1a2b3c4Z",
		ImageID:            "m-bp1dr0v3rimage00001",
		VPCID:              "vpc-bp1dr0v3rvpc000001",
		VPCCIDR:            "10.0.0.0/16",
		VSwitchID:          "vsw-bp1dr0v3rvsw000001",
		VSwitchCIDR:        "10.0.2.0/24",
		MAC:                "52:54:00:12:34:56",
		PrivateIPv4:        "10.0.2.15",
		Netmask:            "255.255.255.0",
		Gateway:            "10.0.2.2",
		NetworkInterfaceID: "eni-bp1dr0v3reni000001",
		Nameservers:        []string{"10.0.2.3"},
		NTPServers:         []string{"ntp.cloud.aliyuncs.com"},
	}
}

// RAMCredentialsKey is the meta-data directory listing the instance's RAM
// role.
const RAMCredentialsKey = "ram/security-credentials/"

// node is one entry of the meta-data tree: a leaf value or a directory.
type node struct {
	value    string
	children map[string]*node // non-nil for directories
}

func newDir() *node { return &node{children: map[string]*node{}} }

// add stores value at a slash-separated path, creating directories on the way.
// Empty values are skipped so that unset Instance fields answer 404.
func (n *node) add(p, value string) {
	if value == "" {
		return
	}
	parts := strings.Split(p, "/")
	cur := n
	for _, part := range parts[:len(parts)-1] {
		next, ok := cur.children[part]
		if !ok || next.children == nil {
			next = newDir()
			cur.children[part] = next
		}
		cur = next
	}
	cur.children[parts[len(parts)-1]] = &node{value: value}
}

// lookup walks segments from n; nil when absent.
func (n *node) lookup(segments []string) *node {
	cur := n
	for _, s := range segments {
		if cur.children == nil {
			return nil
		}
		next, ok := cur.children[s]
		if !ok {
			return nil
		}
		cur = next
	}
	return cur
}

// listing renders a directory the way the service does: one name per line,
// sorted, sub-directories with a trailing slash, no trailing newline.
func (n *node) listing() string {
	names := make([]string, 0, len(n.children))
	for name, child := range n.children {
		if child.children != nil {
			name += "/"
		}
		names = append(names, name)
	}
	sort.Strings(names)
	return strings.Join(names, "\n")
}

// metaData builds the meta-data tree for inst.
func (inst Instance) metaData() *node {
	root := newDir()
	root.add("instance-id", inst.InstanceID)
	root.add("region-id", inst.RegionID)
	root.add("zone-id", inst.ZoneID)
	root.add("hostname", inst.Hostname)
	root.add("instance/instance-type", inst.InstanceType)
	root.add("instance/instance-name", inst.InstanceName)
	root.add("instance/spot/termination-time", inst.SpotTerminationTime)
	root.add("image-id", inst.ImageID)
	root.add("mac", inst.MAC)
	root.add("private-ipv4", inst.PrivateIPv4)
	root.add("vpc-id", inst.VPCID)
	root.add("vpc-cidr-block", inst.VPCCIDR)
	root.add("vswitch-id", inst.VSwitchID)
	root.add("vswitch-cidr-block", inst.VSwitchCIDR)
	root.add("dns-conf/nameservers", strings.Join(inst.Nameservers, "\n"))
	root.add("ntp-conf/ntp-servers", strings.Join(inst.NTPServers, "\n"))
	// The value is never served: Server answers the role's key with its
	// current credentials.
	if inst.RAMRole != "" && !strings.Contains(inst.RAMRole, "/") {
		root.add(RAMCredentialsKey+inst.RAMRole, "sts")
	}
	if inst.MAC != "" {
		nic := "network/interfaces/macs/" + inst.MAC + "/"
		root.add(nic+"network-interface-id", inst.NetworkInterfaceID)
		root.add(nic+"primary-ip-address", inst.PrivateIPv4)
		if inst.PrivateIPv4 != "" {
			ips, _ := json.Marshal([]string{inst.PrivateIPv4}) // []string always marshals
			root.add(nic+"private-ipv4s", string(ips))
		}
		root.add(nic+"netmask", inst.Netmask)
		root.add(nic+"gateway", inst.Gateway)
		root.add(nic+"vswitch-cidr-block", inst.VSwitchCIDR)
		root.add(nic+"vpc-cidr-block", inst.VPCCIDR)
	}
	if inst.Tags != nil {
		tags := newDir()
		tags.children["instance"] = newDir()
		for k, v := range inst.Tags {
			// A key with a slash could not be addressed as one path segment.
			if k == "" || strings.Contains(k, "/") {
				continue
			}
			tags.children["instance"].children[k] = &node{value: v}
		}
		root.children["tags"] = tags
	}
	return root
}
