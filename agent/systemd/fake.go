package systemd

import (
	"context"
	"fmt"
	"sync"
)

// Fake is an in-memory Manager for tests of code that drives systemd.
type Fake struct {
	mu      sync.Mutex
	Calls   []string          // "reload", "start X"
	States  map[string]string // unit -> state after Start (default "active")
	Fail    map[string]error  // unit -> error returned by Start
	Reloads int
}

// Reload records a daemon-reload.
func (f *Fake) Reload(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls = append(f.Calls, "reload")
	f.Reloads++
	return nil
}

// Start records the start and returns the configured error.
func (f *Fake) Start(ctx context.Context, unit string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls = append(f.Calls, "start "+unit)
	if err := f.Fail[unit]; err != nil {
		return err
	}
	if f.States == nil {
		f.States = map[string]string{}
	}
	if _, ok := f.States[unit]; !ok {
		f.States[unit] = "active"
	}
	if s := f.States[unit]; s != "active" {
		return fmt.Errorf("%s failed; see journalctl -u %s", unit, unit)
	}
	return nil
}

// ActiveState returns the recorded state ("inactive" if never started).
func (f *Fake) ActiveState(ctx context.Context, unit string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.States[unit]; ok {
		return s, nil
	}
	return "inactive", nil
}

// Close does nothing.
func (f *Fake) Close() {}
