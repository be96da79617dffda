package systemd

import (
	"context"
	"fmt"
	"strings"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
)

// UnitResult is one unit's outcome after StartAll: the start job's result,
// the unit's state afterwards and, for a unit that failed, systemd's own
// reason (the Result property: exit-code, signal, timeout, …).
type UnitResult struct {
	Unit   string
	Job    string // done, failed, dependency, timeout, canceled, skipped; "" if never queued
	Active string // ActiveState after the job: active, inactive, failed, …
	Sub    string // SubState: running, exited, waiting, listening, dead, …
	Result string // the unit type's Result property: success, exit-code, …
	Error  string // why the job could not be queued or awaited
}

// OK says the unit did what starting it promises: the job completed and the
// unit is active, or (a oneshot without RemainAfterExit) ran and exited
// successfully.
func (r UnitResult) OK() bool {
	if r.Error != "" || r.Job != "done" {
		return false
	}
	switch r.Active {
	case "active", "activating", "reloading":
		return true
	case "inactive":
		return r.Result == "success"
	}
	return false
}

func (r UnitResult) String() string {
	s := fmt.Sprintf("%s: job %s, %s/%s", r.Unit, r.Job, r.Active, r.Sub)
	if r.Result != "" {
		s += ", result " + r.Result
	}
	if r.Error != "" {
		s += ": " + r.Error
	}
	return s
}

// StartAll queues a start job (mode "replace") for every unit before
// waiting for any, so systemd's job queue orders them by their own
// After=/Before= and Requires=/Wants= (which only order jobs that are
// queued together), then returns each unit's result in the order given.
func (c *Conn) StartAll(ctx context.Context, units []string) []UnitResult {
	out := make([]UnitResult, len(units))
	sc, err := c.conn(ctx)
	if err != nil {
		for i, u := range units {
			out[i] = UnitResult{Unit: u, Error: err.Error()}
		}
		return out
	}
	chans := make([]chan string, len(units))
	for i, u := range units {
		out[i].Unit = u
		// Buffered: a job that ends after ctx is abandoned never blocks
		// go-systemd's dispatcher.
		ch := make(chan string, 1)
		if _, err := sc.StartUnitContext(ctx, u, "replace", ch); err != nil {
			out[i].Error = fmt.Sprintf("queueing the start job: %v", err)
			continue
		}
		chans[i] = ch
	}
	for i, ch := range chans {
		if ch == nil {
			continue
		}
		select {
		case out[i].Job = <-ch:
		case <-ctx.Done():
			out[i].Error = fmt.Sprintf("start job still running: %v", ctx.Err())
		}
	}
	for i := range out {
		fill(context.WithoutCancel(ctx), sc, &out[i])
	}
	return out
}

// fill reads the unit's state and its type's Result property.
func fill(ctx context.Context, sc *sddbus.Conn, r *UnitResult) {
	props, err := sc.GetUnitPropertiesContext(ctx, r.Unit)
	if err != nil {
		if r.Error == "" {
			r.Error = fmt.Sprintf("reading its state: %v", err)
		}
		return
	}
	r.Active, _ = props["ActiveState"].(string)
	r.Sub, _ = props["SubState"].(string)
	if typ := unitType(r.Unit); typ != "" {
		if p, err := sc.GetUnitTypePropertyContext(ctx, r.Unit, typ, "Result"); err == nil {
			r.Result, _ = p.Value.Value().(string)
		}
	}
}

// unitType is the D-Bus interface suffix of a unit's type ("Service" for
// x.service), for the types that have a Result property.
func unitType(unit string) string {
	i := strings.LastIndexByte(unit, '.')
	if i < 0 {
		return ""
	}
	switch t := unit[i+1:]; t {
	case "service", "socket", "timer", "path", "mount", "swap", "automount":
		return strings.ToUpper(t[:1]) + t[1:]
	}
	return ""
}
