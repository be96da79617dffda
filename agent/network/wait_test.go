package network

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
)

// script hands out snapshots in order, repeating the last one, and records
// what the loop logged.
type script struct {
	mu    sync.Mutex
	snaps []Snapshot
	errs  []error
	taken int
	log   []string
}

func (s *script) take() (Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := min(s.taken, len(s.snaps)-1)
	s.taken++
	var err error
	if i < len(s.errs) {
		err = s.errs[i]
	}
	return s.snaps[i], err
}

func (s *script) logf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, fmt.Sprintf(format, args...))
}

func TestWaitBecomesReadyOnNotification(t *testing.T) {
	up := Snapshot{Links: []Link{lo, eth0}}
	addressed := Snapshot{Links: []Link{lo, eth0}, Addrs: []Addr{addr(2, "10.99.0.2/24")}}
	ready := Snapshot{Links: []Link{lo, eth0}, Addrs: []Addr{addr(2, "10.99.0.2/24")},
		Routes: []Route{defRoute(2, "10.99.0.1", 0)}}
	s := &script{snaps: []Snapshot{up, up, addressed, ready}}

	// Notifications drive the loop; the ticker is set far beyond the test.
	changes := make(chan struct{})
	go func() {
		for range 3 {
			changes <- struct{}{}
		}
	}()
	p, err := wait(context.Background(), WaitOptions{Timeout: time.Hour, Interval: time.Hour, Logf: s.logf}, s.take, changes)
	if err != nil {
		t.Fatal(err)
	}
	if p.Link != "eth0" || p.IPv4.String() != "10.99.0.2" || p.Gateway.String() != "10.99.0.1" {
		t.Errorf("primary = %+v", p)
	}
	want := []string{
		"network: waiting: no IPv4 default route on any interface (eth0 up, no address)",
		"network: waiting: no IPv4 default route on any interface (eth0 up, 10.99.0.2/24)",
		"network: primary interface eth0 (" + mac0 + ") 10.99.0.2/24, default via 10.99.0.1",
	}
	if strings.Join(s.log, "\n") != strings.Join(want, "\n") {
		t.Errorf("log (an unchanged state is logged once):\n%s\nwant:\n%s", strings.Join(s.log, "\n"), strings.Join(want, "\n"))
	}
}

func TestWaitPollsWithoutNotifications(t *testing.T) {
	ready := Snapshot{Links: []Link{lo, eth0}, Addrs: []Addr{addr(2, "10.99.0.2/24")},
		Routes: []Route{defRoute(2, "10.99.0.1", 0)}}
	s := &script{snaps: []Snapshot{{}, {Links: []Link{lo, eth0}}, ready}}
	p, err := wait(context.Background(), WaitOptions{Timeout: time.Hour, Interval: time.Millisecond}, s.take, nil)
	if err != nil || p.Link != "eth0" {
		t.Fatalf("wait = %+v, %v", p, err)
	}
}

func TestWaitTimeoutSaysWhatItSaw(t *testing.T) {
	s := &script{snaps: []Snapshot{{Links: []Link{lo, eth0}}}}
	_, err := wait(context.Background(), WaitOptions{Timeout: 20 * time.Millisecond, Interval: time.Millisecond}, s.take, nil)
	want := "network: no IPv4 default route on any interface after 20ms (eth0 up, no address): check the VPC DHCP / vSwitch"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
}

func TestWaitDefaultTimeoutInMessage(t *testing.T) {
	// The default is only visible in the message; a cancelled context ends
	// the wait long before it.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := &script{snaps: []Snapshot{{Links: []Link{lo, eth0dn}}}}
	_, err := wait(ctx, WaitOptions{}, s.take, nil)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "(eth0 down, no address)") {
		t.Fatalf("err = %v", err)
	}
	if got := fmt.Sprint(DefaultTimeout); got != "2m0s" {
		t.Errorf("DefaultTimeout prints as %s", got)
	}
}

func TestWaitRetriesInterruptedDump(t *testing.T) {
	ready := Snapshot{Links: []Link{lo, eth0}, Addrs: []Addr{addr(2, "10.99.0.2/24")},
		Routes: []Route{defRoute(2, "10.99.0.1", 0)}}
	s := &script{
		snaps: []Snapshot{{}, ready},
		errs:  []error{fmt.Errorf("listing links: %w", netlink.ErrDumpInterrupted)},
	}
	p, err := wait(context.Background(), WaitOptions{Timeout: time.Hour, Interval: time.Millisecond}, s.take, nil)
	if err != nil || p.Link != "eth0" {
		t.Fatalf("wait = %+v, %v", p, err)
	}
}

func TestWaitFailsOnNetlinkError(t *testing.T) {
	s := &script{snaps: []Snapshot{{}}, errs: []error{errors.New("listing links: permission denied")}}
	_, err := wait(context.Background(), WaitOptions{Timeout: time.Hour}, s.take, nil)
	if err == nil || err.Error() != "network: reading links, addresses and routes: listing links: permission denied" {
		t.Fatalf("err = %v", err)
	}
}

func TestWaitRejectsBadPreferredMAC(t *testing.T) {
	_, err := Wait(context.Background(), WaitOptions{PreferredMAC: "not-a-mac"})
	if err == nil || !strings.Contains(err.Error(), `preferred MAC "not-a-mac"`) {
		t.Fatalf("err = %v", err)
	}
}
