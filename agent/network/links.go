package network

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// linkOf is the plain view of a netlink link.
func linkOf(l netlink.Link) Link {
	a := l.Attrs()
	link := Link{
		Index:    a.Index,
		Name:     a.Name,
		Kind:     l.Type(),
		Ether:    a.EncapType == "ether",
		Loopback: a.Flags&net.FlagLoopback != 0,
		Up:       a.Flags&net.FlagUp != 0,
		Carrier:  a.RawFlags&unix.IFF_LOWER_UP != 0,
	}
	if len(a.HardwareAddr) > 0 {
		link.MAC = a.HardwareAddr.String()
	}
	return link
}

// WatchLinks calls update with every network interface of the calling
// thread's namespace, then with each change the kernel announces
// (RTM_NEWLINK; RTM_DELLINK with deleted set), until ctx ends. When the
// kernel drops notifications (the socket's buffer overran: a burst of
// pods' veths) it subscribes again, listing every link afresh, so no
// state is missed for long. Subscribing needs no privilege.
func WatchLinks(ctx context.Context, update func(l Link, deleted bool)) error {
	failures := 0
	for ctx.Err() == nil {
		if err := watchOnce(ctx, update); err != nil {
			if failures++; failures >= 5 {
				return fmt.Errorf("network: subscribing to link changes: %w", err)
			}
		} else {
			failures = 0
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return nil
}

// watchOnce is one subscription: every link, then the changes until ctx
// ends or the receiver closes the channel (the kernel's socket failed,
// ENOBUFS; WatchLinks subscribes again, so that error is not needed).
//
// Not ListExisting: it sends the dump request on the subscribed socket,
// addressed to the link group, and a message to a multicast group of
// rtnetlink needs CAP_NET_ADMIN, which the resident agent has dropped
// (EPERM). The links are listed over a socket of their own instead, after
// subscribing, so no change in between is missed (a repeat is harmless).
func watchOnce(ctx context.Context, update func(Link, bool)) error {
	ch := make(chan netlink.LinkUpdate, 64)
	done := make(chan struct{})
	if err := netlink.LinkSubscribeWithOptions(ch, done, netlink.LinkSubscribeOptions{}); err != nil {
		return err
	}
	defer func() {
		close(done)
		for range ch { // until the receiver has closed it
		}
	}()
	links, err := netlink.LinkList()
	if err != nil {
		return err
	}
	for _, l := range links {
		update(linkOf(l), false)
	}
	drain(ctx, ch, update)
	return nil
}

// drain passes updates on until ctx ends or the subscription ends.
func drain(ctx context.Context, ch <-chan netlink.LinkUpdate, update func(Link, bool)) {
	for {
		select {
		case <-ctx.Done():
			return
		case u, ok := <-ch:
			if !ok {
				return
			}
			update(linkOf(u.Link), u.Header.Type == unix.RTM_DELLINK)
		}
	}
}
