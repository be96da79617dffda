package network

import (
	"net"
	"testing"
)

const (
	mac0 = "00:16:3e:00:00:01"
	mac1 = "00:16:3e:00:00:02"
)

var (
	lo      = Link{Index: 1, Name: "lo", Kind: "device", Loopback: true, Up: true, Carrier: true}
	eth0    = Link{Index: 2, Name: "eth0", Kind: "device", MAC: mac0, Ether: true, Up: true, Carrier: true}
	eth0dn  = Link{Index: 2, Name: "eth0", Kind: "device", MAC: mac0, Ether: true}
	eth1    = Link{Index: 3, Name: "eth1", Kind: "device", MAC: mac1, Ether: true, Up: true, Carrier: true}
	docker0 = Link{Index: 4, Name: "docker0", Kind: "bridge", MAC: "02:42:ac:11:00:01", Ether: true, Up: true, Carrier: true}
	cni0    = Link{Index: 5, Name: "cni0", Kind: "bridge", MAC: "0a:58:0a:f4:00:01", Ether: true, Up: true, Carrier: true}
	vethA   = Link{Index: 6, Name: "veth1a2b3c", Kind: "veth", MAC: "fe:00:00:00:00:01", Ether: true, Up: true, Carrier: true}
)

func addr(index int, cidr string) Addr {
	ip, n, err := net.ParseCIDR(cidr)
	if err != nil {
		panic(err)
	}
	ones, _ := n.Mask.Size()
	return Addr{LinkIndex: index, IP: ip.To4(), Prefix: ones}
}

func defRoute(index int, gw string, metric int) Route {
	_, dst, _ := net.ParseCIDR("0.0.0.0/0")
	return Route{LinkIndex: index, Dst: dst, Gateway: net.ParseIP(gw).To4(), Metric: metric}
}

func subnetRoute(index int, cidr string) Route {
	_, dst, _ := net.ParseCIDR(cidr)
	return Route{LinkIndex: index, Dst: dst}
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name      string
		snap      Snapshot
		mac       string
		ready     bool
		link      string // Primary.Link (ready, or the interface waited for)
		ip        string // when ready
		prefix    int
		gw        string // when ready
		why, seen string // when not ready
	}{{
		name: "no links",
		why:  "no IPv4 default route on any interface", seen: "no interfaces besides lo",
	}, {
		name: "only loopback",
		snap: Snapshot{Links: []Link{lo}, Addrs: []Addr{addr(1, "127.0.0.1/8")}},
		why:  "no IPv4 default route on any interface", seen: "no interfaces besides lo",
	}, {
		name: "link down",
		snap: Snapshot{Links: []Link{lo, eth0dn}},
		link: "eth0",
		why:  "no IPv4 default route on any interface", seen: "eth0 down, no address",
	}, {
		name: "link up, no address",
		snap: Snapshot{Links: []Link{lo, eth0}},
		link: "eth0",
		why:  "no IPv4 default route on any interface", seen: "eth0 up, no address",
	}, {
		name: "link up, no carrier",
		snap: Snapshot{Links: []Link{lo, {Index: 2, Name: "eth0", Kind: "device", MAC: mac0, Ether: true, Up: true}}},
		link: "eth0",
		why:  "no IPv4 default route on any interface", seen: "eth0 up, no carrier, no address",
	}, {
		name: "address but no default route",
		snap: Snapshot{
			Links:  []Link{lo, eth0},
			Addrs:  []Addr{addr(2, "10.0.0.5/24")},
			Routes: []Route{subnetRoute(2, "10.0.0.0/24")},
		},
		link: "eth0",
		why:  "no IPv4 default route on any interface", seen: "eth0 up, 10.0.0.5/24",
	}, {
		name: "default route but no global address",
		snap: Snapshot{
			Links:  []Link{lo, eth0},
			Addrs:  []Addr{addr(2, "169.254.7.7/16")},
			Routes: []Route{defRoute(2, "169.254.0.1", 0)},
		},
		link: "eth0",
		why:  "no global IPv4 address on eth0", seen: "eth0 up, 169.254.7.7/16 (link-local), default via 169.254.0.1",
	}, {
		name: "ready",
		snap: Snapshot{
			Links:  []Link{lo, eth0},
			Addrs:  []Addr{addr(1, "127.0.0.1/8"), addr(2, "172.16.1.20/24")},
			Routes: []Route{defRoute(2, "172.16.1.253", 1024), subnetRoute(2, "172.16.1.0/24")},
		},
		ready: true, link: "eth0", ip: "172.16.1.20", prefix: 24, gw: "172.16.1.253",
	}, {
		name: "ready, default route given with a nil destination",
		snap: Snapshot{
			Links:  []Link{lo, eth0},
			Addrs:  []Addr{addr(2, "172.16.1.20/24")},
			Routes: []Route{{LinkIndex: 2, Gateway: net.ParseIP("172.16.1.253")}},
		},
		ready: true, link: "eth0", ip: "172.16.1.20", prefix: 24, gw: "172.16.1.253",
	}, {
		name: "link-local address beside the DHCP one is ignored",
		snap: Snapshot{
			Links:  []Link{lo, eth0},
			Addrs:  []Addr{addr(2, "169.254.7.7/16"), addr(2, "172.16.1.20/24")},
			Routes: []Route{defRoute(2, "172.16.1.253", 0)},
		},
		ready: true, link: "eth0", ip: "172.16.1.20", prefix: 24, gw: "172.16.1.253",
	}, {
		name: "link-local only, no default route",
		snap: Snapshot{Links: []Link{lo, eth0}, Addrs: []Addr{addr(2, "169.254.7.7/16")}},
		link: "eth0",
		why:  "no IPv4 default route on any interface", seen: "eth0 up, 169.254.7.7/16 (link-local)",
	}, {
		name: "address in the gateway's subnet is chosen",
		snap: Snapshot{
			Links:  []Link{lo, eth0},
			Addrs:  []Addr{addr(2, "192.168.9.9/24"), addr(2, "172.16.1.20/24")},
			Routes: []Route{defRoute(2, "172.16.1.253", 0)},
		},
		ready: true, link: "eth0", ip: "172.16.1.20", prefix: 24, gw: "172.16.1.253",
	}, {
		name: "route's preferred source is chosen",
		snap: Snapshot{
			Links:  []Link{lo, eth0},
			Addrs:  []Addr{addr(2, "172.16.1.20/24"), addr(2, "172.16.1.21/24")},
			Routes: []Route{{LinkIndex: 2, Gateway: net.ParseIP("172.16.1.253"), Src: net.ParseIP("172.16.1.21")}},
		},
		ready: true, link: "eth0", ip: "172.16.1.21", prefix: 24, gw: "172.16.1.253",
	}, {
		name: "multiple interfaces: the one with the default route",
		snap: Snapshot{
			Links:  []Link{lo, eth0, eth1},
			Addrs:  []Addr{addr(2, "172.16.1.20/24"), addr(3, "172.16.2.30/24")},
			Routes: []Route{defRoute(3, "172.16.2.253", 100)},
		},
		ready: true, link: "eth1", ip: "172.16.2.30", prefix: 24, gw: "172.16.2.253",
	}, {
		name: "multiple interfaces: lowest metric wins",
		snap: Snapshot{
			Links:  []Link{lo, eth0, eth1},
			Addrs:  []Addr{addr(2, "172.16.1.20/24"), addr(3, "172.16.2.30/24")},
			Routes: []Route{defRoute(2, "172.16.1.253", 2048), defRoute(3, "172.16.2.253", 1024)},
		},
		ready: true, link: "eth1", ip: "172.16.2.30", prefix: 24, gw: "172.16.2.253",
	}, {
		name: "multiple interfaces: equal metrics, lowest index wins",
		snap: Snapshot{
			Links:  []Link{lo, eth1, eth0},
			Addrs:  []Addr{addr(2, "172.16.1.20/24"), addr(3, "172.16.2.30/24")},
			Routes: []Route{defRoute(3, "172.16.2.253", 1024), defRoute(2, "172.16.1.253", 1024)},
		},
		ready: true, link: "eth0", ip: "172.16.1.20", prefix: 24, gw: "172.16.1.253",
	}, {
		name: "multiple interfaces, none ready: the first that is up is waited for",
		snap: Snapshot{Links: []Link{lo, eth0dn, eth1}},
		link: "eth1",
		why:  "no IPv4 default route on any interface", seen: "eth0 down, no address; eth1 up, no address",
	}, {
		name: "preferred MAC picks that interface",
		snap: Snapshot{
			Links:  []Link{lo, eth0, eth1},
			Addrs:  []Addr{addr(2, "172.16.1.20/24"), addr(3, "172.16.2.30/24")},
			Routes: []Route{defRoute(2, "172.16.1.253", 1024), defRoute(3, "172.16.2.253", 1024)},
		},
		mac:   "00:16:3E:00:00:02",
		ready: true, link: "eth1", ip: "172.16.2.30", prefix: 24, gw: "172.16.2.253",
	}, {
		name: "preferred MAC without a default route waits even if another interface is ready",
		snap: Snapshot{
			Links:  []Link{lo, eth0, eth1},
			Addrs:  []Addr{addr(2, "172.16.1.20/24")},
			Routes: []Route{defRoute(2, "172.16.1.253", 1024)},
		},
		mac:  mac1,
		link: "eth1",
		why:  "no IPv4 default route via eth1 (MAC " + mac1 + ")",
		seen: "eth0 (" + mac0 + ") up, 172.16.1.20/24, default via 172.16.1.253; eth1 (" + mac1 + ") up, no address",
	}, {
		name: "preferred MAC not present",
		snap: Snapshot{Links: []Link{lo, eth0}},
		mac:  "00:16:3e:99:99:99",
		why:  "no interface with MAC 00:16:3e:99:99:99", seen: "eth0 (" + mac0 + ") up, no address",
	}, {
		name: "preferred MAC shared by a bridge and its port: the one with the route",
		snap: Snapshot{
			Links: []Link{lo, eth0,
				{Index: 7, Name: "br0", Kind: "bridge", MAC: mac0, Ether: true, Up: true, Carrier: true}},
			Addrs:  []Addr{addr(7, "172.16.1.20/24")},
			Routes: []Route{defRoute(7, "172.16.1.253", 0)},
		},
		mac:   mac0,
		ready: true, link: "br0", ip: "172.16.1.20", prefix: 24, gw: "172.16.1.253",
	}, {
		name: "docker0, cni0 and host veths are ignored",
		snap: Snapshot{
			Links: []Link{docker0, lo, eth0, cni0, vethA},
			Addrs: []Addr{addr(4, "172.17.0.1/16"), addr(5, "10.244.0.1/24")},
			Routes: []Route{defRoute(4, "172.17.0.254", 0), defRoute(5, "10.244.0.254", 0),
				defRoute(6, "10.244.0.254", 0)},
		},
		link: "eth0",
		why:  "no IPv4 default route on any interface",
		seen: "eth0 up, no address; docker0 ignored; cni0 ignored; veth1a2b3c ignored",
	}, {
		name: "ready beside docker0 and cni0",
		snap: Snapshot{
			Links:  []Link{lo, eth0, docker0, cni0, vethA},
			Addrs:  []Addr{addr(4, "172.17.0.1/16"), addr(5, "10.244.0.1/24"), addr(2, "172.16.1.20/24")},
			Routes: []Route{defRoute(2, "172.16.1.253", 0), subnetRoute(4, "172.17.0.0/16")},
		},
		ready: true, link: "eth0", ip: "172.16.1.20", prefix: 24, gw: "172.16.1.253",
	}, {
		name: "a veth named eth0 in a namespace is the primary",
		snap: Snapshot{
			Links:  []Link{lo, {Index: 9, Name: "eth0", Kind: "veth", MAC: mac0, Ether: true, Up: true, Carrier: true}},
			Addrs:  []Addr{addr(9, "10.99.0.2/24")},
			Routes: []Route{defRoute(9, "10.99.0.1", 0)},
		},
		ready: true, link: "eth0", ip: "10.99.0.2", prefix: 24, gw: "10.99.0.1",
	}, {
		name: "on-link default route",
		snap: Snapshot{
			Links:  []Link{lo, eth0},
			Addrs:  []Addr{addr(2, "203.0.113.7/32")},
			Routes: []Route{{LinkIndex: 2}},
		},
		ready: true, link: "eth0", ip: "203.0.113.7", prefix: 32,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.snap, tc.mac)
			if d.Ready != tc.ready {
				t.Fatalf("Ready = %v (why %q, seen %q), want %v", d.Ready, d.Why, d.Seen, tc.ready)
			}
			if d.Primary.Link != tc.link {
				t.Errorf("Primary.Link = %q, want %q", d.Primary.Link, tc.link)
			}
			if !tc.ready {
				if d.Why != tc.why || d.Seen != tc.seen {
					t.Errorf("not ready:\n got why %q seen %q\nwant why %q seen %q", d.Why, d.Seen, tc.why, tc.seen)
				}
				if d.Candidate != (tc.link != "") {
					t.Errorf("Candidate = %v with link %q", d.Candidate, tc.link)
				}
				return
			}
			p := d.Primary
			if !p.IPv4.Equal(net.ParseIP(tc.ip)) || p.Prefix != tc.prefix {
				t.Errorf("address %s/%d, want %s/%d", p.IPv4, p.Prefix, tc.ip, tc.prefix)
			}
			if tc.gw == "" && p.Gateway != nil || tc.gw != "" && !p.Gateway.Equal(net.ParseIP(tc.gw)) {
				t.Errorf("gateway %v, want %q", p.Gateway, tc.gw)
			}
			var want Link
			for _, l := range tc.snap.Links {
				if l.Name == tc.link {
					want = l
				}
			}
			if p.Index != want.Index || p.MAC != want.MAC {
				t.Errorf("Index %d MAC %q, want %d %q", p.Index, p.MAC, want.Index, want.MAC)
			}
		})
	}
}

func TestIgnored(t *testing.T) {
	for _, tc := range []struct {
		l    Link
		want bool
	}{
		{eth0, false},
		{Link{Name: "ens5", Kind: "device", Ether: true}, false},
		{Link{Name: "bond0", Kind: "bond", Ether: true}, false},
		{Link{Name: "eth0", Kind: "veth", Ether: true}, false},
		{lo, true},
		{docker0, true},
		{cni0, true},
		{vethA, true},
		{Link{Name: "cali1234", Kind: "veth", Ether: true}, true},
		{Link{Name: "flannel.1", Kind: "vxlan", Ether: true}, true},
		{Link{Name: "tun0", Kind: "tuntap"}, true},
		{Link{Name: "wg0", Kind: "wireguard"}, true},
	} {
		if got := Ignored(tc.l); got != tc.want {
			t.Errorf("Ignored(%s %s) = %v, want %v", tc.l.Kind, tc.l.Name, got, tc.want)
		}
	}
}
