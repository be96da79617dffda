package systemd

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
)

func TestWaitActive(t *testing.T) {
	f := &Fake{States: map[string]string{"a.service": "active", "b.service": "failed"}}
	if err := WaitActive(context.Background(), f, "a.service"); err != nil {
		t.Fatal(err)
	}
	err := WaitActive(context.Background(), f, "b.service")
	if err == nil || err.Error() != "b.service failed; see journalctl -u b.service" {
		t.Fatalf("got %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err = WaitActive(ctx, f, "c.service")
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "(now inactive)") {
		t.Fatalf("got %v", err)
	}
}

func TestFakeRecordsCalls(t *testing.T) {
	f := &Fake{Fail: map[string]error{"kubelet.service": errors.New("boom")}}
	f.Reload(context.Background())
	f.Start(context.Background(), "containerd.service")
	if err := f.Start(context.Background(), "kubelet.service"); err == nil {
		t.Fatal("want failure")
	}
	if got := strings.Join(f.Calls, ","); got != "reload,start containerd.service,start kubelet.service" {
		t.Errorf("calls %s", got)
	}
	if err := Notify("READY=1"); err != nil {
		t.Errorf("Notify outside systemd must be a no-op: %v", err)
	}
}

// TestConnDialsOnFirstUse: no socket until a call needs one (systemd sends
// every open private connection all its signals), the dial's error names
// the socket and the call, and a Close lets the next call dial again.
func TestConnDialsOnFirstUse(t *testing.T) {
	dials := 0
	c := &Conn{dial: func(context.Context) (*sddbus.Conn, error) {
		dials++
		return nil, errors.New("no such file or directory")
	}}
	err := c.Start(context.Background(), "containerd.service")
	if err == nil || err.Error() != "starting containerd.service: connecting to systemd on /run/systemd/private: no such file or directory" {
		t.Fatalf("Start: %v", err)
	}
	res := c.StartAll(context.Background(), []string{"a.service", "b.service"})
	for _, r := range res {
		if r.OK() || !strings.Contains(r.Error, "/run/systemd/private") {
			t.Fatalf("StartAll without systemd: %+v", r)
		}
	}
	if dials != 2 {
		t.Fatalf("%d dials for two calls that failed to connect; want one each", dials)
	}
	c.Close()
	if _, err := c.ActiveState(context.Background(), "a.service"); err == nil || dials != 3 {
		t.Fatalf("after Close: %v, %d dials", err, dials)
	}
}

// TestOneSocket: go-systemd dials twice (calls, signals); both get the
// same connection, and a failed dial is not kept.
func TestOneSocket(t *testing.T) {
	n := 0
	fail := true
	dial := oneSocket(func() (int, error) {
		n++
		if fail {
			return 0, errors.New("refused")
		}
		return n, nil
	})
	if _, err := dial(); err == nil {
		t.Fatal("a failed dial returned no error")
	}
	fail = false
	a, err1 := dial()
	b, err2 := dial()
	if err1 != nil || err2 != nil || a != b || n != 2 {
		t.Fatalf("got %d, %d (%v, %v) after %d dials; want one connection from the second dial", a, b, err1, err2, n)
	}
}
