package ignition

import (
	"fmt"
	"net/netip"
	"syscall"
)

// Destinations says where remote contents may be fetched from. The client
// (RemoteClientFor) checks it on the address each connection is about to
// be made to — after DNS, for every redirect, in net.Dialer's Control,
// which runs before connect(2), so nothing at all is sent to a refused
// address. A host name that resolves to an internal address, a DNS server
// that answers differently the second time (rebinding) or a redirect reach
// no further than a URL naming the address would.
//
// Never allowed: loopback, link-local (169.254.0.0/16 and fe80::/10, where
// cloud metadata services answer), the ECS metadata service
// 100.100.100.200, unspecified, multicast and broadcast addresses.
// Private addresses — RFC 1918, carrier-grade NAT 100.64.0.0/10 (where
// Alibaba Cloud's internal endpoints are) and IPv6 unique local fc00::/7 —
// only with AllowPrivate.
type Destinations struct {
	// AllowPrivate admits private addresses: on the node, a server inside
	// the VPC is a normal source; on a build host, user-data that is not
	// trusted could make the host fetch internal URLs.
	AllowPrivate bool
	// Flag is the setting that admits private addresses, named in
	// refusals (drover validate's "--allow-private-sources").
	Flag string

	// admit lets tests reach their own servers, which listen on loopback.
	admit func(netip.AddrPort) bool
}

// NodeDestinations is the agent's policy: a VPC-internal server is a
// normal source, but the node's own loopback, link-local addresses and the
// metadata service (the instance's user-data and RAM credentials) are
// never fetched from.
var NodeDestinations = Destinations{AllowPrivate: true}

// ecsMetadata is the ECS instance metadata service; it lies in
// 100.64.0.0/10, so it is refused before the private ranges are judged.
var ecsMetadata = netip.MustParseAddr("100.100.100.200")

var (
	cgnat    = netip.MustParsePrefix("100.64.0.0/10")
	nat64    = netip.MustParsePrefix("64:ff9b::/96")
	thisNet  = netip.MustParsePrefix("0.0.0.0/8")
	bcast    = netip.MustParseAddr("255.255.255.255")
	neverFix = "remote contents are never fetched from loopback, link-local, unspecified, multicast or broadcast addresses, nor from the metadata service — serve them from another host, or inline them as a data: URL"
)

// DestinationError is a connection Destinations refused.
type DestinationError struct {
	Addr netip.Addr
	Why  string // what the address is
	Fix  string // what to do
}

func (e *DestinationError) Error() string {
	return fmt.Sprintf("refused to connect to %s: it is %s; %s", e.Addr, e.Why, e.Fix)
}

// Check says whether a connection to a may be made.
func (d Destinations) Check(a netip.Addr) error {
	a = a.WithZone("")
	if a.Is4In6() {
		a = a.Unmap()
	}
	if nat64.Contains(a) {
		// The well-known NAT64 prefix reaches the IPv4 address in its
		// last 32 bits.
		b := a.As16()
		if err := d.Check(netip.AddrFrom4([4]byte(b[12:]))); err != nil {
			return err
		}
	}
	never := func(why string) error { return &DestinationError{Addr: a, Why: why, Fix: neverFix} }
	switch {
	case a == ecsMetadata:
		return never("the ECS instance metadata service (it serves the instance's user-data and RAM role credentials)")
	case a.IsLoopback():
		return never("a loopback address (the fetching host itself)")
	case a.IsUnspecified() || thisNet.Contains(a):
		return never("an unspecified address (it reaches the fetching host itself)")
	case a.IsLinkLocalUnicast():
		return never("a link-local address (169.254.0.0/16 or fe80::/10, where cloud metadata services answer)")
	case a.IsMulticast():
		return never("a multicast address")
	case a == bcast:
		return never("the broadcast address")
	}
	why := ""
	switch {
	case cgnat.Contains(a):
		why = "a private address (carrier-grade NAT 100.64.0.0/10, Alibaba Cloud's internal network)"
	case a.IsPrivate() && a.Is4():
		why = "a private address (RFC 1918)"
	case a.IsPrivate():
		why = "a private address (IPv6 unique local fc00::/7)"
	}
	if why == "" || d.AllowPrivate {
		return nil
	}
	fix := "private addresses are not fetched from here"
	if d.Flag != "" {
		fix = "private addresses are fetched from only with " + d.Flag + " (the node itself fetches from them: give it when the URL is meant to name a server inside the VPC)"
	}
	return &DestinationError{Addr: a, Why: why, Fix: fix}
}

// control is the net.Dialer Control hook: address is the resolved
// "ip:port" about to be connected to.
func (d Destinations) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("refused to connect to %q: not an IP address and port", address)
	}
	if d.admit != nil && d.admit(ap) {
		return nil
	}
	return d.Check(ap.Addr())
}
