//go:build integration

package network

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network and UTS namespaces")
	}
}

// onOwnThread runs f on a goroutine locked to its OS thread and never
// unlocked, so whatever namespaces f moves the thread into die with it and
// no other goroutine is ever scheduled there.
func onOwnThread(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		errc <- f()
	}()
	return <-errc
}

// testNet is a fresh "node" network namespace and a "switch" namespace on
// the other side of its veths. Both go away when the test ends and the last
// handle to them is closed; nothing is created in the host's namespace.
type testNet struct {
	node, peer   netns.NsHandle
	hNode, hPeer *netlink.Handle
}

func newTestNet(t *testing.T) *testNet {
	t.Helper()
	n := &testNet{node: netns.None(), peer: netns.None()}
	err := onOwnThread(func() error {
		var err error
		if n.node, err = netns.New(); err != nil {
			return fmt.Errorf("creating the node namespace: %w", err)
		}
		if n.peer, err = netns.New(); err != nil {
			return fmt.Errorf("creating the peer namespace: %w", err)
		}
		return nil
	})
	t.Cleanup(func() {
		if n.hNode != nil {
			n.hNode.Close()
		}
		if n.hPeer != nil {
			n.hPeer.Close()
		}
		n.node.Close()
		n.peer.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	if n.hNode, err = netlink.NewHandleAt(n.node); err != nil {
		t.Fatal(err)
	}
	if n.hPeer, err = netlink.NewHandleAt(n.peer); err != nil {
		t.Fatal(err)
	}
	return n
}

// veth creates name in the node namespace, down, with its peer up in the
// peer namespace (so name has carrier once it is up), and returns it.
func (n *testNet) veth(t *testing.T, name, peer string) netlink.Link {
	t.Helper()
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: peer, PeerNamespace: netlink.NsFd(n.peer)}
	if err := n.hNode.LinkAdd(v); err != nil {
		t.Fatalf("creating veth %s/%s: %v", name, peer, err)
	}
	p, err := n.hPeer.LinkByName(peer)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.hPeer.LinkSetUp(p); err != nil {
		t.Fatal(err)
	}
	l, err := n.hNode.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// configure does what DHCP would: address, link up, default route.
func (n *testNet) configure(t *testing.T, l netlink.Link, cidr, gw string, metric int) {
	t.Helper()
	a, err := netlink.ParseAddr(cidr)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.hNode.AddrAdd(l, a); err != nil {
		t.Fatalf("adding %s to %s: %v", cidr, l.Attrs().Name, err)
	}
	if err := n.hNode.LinkSetUp(l); err != nil {
		t.Fatal(err)
	}
	r := &netlink.Route{LinkIndex: l.Attrs().Index, Gw: net.ParseIP(gw), Priority: metric}
	if err := n.hNode.RouteAdd(r); err != nil {
		t.Fatalf("adding default route via %s: %v", gw, err)
	}
}

type waitResult struct {
	p   Primary
	err error
}

// waitIn runs Wait with the calling thread in the node namespace and reports
// on the returned channel; every log line also goes to lines.
func (n *testNet) waitIn(t *testing.T, o WaitOptions, lines chan<- string) <-chan waitResult {
	res := make(chan waitResult, 1)
	o.Logf = func(format string, args ...any) {
		line := fmt.Sprintf(format, args...)
		t.Log(line)
		if lines != nil {
			select {
			case lines <- line:
			default:
			}
		}
	}
	go func() {
		var r waitResult
		_ = onOwnThread(func() error {
			if err := netns.Set(n.node); err != nil {
				r.err = fmt.Errorf("entering the node namespace: %w", err)
				return nil
			}
			r.p, r.err = Wait(context.Background(), o)
			return nil
		})
		res <- r
	}()
	return res
}

func TestWaitInNamespace(t *testing.T) {
	requireRoot(t)
	n := newTestNet(t)
	eth0 := n.veth(t, "eth0", "peer0")

	lines := make(chan string, 16)
	res := n.waitIn(t, WaitOptions{Timeout: time.Minute}, lines)

	// Let Wait see the unconfigured interface first, then configure it the way
	// DHCP would, a moment later.
	select {
	case line := <-lines:
		if line != "network: waiting: no IPv4 default route on any interface (eth0 down, no address)" {
			t.Errorf("first log line %q", line)
		}
	case r := <-res:
		t.Fatalf("Wait returned before the interface was configured: %+v, %v", r.p, r.err)
	}
	time.Sleep(time.Second)
	n.configure(t, eth0, "10.99.0.2/24", "10.99.0.1", 0)

	r := <-res
	if r.err != nil {
		t.Fatal(r.err)
	}
	want := Primary{Link: "eth0", Index: eth0.Attrs().Index, MAC: eth0.Attrs().HardwareAddr.String(),
		IPv4: net.ParseIP("10.99.0.2"), Prefix: 24, Gateway: net.ParseIP("10.99.0.1")}
	if r.p.Link != want.Link || r.p.Index != want.Index || r.p.MAC != want.MAC || !r.p.IPv4.Equal(want.IPv4) ||
		r.p.Prefix != want.Prefix || !r.p.Gateway.Equal(want.Gateway) {
		t.Errorf("Wait = %+v\nwant   %+v", r.p, want)
	}
}

func TestWaitInNamespacePreferredMAC(t *testing.T) {
	requireRoot(t)
	n := newTestNet(t)
	eth0 := n.veth(t, "eth0", "peer0")
	eth1 := n.veth(t, "eth1", "peer1")
	// eth0 has the better default route; the metadata says eth1 is primary.
	n.configure(t, eth0, "10.99.0.2/24", "10.99.0.1", 100)
	n.configure(t, eth1, "10.98.0.2/24", "10.98.0.1", 200)

	mac := strings.ToUpper(eth1.Attrs().HardwareAddr.String())
	r := <-n.waitIn(t, WaitOptions{Timeout: time.Minute, PreferredMAC: mac}, nil)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.p.Link != "eth1" || r.p.IPv4.String() != "10.98.0.2" || r.p.Gateway.String() != "10.98.0.1" {
		t.Errorf("Wait = %+v, want eth1 10.98.0.2 via 10.98.0.1", r.p)
	}
}

func TestWaitInNamespaceTimesOut(t *testing.T) {
	requireRoot(t)
	n := newTestNet(t)
	eth0 := n.veth(t, "eth0", "peer0")
	if err := n.hNode.LinkSetUp(eth0); err != nil {
		t.Fatal(err)
	}

	r := <-n.waitIn(t, WaitOptions{Timeout: time.Second}, nil)
	want := "network: no IPv4 default route on any interface after 1s (eth0 up, no address): check the VPC DHCP / vSwitch"
	if r.err == nil || r.err.Error() != want {
		t.Fatalf("Wait = %+v, %v\nwant error: %s", r.p, r.err, want)
	}
}

func TestSetHostnameInUTSNamespace(t *testing.T) {
	requireRoot(t)
	before, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	var set, kernel string
	err = onOwnThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWUTS); err != nil {
			return fmt.Errorf("unsharing the UTS namespace: %w", err)
		}
		var err error
		if set, err = SetHostname(root, "iZbp1DroverTestZ", t.Logf); err != nil {
			return err
		}
		var u unix.Utsname
		if err := unix.Uname(&u); err != nil {
			return err
		}
		kernel = unix.ByteSliceToString(u.Nodename[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if set != "izbp1drovertestz" || kernel != set {
		t.Errorf("SetHostname = %q, kernel nodename %q; want izbp1drovertestz", set, kernel)
	}
	if b, err := os.ReadFile(filepath.Join(root, "etc/hostname")); err != nil || string(b) != "izbp1drovertestz\n" {
		t.Errorf("etc/hostname = %q, %v", b, err)
	}
	if after, _ := os.Hostname(); after != before {
		t.Errorf("the host's hostname changed from %q to %q", before, after)
	}
}

func TestRunInNamespaces(t *testing.T) {
	requireRoot(t)
	n := newTestNet(t)
	eth0 := n.veth(t, "eth0", "peer0")
	n.configure(t, eth0, "10.99.0.2/24", "10.99.0.1", 0)
	root := procRoot(t, map[string]string{
		"net.ipv4.ip_forward":                 "0",
		"net.bridge.bridge-nf-call-iptables":  "0",
		"net.bridge.bridge-nf-call-ip6tables": "0",
	})

	var res Result
	err := onOwnThread(func() error {
		if err := netns.Set(n.node); err != nil {
			return err
		}
		if err := unix.Unshare(unix.CLONE_NEWUTS); err != nil {
			return err
		}
		var err error
		// No modules: loading real ones needs the host's kernel tree (see
		// TestFinitModuleNamesModule for the loader).
		res, err = Run(context.Background(), Config{Root: root, Timeout: time.Minute, Hostname: "Node-1",
			Modules: []string{}, Logf: t.Logf})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Primary.Link != "eth0" || res.Primary.IPv4.String() != "10.99.0.2" || res.Hostname != "node-1" {
		t.Errorf("Run = %+v", res)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "proc/sys/net/bridge/bridge-nf-call-iptables")); string(b) != "1\n" {
		t.Errorf("bridge-nf-call-iptables = %q", b)
	}
}

func TestFinitModuleNamesModule(t *testing.T) {
	requireRoot(t)
	// A file that is not a module, in a module tree for the running kernel:
	// the real loader must find it under the root and hand it to the kernel,
	// whose refusal (ENOEXEC; EPERM where module loading is locked down;
	// ENOSYS without module support) names the module.
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	release := unix.ByteSliceToString(u.Release[:])
	root := t.TempDir()
	dir := filepath.Join(root, "usr/lib/modules", release)
	if err := os.MkdirAll(filepath.Join(dir, "kernel/drover"), 0o755); err != nil {
		t.Fatal(err)
	}
	dep := "kernel/drover/drover_not_a_module.ko:\n"
	if err := os.WriteFile(filepath.Join(dir, "modules.dep"), []byte(dep), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kernel/drover/drover_not_a_module.ko"), []byte("not an ELF file"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := LoadModules(root, "drover_not_a_module")
	t.Logf("LoadModules: %v", err)
	var errno unix.Errno
	if !errors.As(err, &errno) || errors.Is(err, os.ErrNotExist) {
		t.Fatalf("want a kernel refusal, got %v", err)
	}
	if !strings.Contains(err.Error(), "loading kernel module drover_not_a_module from "+filepath.Join(dir, "kernel/drover/drover_not_a_module.ko")) {
		t.Errorf("error does not name the module and file: %v", err)
	}
}

// The resident agent watches links with its capabilities dropped: the
// watch must work without CAP_NET_ADMIN (netlink refuses a message sent to
// a multicast group without it, which is how a subscribed socket's dump
// request is addressed).
func TestWatchLinksWithoutCapabilities(t *testing.T) {
	requireRoot(t)
	n := newTestNet(t)
	l := n.veth(t, "eth0", "sw0")
	if err := n.hNode.LinkSetUp(l); err != nil {
		t.Fatal(err)
	}
	updates := make(chan string, 256)
	errc := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_ = onOwnThread(func() error {
			if err := netns.Set(n.node); err != nil {
				errc <- err
				return nil
			}
			// No capability left on this thread, as in the resident agent.
			hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
			var none [2]unix.CapUserData
			if err := unix.Capset(&hdr, &none[0]); err != nil {
				errc <- fmt.Errorf("dropping capabilities: %w", err)
				return nil
			}
			errc <- WatchLinks(ctx, func(l Link, deleted bool) {
				updates <- fmt.Sprintf("%s up=%v carrier=%v deleted=%v", l.Name, l.Up, l.Carrier, deleted)

			})
			return nil
		})
	}()
	want := func(s string) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case u := <-updates:
				if u == s {
					return
				}
			case err := <-errc:
				t.Fatalf("WatchLinks returned %v before %q", err, s)
			case <-deadline:
				t.Fatalf("no update %q within 10s", s)
			}
		}
	}
	want("eth0 up=true carrier=true deleted=false") // listed at the start
	p, err := n.hPeer.LinkByName("sw0")
	if err != nil {
		t.Fatal(err)
	}
	if err := n.hPeer.LinkSetDown(p); err != nil {
		t.Fatal(err)
	}
	want("eth0 up=true carrier=false deleted=false")
	if err := n.hPeer.LinkSetUp(p); err != nil {
		t.Fatal(err)
	}
	want("eth0 up=true carrier=true deleted=false")
}
