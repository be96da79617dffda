// Package systemd is the agent's one applier for systemd: daemon-reload,
// starting units and waiting for their job result and active state, over
// systemd's private socket (/run/systemd/private) so it works before
// dbus-daemon is up; plus sd_notify. Decisions about which units to start
// live in the agent; this package only talks to systemd.
package systemd

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
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
	// Resolve says how systemd loaded a unit (see Resolved).
	Resolve(ctx context.Context, unit string) (Resolved, error)
	// Stop stops a unit and waits for the job.
	Stop(ctx context.Context, unit string) error
	Close()
}

// Conn is the real Manager. It dials systemd on first use and holds one
// socket until Close. systemd sends every signal of every unit and job to
// every connection on its private socket, unasked ("send to all direct
// buses, unconditionally", bus_foreach_bus in src/core/dbus.c), and
// go-systemd dials twice, one socket for calls and one for signals. During
// the boot's busiest seconds that was two copies of the whole stream,
// which cost the agent 2.6 of its 4.9 s of CPU under emulation and
// systemd as much again to send. So: one socket for both, dialed when the
// agent first needs systemd (on a first boot, once the user-data is in),
// and closed once the node has joined (the drift guard needs no systemd).
type Conn struct {
	dial func(ctx context.Context) (*sddbus.Conn, error)
	mu   sync.Mutex
	c    *sddbus.Conn
}

// New returns a Conn to systemd's private socket that dials on first use.
func New() *Conn {
	return &Conn{dial: func(ctx context.Context) (*sddbus.Conn, error) {
		return sddbus.NewConnection(oneSocket(func() (*dbus.Conn, error) {
			// godbus closes a connection when its context ends; this one
			// outlives the call that dialed it, so only Close ends it.
			c, err := dbus.Dial("unix:path=/run/systemd/private", dbus.WithContext(context.WithoutCancel(ctx)))
			if err != nil {
				return nil, err
			}
			// EXTERNAL with the numeric uid, as go-systemd does: no user
			// name lookup. No Hello: there is no bus daemon on this socket.
			if err := c.Auth([]dbus.Auth{dbus.AuthExternal(strconv.Itoa(os.Getuid()))}); err != nil {
				c.Close()
				return nil, err
			}
			return c, nil
		}))
	}}
}

// oneSocket makes go-systemd's two dials (calls, signals) share one
// connection: the first dial connects, the second returns the same one.
func oneSocket[T any](dial func() (T, error)) func() (T, error) {
	var (
		c      T
		dialed bool
	)
	return func() (T, error) {
		if dialed {
			return c, nil
		}
		var err error
		if c, err = dial(); err != nil {
			return c, err
		}
		dialed = true
		return c, nil
	}
}

// conn returns the connection, dialing it if this is the first use since
// New or Close.
func (c *Conn) conn(ctx context.Context) (*sddbus.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c == nil {
		sc, err := c.dial(ctx)
		if err != nil {
			return nil, fmt.Errorf("connecting to systemd on /run/systemd/private: %w", err)
		}
		c.c = sc
	}
	return c.c, nil
}

// Close closes the connection, if one is open; a later call dials again.
// go-systemd closes both of its connections, here the same one twice,
// which godbus takes as a no-op the second time.
func (c *Conn) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c != nil {
		c.c.Close()
		c.c = nil
	}
}

// Reload runs daemon-reload so units written by the agent are seen.
func (c *Conn) Reload(ctx context.Context) error {
	sc, err := c.conn(ctx)
	if err != nil {
		return err
	}
	if err := sc.ReloadContext(ctx); err != nil {
		return fmt.Errorf("systemd daemon-reload: %w", err)
	}
	return nil
}

// Start starts unit (mode "replace") and waits for the job result, then for
// the unit to be active. The job channel is always drained so go-systemd's
// dispatcher never blocks.
func (c *Conn) Start(ctx context.Context, unit string) error {
	return c.job(ctx, "starting", (*sddbus.Conn).StartUnitContext, unit)
}

// Restart restarts unit (mode "replace") and waits as Start does.
func (c *Conn) Restart(ctx context.Context, unit string) error {
	return c.job(ctx, "restarting", (*sddbus.Conn).RestartUnitContext, unit)
}

func (c *Conn) job(ctx context.Context, verb string, queue func(*sddbus.Conn, context.Context, string, string, chan<- string) (int, error), unit string) error {
	sc, err := c.conn(ctx)
	if err != nil {
		return fmt.Errorf("%s %s: %w", verb, unit, err)
	}
	ch := make(chan string, 1)
	if _, err := queue(sc, ctx, unit, "replace", ch); err != nil {
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
	sc, err := c.conn(ctx)
	if err != nil {
		return "", err
	}
	p, err := sc.GetUnitPropertyContext(ctx, unit, "ActiveState")
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

// ServiceRestarts reads a service's NRestarts (how often systemd restarted
// it since boot) over a connection of its own, closed before it returns:
// the resident agent keeps none open, as systemd would send it every
// signal meanwhile (see Conn).
func ServiceRestarts(ctx context.Context, unit string) (uint32, error) {
	c := New()
	defer c.Close()
	sc, err := c.conn(ctx)
	if err != nil {
		return 0, err
	}
	p, err := sc.GetUnitTypePropertyContext(ctx, unit, "Service", "NRestarts")
	if err != nil {
		return 0, fmt.Errorf("reading %s NRestarts: %w", unit, err)
	}
	n, ok := p.Value.Value().(uint32)
	if !ok {
		return 0, fmt.Errorf("%s NRestarts is %s, not a uint32", unit, p.Value.Signature())
	}
	return n, nil
}
