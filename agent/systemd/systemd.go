// Package systemd is the agent's one applier for systemd: daemon-reload,
// starting units and waiting for their job result and active state, over
// systemd's private socket (/run/systemd/private) so it works before
// dbus-daemon is up; plus sd_notify. Decisions about which units to start
// live in the agent; this package only talks to systemd.
package systemd

import (
	"context"
	"fmt"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
)

// Manager is what the agent needs from systemd. Fake implements it for tests.
type Manager interface {
	Reload(ctx context.Context) error
	// Start starts a unit and waits until its job finished and the unit is
	// active (or, for Type=oneshot units, has exited successfully).
	Start(ctx context.Context, unit string) error
	// Restart restarts a unit (starts it if it is not running) and waits
	// as Start does.
	Restart(ctx context.Context, unit string) error
	// StartAll queues start jobs for all units at once, so that systemd
	// orders them by their dependencies, and waits for every result.
	StartAll(ctx context.Context, units []string) []UnitResult
	// ActiveState returns e.g. "active", "failed", "inactive".
	ActiveState(ctx context.Context, unit string) (string, error)
	Close()
}

// Conn is the real Manager.
type Conn struct{ c *sddbus.Conn }

// Dial connects to systemd's private socket.
func Dial(ctx context.Context) (*Conn, error) {
	c, err := sddbus.NewSystemdConnectionContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("connecting to systemd on /run/systemd/private: %w", err)
	}
	return &Conn{c: c}, nil
}

// Close closes the connection.
func (c *Conn) Close() { c.c.Close() }

// Reload runs daemon-reload so units written by the agent are seen.
func (c *Conn) Reload(ctx context.Context) error {
	if err := c.c.ReloadContext(ctx); err != nil {
		return fmt.Errorf("systemd daemon-reload: %w", err)
	}
	return nil
}

// Start starts unit (mode "replace") and waits for the job result, then for
// the unit to be active. The job channel is always drained so go-systemd's
// dispatcher never blocks.
func (c *Conn) Start(ctx context.Context, unit string) error {
	return c.job(ctx, "starting", c.c.StartUnitContext, unit)
}

// Restart restarts unit (mode "replace") and waits as Start does.
func (c *Conn) Restart(ctx context.Context, unit string) error {
	return c.job(ctx, "restarting", c.c.RestartUnitContext, unit)
}

func (c *Conn) job(ctx context.Context, verb string, queue func(context.Context, string, string, chan<- string) (int, error), unit string) error {
	ch := make(chan string, 1)
	if _, err := queue(ctx, unit, "replace", ch); err != nil {
		return fmt.Errorf("%s %s: %w", verb, unit, err)
	}
	select {
	case res := <-ch:
		if res != "done" {
			state, _ := c.ActiveState(ctx, unit)
			return fmt.Errorf("%s %s: job %s (unit is %s); see journalctl -u %s", verb, unit, res, state, unit)
		}
	case <-ctx.Done():
		go func() { <-ch }()
		return fmt.Errorf("%s %s: %w", verb, unit, ctx.Err())
	}
	return WaitActive(ctx, c, unit)
}

// ActiveState reads the unit's ActiveState property.
func (c *Conn) ActiveState(ctx context.Context, unit string) (string, error) {
	p, err := c.c.GetUnitPropertyContext(ctx, unit, "ActiveState")
	if err != nil {
		return "", fmt.Errorf("reading %s state: %w", unit, err)
	}
	s, _ := p.Value.Value().(string)
	return s, nil
}

// WaitActive polls until unit is active; failed is an error at once.
func WaitActive(ctx context.Context, m Manager, unit string) error {
	for {
		s, err := m.ActiveState(ctx, unit)
		if err != nil {
			return err
		}
		switch s {
		case "active":
			return nil
		case "failed":
			return fmt.Errorf("%s failed; see journalctl -u %s", unit, unit)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s to be active (now %s): %w", unit, s, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
