package ignition

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// validateDestinations is drover validate's policy without
// --allow-private-sources.
var validateDestinations = Destinations{Flag: "--allow-private-sources"}

// clientAdmitting is a RemoteClient that may also connect to the test
// servers listening at addrs (on loopback, which the policy refuses);
// everything else is judged by the node's policy.
func clientAdmitting(t *testing.T, addrs ...net.Addr) *http.Client {
	t.Helper()
	ok := map[netip.AddrPort]bool{}
	for _, a := range addrs {
		ap, err := netip.ParseAddrPort(a.String())
		must(t, err)
		ok[ap] = true
	}
	d := NodeDestinations
	d.admit = func(ap netip.AddrPort) bool { return ok[ap] }
	return RemoteClientFor(d)
}

func TestDestinationsCheck(t *testing.T) {
	for _, tc := range []struct {
		addr      string
		node, dev string // "" allowed, else a word of the refusal
	}{
		{"8.8.8.8", "", ""},
		{"47.96.1.1", "", ""},
		{"2001:4860:4860::8888", "", ""},
		{"127.0.0.1", "loopback", "loopback"},
		{"127.1.2.3", "loopback", "loopback"},
		{"::1", "loopback", "loopback"},
		{"::ffff:127.0.0.1", "loopback", "loopback"},
		{"100.100.100.200", "metadata", "metadata"},
		{"::ffff:100.100.100.200", "metadata", "metadata"},
		{"64:ff9b::6464:64c8", "metadata", "metadata"}, // NAT64 of 100.100.100.200
		{"169.254.169.254", "link-local", "link-local"},
		{"fe80::1%eth0", "link-local", "link-local"},
		{"0.0.0.0", "unspecified", "unspecified"},
		{"0.1.2.3", "unspecified", "unspecified"},
		{"::", "unspecified", "unspecified"},
		{"224.0.0.1", "multicast", "multicast"},
		{"ff02::1", "multicast", "multicast"},
		{"255.255.255.255", "broadcast", "broadcast"},
		{"10.1.2.3", "", "RFC 1918"},
		{"172.16.0.1", "", "RFC 1918"},
		{"192.168.1.1", "", "RFC 1918"},
		{"100.64.0.1", "", "carrier-grade NAT"},
		{"100.118.28.1", "", "carrier-grade NAT"},
		{"fd00::1", "", "fc00::/7"},
		{"64:ff9b::a01:203", "", "RFC 1918"}, // NAT64 of 10.1.2.3
	} {
		a := netip.MustParseAddr(tc.addr)
		for _, c := range []struct {
			name string
			d    Destinations
			want string
		}{{"node", NodeDestinations, tc.node}, {"validate", validateDestinations, tc.dev}} {
			err := c.d.Check(a)
			var de *DestinationError
			switch {
			case c.want == "" && err != nil:
				t.Errorf("%s: %s refused: %v", c.name, tc.addr, err)
			case c.want != "" && (!errors.As(err, &de) || !strings.Contains(err.Error(), c.want)):
				t.Errorf("%s: %s: %v, want a refusal saying %q", c.name, tc.addr, err, c.want)
			}
		}
	}
	err := validateDestinations.Check(netip.MustParseAddr("10.0.0.1"))
	if err == nil || !strings.Contains(err.Error(), "only with --allow-private-sources") {
		t.Errorf("a private refusal does not name the flag: %v", err)
	}
	err = validateDestinations.Check(netip.MustParseAddr("127.0.0.1"))
	if err == nil || strings.Contains(err.Error(), "--allow-private-sources") {
		t.Errorf("a loopback refusal names the flag, which cannot allow it: %v", err)
	}
}

// recorder is a TCP listener that records every connection made to it.
type recorder struct {
	net.Listener
	mu    sync.Mutex
	peers []string
	seen  int // peers already accounted for by noConnections
	done  chan struct{}
}

func listenRecording(t *testing.T) *recorder {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	r := &recorder{Listener: l, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			r.mu.Lock()
			r.peers = append(r.peers, c.RemoteAddr().String())
			r.mu.Unlock()
			c.Close()
		}
	}()
	t.Cleanup(func() { l.Close(); <-r.done })
	return r
}

// noConnections proves that nothing connected to r since the last call:
// a connection of our own, made now, must be the next r accepts.
func (r *recorder) noConnections(t *testing.T, what string) {
	t.Helper()
	c, err := net.Dial("tcp", r.Addr().String())
	must(t, err)
	defer c.Close()
	mine := c.LocalAddr().String()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		r.mu.Lock()
		fresh := append([]string(nil), r.peers[r.seen:]...)
		r.mu.Unlock()
		if !slices.Contains(fresh, mine) {
			continue
		}
		if fresh[0] != mine {
			t.Errorf("%s: something connected to the refused address (%v) before the probe %s", what, fresh, mine)
		}
		r.mu.Lock()
		r.seen = len(r.peers)
		r.mu.Unlock()
		return
	}
	t.Fatalf("%s: the probe connection was never accepted", what)
}

// TestRemoteClientRefusesBeforeConnecting: loopback is refused when the
// connection is about to be made, whether the URL names the address or a
// host name resolving to it, and nothing reaches the listener; the
// metadata service, link-local and (by default) private addresses are
// refused the same way, at once, without a connection attempt to wait on.
func TestRemoteClientRefusesBeforeConnecting(t *testing.T) {
	l := listenRecording(t)
	_, port, _ := net.SplitHostPort(l.Addr().String())
	ctx := context.Background()
	for _, d := range []Destinations{NodeDestinations, validateDestinations} {
		f := &HTTPFetcher{Client: RemoteClientFor(d)}
		for _, url := range []string{"http://127.0.0.1:" + port + "/x", "http://localhost:" + port + "/x"} {
			_, err := f.Get(ctx, url)
			var de *DestinationError
			if !errors.As(err, &de) || !strings.Contains(err.Error(), url) || !strings.Contains(err.Error(), "loopback") {
				t.Errorf("%s (private allowed: %v): %v, want a refusal naming the URL and why", url, d.AllowPrivate, err)
			}
		}
	}
	l.noConnections(t, "loopback")

	f := &HTTPFetcher{Client: RemoteClientFor(validateDestinations)}
	for url, want := range map[string]string{
		"http://100.100.100.200/latest/user-data":                     "refused to connect to 100.100.100.200: it is the ECS instance metadata service",
		"http://169.254.169.254/latest/meta-data/":                    "refused to connect to 169.254.169.254: it is a link-local address",
		"https://[fe80::1%25lo]/x":                                    "refused to connect to fe80::1: it is a link-local address",
		"http://10.255.255.1/node.yaml":                               "refused to connect to 10.255.255.1: it is a private address (RFC 1918); private addresses are fetched from only with --allow-private-sources",
		"http://100.118.28.1/bucket/x":                                "carrier-grade NAT",
		"http://[fd00::1]/x":                                          "unique local",
		"http://[::ffff:100.100.100.200]/latest/meta-data/ram/x":      "metadata service",
		"http://0.0.0.0:" + port + "/x":                               "unspecified",
		"http://[64:ff9b::a9fe:a9fe]/latest/meta-data/iam/security-x": "link-local",
	} {
		start := time.Now()
		_, err := f.Get(ctx, url)
		var de *DestinationError
		if !errors.As(err, &de) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", url, err, want)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: refused after %s: a connection was attempted", url, d)
		}
	}
	l.noConnections(t, "unspecified")
}

// TestRemoteClientRefusesRedirects: a redirect is followed only to where
// the policy allows, and at most 3 times.
func TestRemoteClientRefusesRedirects(t *testing.T) {
	inner := listenRecording(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/to-loopback":
			http.Redirect(w, r, "http://"+inner.Addr().String()+"/secret", http.StatusFound)
		case "/to-metadata":
			http.Redirect(w, r, "http://100.100.100.200/latest/meta-data/ram/security-credentials/", http.StatusFound)
		case "/to-private":
			http.Redirect(w, r, "http://192.168.0.1/admin", http.StatusMovedPermanently)
		default:
			w.Write([]byte("ok"))
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	// The test's server is admitted; the redirect targets are judged.
	f := &HTTPFetcher{Client: clientAdmitting(t, srv.Listener.Addr())}
	if b, err := f.Get(ctx, srv.URL+"/plain"); err != nil || string(b) != "ok" {
		t.Fatalf("the admitted server: %q, %v", b, err)
	}
	for path, want := range map[string]string{
		"/to-loopback": "refused to connect to 127.0.0.1: it is a loopback address",
		"/to-metadata": "refused to connect to 100.100.100.200: it is the ECS instance metadata service",
	} {
		_, err := f.Get(ctx, srv.URL+path)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), srv.URL+path) {
			t.Errorf("redirect %s: %v, want %q naming the URL", path, err, want)
		}
	}
	inner.noConnections(t, "redirect to loopback")

	d := validateDestinations
	d.admit = func(ap netip.AddrPort) bool { return ap.String() == srv.Listener.Addr().String() }
	_, err := (&HTTPFetcher{Client: RemoteClientFor(d)}).Get(ctx, srv.URL+"/to-private")
	if err == nil || !strings.Contains(err.Error(), "192.168.0.1") || !strings.Contains(err.Error(), "--allow-private-sources") {
		t.Errorf("redirect to a private address: %v", err)
	}
}
