package agent

import (
	"bytes"
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-os/drover/agent/credstatus"
	"github.com/drover-os/drover/agent/health"
)

// TestWatchCredentials: no status file yet is quiet; the provider's
// failure becomes one Warning finding whose reason and evidence name the
// cause; the same failure read again is not reported twice; a status the
// agent cannot parse is noted once.
func TestWatchCredentials(t *testing.T) {
	var mu sync.Mutex
	var file []byte
	var readErr error = os.ErrNotExist
	set := func(b []byte, err error) {
		mu.Lock()
		file, readErr = b, err
		mu.Unlock()
	}
	read := func() ([]byte, error) {
		mu.Lock()
		defer mu.Unlock()
		return file, readErr
	}
	var notes []string
	var nmu sync.Mutex
	note := func(s string) { nmu.Lock(); notes = append(notes, s); nmu.Unlock() }
	found := make(chan health.Finding, 16)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go watchCredentials(ctx, read, &credstatus.Watch{}, time.Millisecond, found, note)

	time.Sleep(20 * time.Millisecond)
	set([]byte("{"), nil)
	time.Sleep(20 * time.Millisecond)
	var b bytes.Buffer
	credstatus.Encode(&b, credstatus.Status{Time: time.Now(), Registry: "100.64.0.2:5000", Class: credstatus.NoRAMRole,
		Message: "credentials for 100.64.0.2:5000: the instance has no RAM role attached"})
	set(b.Bytes(), nil)
	select {
	case f := <-found:
		if f.Event != "ACRNoRAMRole" || !strings.Contains(f.Evidence, "no RAM role attached") || !strings.Contains(f.Evidence, "100.64.0.2:5000") {
			t.Errorf("finding %+v", f)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no finding for the failure")
	}
	select {
	case f := <-found:
		t.Errorf("the same status reported again: %+v", f)
	case <-time.After(50 * time.Millisecond):
	}
	nmu.Lock()
	defer nmu.Unlock()
	if len(notes) != 1 || !strings.Contains(notes[0], "credential watch") {
		t.Errorf("notes %q, want one about the unreadable status", notes)
	}
}
