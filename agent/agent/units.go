package agent

import (
	"context"
	"fmt"
	"strings"

	"github.com/drover-os/drover/agent/status"
)

// startUnits starts the units the config enables. Their enable links were
// written after systemd queued the boot transaction, and systemd does not
// add dependencies to queued jobs, so without this they would never start
// (/etc, and so the links, is rebuilt every boot). All start jobs are
// queued at once so that systemd orders them by their own dependencies;
// each one's result goes to the status file. A failed user unit does not
// stop the join: it is reported, per unit, on the console and in the
// status file.
func (a *Agent) startUnits(ctx context.Context) (string, error) {
	if len(a.start) == 0 {
		a.rec.SetUnits([]status.Unit{})
		return "no enabled units in the config", nil
	}
	results := a.env.Systemd.StartAll(ctx, a.start)
	units := make([]status.Unit, len(results))
	var failed []string
	for i, r := range results {
		u := status.Unit{Name: r.Unit, Job: r.Job, ActiveState: r.Active, SubState: r.Sub, Result: r.Result, Error: r.Error, State: "ok"}
		if !r.OK() {
			u.State = "failed"
			failed = append(failed, r.String())
			a.rec.Note("unit " + r.String() + " — FAILED; see journalctl -b -u " + r.Unit)
		}
		units[i] = u
	}
	a.rec.SetUnits(units)
	detail := fmt.Sprintf("%d enabled unit(s) started: %s", len(units), strings.Join(a.start, " "))
	if len(failed) > 0 {
		detail = fmt.Sprintf("%d of %d enabled unit(s) FAILED: %s", len(failed), len(units), strings.Join(failed, "; "))
	}
	return detail, nil
}
