package network

import (
	"fmt"
	"net"
	"slices"
	"strings"
)

// Snapshot is the part of the kernel's network state the readiness decision
// looks at, as plain values so the decision is table-tested without netlink.
type Snapshot struct {
	Links  []Link
	Addrs  []Addr  // IPv4 only
	Routes []Route // IPv4 main table, unicast only
}

// Link is one network interface.
type Link struct {
	Index    int
	Name     string
	Kind     string // rtnetlink kind: "device" for a plain NIC, "veth", "bridge", "bond", …
	MAC      string // lower-case, colon-separated; "" when the link has none
	Ether    bool   // an Ethernet-type device (ARPHRD_ETHER)
	Loopback bool
	Up       bool // administratively up (IFF_UP)
	Carrier  bool // lower layer up (IFF_LOWER_UP)
}

// Addr is an IPv4 address on a link.
type Addr struct {
	LinkIndex int
	IP        net.IP
	Prefix    int
}

// Route is an IPv4 route; Dst nil or 0.0.0.0/0 is a default route.
type Route struct {
	LinkIndex int
	Dst       *net.IPNet
	Gateway   net.IP // nil for an on-link route
	Src       net.IP // preferred source, nil when unset
	Metric    int
}

// Primary is the interface the node is reached on, once it is configured.
type Primary struct {
	Link    string
	Index   int
	MAC     string
	IPv4    net.IP
	Prefix  int
	Gateway net.IP // nil when the default route is on-link
}

// Decision is what Decide concluded from one snapshot.
type Decision struct {
	// Ready is true when Primary is complete: an up interface with a global
	// IPv4 address and an IPv4 default route through it.
	Ready   bool
	Primary Primary
	// Candidate is true when Primary names an interface even though it is not
	// ready (Link, Index and MAC only): the one being waited for.
	Candidate bool
	// Why says what is missing when not ready, e.g. "no IPv4 default route on
	// any interface".
	Why string
	// Seen summarises every non-loopback interface, e.g. "eth0 up, no address".
	Seen string
}

// virtualKinds are link kinds that never carry the node's own uplink.
// A veth is not among them: in a container or network namespace the veth end
// named eth0 is the primary interface. Host-side veths of container networking
// are excluded by name instead.
var virtualKinds = []string{"bridge", "vxlan", "geneve", "tuntap", "ipip", "gre", "gretap", "wireguard", "ipvlan", "macvlan"}

// virtualPrefixes are names container runtimes and CNI plugins give the links
// they create on a node. They exist on a reboot before kubelet starts, and an
// address on docker0 or cni0 must not be mistaken for the node's address.
var virtualPrefixes = []string{
	"docker", "cni", "veth", "cali", "flannel", "cilium", "lxc", "kube-", "weave", "virbr",
	"tunl", "vxlan", "genev", "nodelocaldns", "podman", "br-",
}

// Ignored reports whether l can never be the primary interface unless its
// MAC is the preferred one: loopback, non-Ethernet, bridges and tunnels, and
// the links container networking creates.
func Ignored(l Link) bool {
	if l.Loopback || !l.Ether || slices.Contains(virtualKinds, l.Kind) {
		return true
	}
	for _, p := range virtualPrefixes {
		if strings.HasPrefix(l.Name, p) {
			return true
		}
	}
	return false
}

// Decide says whether the network in s is ready and which interface is the
// primary one.
//
// The primary is the interface carrying the IPv4 default route (lowest metric,
// then lowest index); before there is one, the first interface that is up is
// the one waited for. When preferredMAC is set (the ECS metadata knows the
// primary ENI's MAC) only the interface with that MAC can be the primary; a
// bridge or bond shares its port's MAC, so among several the one with the
// default route wins.
func Decide(s Snapshot, preferredMAC string) Decision {
	links := slices.Clone(s.Links)
	slices.SortFunc(links, func(a, b Link) int { return a.Index - b.Index })
	d := Decision{Seen: describe(s, links, preferredMAC)}

	var candidates []Link
	if preferredMAC != "" {
		want := normalizeMAC(preferredMAC)
		for _, l := range links {
			if !l.Loopback && l.MAC == want {
				candidates = append(candidates, l)
			}
		}
		if len(candidates) == 0 {
			d.Why = "no interface with MAC " + want
			return d
		}
	} else {
		for _, l := range links {
			if !Ignored(l) {
				candidates = append(candidates, l)
			}
		}
	}

	var best *Route
	var bestLink Link
	for _, l := range candidates {
		r := defaultRoute(s.Routes, l.Index)
		if r != nil && (best == nil || r.Metric < best.Metric) {
			best, bestLink = r, l
		}
	}
	if best == nil {
		if l, ok := waitedFor(candidates); ok {
			d.Primary = Primary{Link: l.Name, Index: l.Index, MAC: l.MAC}
			d.Candidate = true
		}
		d.Why = "no IPv4 default route on any interface"
		if preferredMAC != "" {
			d.Why = fmt.Sprintf("no IPv4 default route via %s (MAC %s)", candidates[0].Name, candidates[0].MAC)
		}
		return d
	}

	d.Primary = Primary{Link: bestLink.Name, Index: bestLink.Index, MAC: bestLink.MAC, Gateway: best.Gateway}
	d.Candidate = true
	if !bestLink.Up {
		d.Why = bestLink.Name + " is down"
		return d
	}
	a, ok := pickAddr(s.Addrs, bestLink.Index, best)
	if !ok {
		d.Why = "no global IPv4 address on " + bestLink.Name
		return d
	}
	d.Primary.IPv4, d.Primary.Prefix = a.IP, a.Prefix
	d.Ready, d.Candidate = true, false
	return d
}

// waitedFor is the interface reported while there is no default route: the
// first one that is up, else the first one.
func waitedFor(candidates []Link) (Link, bool) {
	for _, l := range candidates {
		if l.Up {
			return l, true
		}
	}
	if len(candidates) > 0 {
		return candidates[0], true
	}
	return Link{}, false
}

// defaultRoute is the lowest-metric IPv4 default route through link index.
func defaultRoute(routes []Route, index int) *Route {
	var best *Route
	for i := range routes {
		r := &routes[i]
		if r.LinkIndex == index && isDefault(r.Dst) && (best == nil || r.Metric < best.Metric) {
			best = r
		}
	}
	return best
}

func isDefault(dst *net.IPNet) bool {
	if dst == nil {
		return true
	}
	ones, _ := dst.Mask.Size()
	return ones == 0 && (dst.IP == nil || dst.IP.IsUnspecified())
}

// usable is an address a node can be reached on: not loopback, not
// link-local (169.254/16, which a NIC gets without DHCP), not multicast.
func usable(ip net.IP) bool {
	return ip.To4() != nil && ip.IsGlobalUnicast()
}

// pickAddr chooses the primary address on link index: the default route's
// preferred source, else the address whose subnet holds the gateway, else the
// first usable one.
func pickAddr(addrs []Addr, index int, r *Route) (Addr, bool) {
	var onLink []Addr
	for _, a := range addrs {
		if a.LinkIndex == index && usable(a.IP) {
			onLink = append(onLink, a)
		}
	}
	if len(onLink) == 0 {
		return Addr{}, false
	}
	if r.Src != nil {
		for _, a := range onLink {
			if a.IP.Equal(r.Src) {
				return a, true
			}
		}
	}
	if r.Gateway != nil {
		for _, a := range onLink {
			n := net.IPNet{IP: a.IP.To4(), Mask: net.CIDRMask(a.Prefix, 32)}
			if n.Contains(r.Gateway) {
				return a, true
			}
		}
	}
	return onLink[0], true
}

// describe summarises every non-loopback link for logs and the timeout error:
// "eth0 up, no address; docker0 ignored".
func describe(s Snapshot, links []Link, preferredMAC string) string {
	var parts []string
	for _, l := range links {
		if l.Loopback {
			continue
		}
		name := l.Name
		if preferredMAC != "" && l.MAC != "" {
			name += " (" + l.MAC + ")"
		}
		if preferredMAC == "" && Ignored(l) {
			parts = append(parts, name+" ignored")
			continue
		}
		fields := []string{name + " down"}
		if l.Up {
			fields[0] = name + " up"
			if !l.Carrier {
				fields = append(fields, "no carrier")
			}
		}
		var addrs []string
		for _, a := range s.Addrs {
			if a.LinkIndex != l.Index {
				continue
			}
			text := fmt.Sprintf("%s/%d", a.IP, a.Prefix)
			switch {
			case a.IP.IsLinkLocalUnicast():
				text += " (link-local)"
			case !usable(a.IP):
				text += " (not global)"
			}
			addrs = append(addrs, text)
		}
		if len(addrs) == 0 {
			fields = append(fields, "no address")
		}
		fields = append(fields, addrs...)
		if r := defaultRoute(s.Routes, l.Index); r != nil {
			if r.Gateway != nil {
				fields = append(fields, "default via "+r.Gateway.String())
			} else {
				fields = append(fields, "default on-link")
			}
		}
		parts = append(parts, strings.Join(fields, ", "))
	}
	if len(parts) == 0 {
		return "no interfaces besides lo"
	}
	return strings.Join(parts, "; ")
}

// normalizeMAC writes a MAC the way Link.MAC holds it; text that is not a MAC
// is only lower-cased, so it matches nothing rather than failing here.
func normalizeMAC(s string) string {
	if hw, err := net.ParseMAC(strings.TrimSpace(s)); err == nil {
		return hw.String()
	}
	return strings.ToLower(strings.TrimSpace(s))
}
