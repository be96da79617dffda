package systemd

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
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
