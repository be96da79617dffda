package network

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// DefaultTimeout bounds Wait when WaitOptions.Timeout is zero. DHCP on an ECS
// vSwitch answers in well under a second; two minutes covers a slow NIC
// driver probe and a DHCP server restart without hiding a broken network.
const DefaultTimeout = 2 * time.Minute

// DefaultInterval is how often Wait re-checks without a notification, which
// covers a lost or overrun notification socket.
const DefaultInterval = 250 * time.Millisecond

// Logf receives one line of progress; nil discards.
type Logf func(format string, args ...any)

func (f Logf) printf(format string, args ...any) {
	if f != nil {
		f(format, args...)
	}
}

// WaitOptions configure Wait.
type WaitOptions struct {
	// Timeout bounds the wait; DefaultTimeout when zero.
	Timeout time.Duration
	// PreferredMAC, when set, is the MAC of the primary interface (from the ECS
	// metadata), so a secondary ENI that happens to get DHCP first is not taken.
	PreferredMAC string
	// Interval is the re-check period; DefaultInterval when zero.
	Interval time.Duration
	Logf     Logf
}

// Wait blocks until the primary interface of the network namespace of the
// calling thread has a global IPv4 address and an IPv4 default route, and
// returns it. It gives up after the timeout with an error that says what it
// saw, or when ctx ends.
func Wait(ctx context.Context, o WaitOptions) (Primary, error) {
	if o.PreferredMAC != "" {
		if _, err := net.ParseMAC(o.PreferredMAC); err != nil {
			return Primary{}, fmt.Errorf("network: preferred MAC %q from the instance metadata: %w", o.PreferredMAC, err)
		}
	}
	// A handle's sockets are opened now, in this thread's network namespace, so
	// the rest of Wait may run on any thread.
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return Primary{}, fmt.Errorf("network: opening a netlink socket: %w", err)
	}
	defer h.Close()
	changes, stop := subscribe(o.Logf)
	defer stop()
	return wait(ctx, o, func() (Snapshot, error) { return snapshot(h) }, changes)
}

// wait is Wait's loop over any source of snapshots: it decides on each one and
// takes the next when changes signals or the interval passes.
func wait(ctx context.Context, o WaitOptions, take func() (Snapshot, error), changes <-chan struct{}) (Primary, error) {
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	interval := o.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(interval)
	defer tick.Stop()

	last := Decision{Why: "no consistent netlink dump", Seen: "nothing"}
	logged := ""
	expired := false
	for {
		s, err := take()
		switch {
		case errors.Is(err, netlink.ErrDumpInterrupted):
			// The tables changed during the dump; the next look is consistent.
		case err != nil:
			return Primary{}, fmt.Errorf("network: reading links, addresses and routes: %w", err)
		default:
			last = Decide(s, o.PreferredMAC)
			if last.Ready {
				p := last.Primary
				o.Logf.printf("network: primary interface %s (%s) %s/%d, default via %s",
					p.Link, p.MAC, p.IPv4, p.Prefix, gatewayText(p.Gateway))
				return p, nil
			}
			if line := last.Why + " (" + last.Seen + ")"; line != logged {
				o.Logf.printf("network: waiting: %s", line)
				logged = line
			}
		}
		if expired {
			return Primary{}, fmt.Errorf("network: %s after %s (%s): check the VPC DHCP / vSwitch",
				last.Why, timeout, last.Seen)
		}
		select {
		case <-ctx.Done():
			return Primary{}, fmt.Errorf("network: waiting for the primary interface (%s): %w", last.Seen, ctx.Err())
		case <-deadline.C:
			// One more look, so a change that raced the deadline still counts.
			expired = true
		case <-tick.C:
		case <-changes:
		}
	}
}

func gatewayText(gw net.IP) string {
	if gw == nil {
		return "on-link"
	}
	return gw.String()
}

// subscribe signals on the returned channel whenever a link, IPv4 address or
// IPv4 route changes. Notifications only prompt a fresh snapshot, so their
// content is not parsed, and losing them (ENOBUFS) costs one interval at most.
// When subscribing fails, Wait polls.
func subscribe(logf Logf) (<-chan struct{}, func()) {
	s, err := nl.Subscribe(unix.NETLINK_ROUTE, unix.RTNLGRP_LINK, unix.RTNLGRP_IPV4_IFADDR, unix.RTNLGRP_IPV4_ROUTE)
	if err != nil {
		logf.printf("network: subscribing to rtnetlink notifications: %v; polling every %s instead", err, DefaultInterval)
		return nil, func() {}
	}
	changes := make(chan struct{}, 1)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			_, _, err := s.Receive()
			select {
			case <-done:
				return
			default:
			}
			if err != nil && !errors.Is(err, unix.ENOBUFS) && !errors.Is(err, unix.EINTR) && !errors.Is(err, unix.EAGAIN) {
				logf.printf("network: rtnetlink notifications stopped: %v; polling only", err)
				return
			}
			select {
			case changes <- struct{}{}:
			default:
			}
		}
	}()
	// Closing the socket wakes the blocked Receive; waiting for the goroutine
	// keeps it from logging after Wait has returned.
	return changes, func() {
		close(done)
		s.Close()
		wg.Wait()
	}
}

// snapshot reads the state Decide needs through h.
func snapshot(h *netlink.Handle) (Snapshot, error) {
	links, err := h.LinkList()
	if err != nil {
		return Snapshot{}, fmt.Errorf("listing links: %w", err)
	}
	addrs, err := h.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return Snapshot{}, fmt.Errorf("listing IPv4 addresses: %w", err)
	}
	routes, err := h.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		return Snapshot{}, fmt.Errorf("listing IPv4 routes: %w", err)
	}
	var s Snapshot
	for _, l := range links {
		s.Links = append(s.Links, linkOf(l))
	}
	for _, a := range addrs {
		if a.IPNet == nil {
			continue
		}
		ones, _ := a.Mask.Size()
		s.Addrs = append(s.Addrs, Addr{LinkIndex: a.LinkIndex, IP: a.IP, Prefix: ones})
	}
	for _, r := range routes {
		// Blackhole, unreachable and prohibit routes do not reach anything.
		if r.Type != unix.RTN_UNICAST {
			continue
		}
		if len(r.MultiPath) == 0 {
			s.Routes = append(s.Routes, Route{LinkIndex: r.LinkIndex, Dst: r.Dst, Gateway: r.Gw, Src: r.Src, Metric: r.Priority})
			continue
		}
		for _, nh := range r.MultiPath {
			s.Routes = append(s.Routes, Route{LinkIndex: nh.LinkIndex, Dst: r.Dst, Gateway: nh.Gw, Src: r.Src, Metric: r.Priority})
		}
	}
	return s, nil
}
