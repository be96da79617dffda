package systemd

import (
	"context"
	"fmt"
	"strings"
	"sync"
)

// Fake is an in-memory Manager for tests of code that drives systemd.
type Fake struct {
	mu     sync.Mutex
	Calls  []string          // "reload", "start X", "restart X"
	States map[string]string // unit -> state after Start (default "active")
	Fail   map[string]error  // unit -> error returned by Start
	// Hold makes Start of a unit wait until its channel is closed (after
	// recording the call), as a slow start-up would.
	Hold    map[string]chan struct{}
	Reloads int
	// Units is what Resolve answers; a unit not in it resolves as the
	// image ships it (ImageUnit).
	Units map[string]Resolved
}

// ImageUnit is a unit as the image ships it: its fragment in
// /usr/lib/systemd/system, no drop-ins, and for the services the agent
// judges, their image ExecStart and environment files.
func ImageUnit(unit string) Resolved {
	r := Resolved{Unit: unit, LoadState: "loaded", FragmentPath: "/usr/lib/systemd/system/" + unit}
	switch unit {
	case "kubelet.service":
		r.ExecStart = [][]string{{"/usr/bin/kubelet", "$KUBELET_ARGS"}}
		r.EnvironmentFiles = []string{"/etc/default/kubelet"}
	case "containerd.service":
		r.ExecStart = [][]string{{"/usr/bin/containerd"}}
	case "drover-agent.service":
		r.ExecStart = [][]string{{"/usr/bin/drover-agent", "run"}}
	}
	return r
}

// Resolve answers from Units, else ImageUnit.
func (f *Fake) Resolve(ctx context.Context, unit string) (Resolved, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.Units[unit]; ok {
		return r, nil
	}
	return ImageUnit(unit), nil
}

// Stop records the stop.
func (f *Fake) Stop(ctx context.Context, unit string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls = append(f.Calls, "stop "+unit)
	return nil
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
	err := f.job("start", unit)
	f.mu.Lock()
	hold := f.Hold[unit]
	f.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return err
}

// Called says whether call ("start X", …) has been made.
func (f *Fake) Called(call string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.Calls {
		if c == call {
			return true
		}
	}
	return false
}

// Restart records the restart and returns what Start would.
func (f *Fake) Restart(ctx context.Context, unit string) error {
	return f.job("restart", unit)
}

func (f *Fake) job(verb, unit string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls = append(f.Calls, verb+" "+unit)
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

// StartAll records one "start-all A B …" call and reports each unit as
// Start would leave it: done and active, or failed with result exit-code
// for a unit in Fail or with a state other than active.
func (f *Fake) StartAll(ctx context.Context, units []string) []UnitResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls = append(f.Calls, "start-all "+strings.Join(units, " "))
	if f.States == nil {
		f.States = map[string]string{}
	}
	out := make([]UnitResult, len(units))
	for i, u := range units {
		if _, ok := f.States[u]; !ok {
			f.States[u] = "active"
		}
		if f.Fail[u] != nil {
			f.States[u] = "failed"
		}
		r := UnitResult{Unit: u, Job: "done", Active: f.States[u], Result: "success"}
		if r.Active == "failed" {
			r.Job, r.Result = "failed", "exit-code"
		}
		out[i] = r
	}
	return out
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
