package smoke

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/drover-os/drover/agent/nodeconfig"
)

// TimeResult is what the probe's "time" mode reports.
type TimeResult struct {
	DropIn *string `json:"dropIn"`
	Active string  `json:"active"`
	Sub    string  `json:"sub"`
	Synced bool    `json:"synchronized"`
	Error  string  `json:"error"`
}

// TimeSync asks the node (through the probe) for its timesyncd drop-in and
// the unit's state.
func (e *Env) TimeSync(ctx context.Context, in *Instance, pod string) (*TimeResult, error) {
	msg, err := e.probe(ctx, in, pod, []string{"time"})
	if err != nil {
		return nil, err
	}
	var t TimeResult
	if err := json.Unmarshal([]byte(msg), &t); err != nil {
		return nil, fmt.Errorf("probe time report %q: %w", msg, err)
	}
	return &t, nil
}

// Check judges the report against the servers the metadata emulator
// served: the drop-in's NTP= names exactly them, in order, and
// systemd-timesyncd is active and running and has synchronised the clock
// (with the harness's SNTP server, the first of them).
func (t *TimeResult) Check(served []string) error {
	var probs []string
	if t.Error != "" {
		probs = append(probs, "probe: "+t.Error)
	}
	switch {
	case t.DropIn == nil:
		probs = append(probs, nodeconfig.TimesyncdDropIn+" is missing on the node")
	default:
		var ntp []string
		n := 0
		for _, line := range strings.Split(*t.DropIn, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "NTP="); ok {
				ntp, n = strings.Fields(v), n+1
			}
		}
		want := strings.ToLower(strings.Join(served, " "))
		if got := strings.Join(ntp, " "); n != 1 || got != want {
			probs = append(probs, fmt.Sprintf("%s: NTP= is %q (%d lines), the metadata served %q", nodeconfig.TimesyncdDropIn, got, n, want))
		}
	}
	if t.Active != "active" || t.Sub != "running" {
		probs = append(probs, fmt.Sprintf("systemd-timesyncd.service is %s/%s, want active/running", t.Active, t.Sub))
	}
	if !t.Synced {
		probs = append(probs, "systemd-timesyncd has not synchronised the clock (no /run/systemd/timesync/synchronized) with "+strings.Join(served, " "))
	}
	return errIf(probs)
}

// checkTimeSync adds the check "time servers from the metadata (boot)".
func (e *Env) checkTimeSync(ctx context.Context, r *Report, in *Instance, boot, pod string) {
	s := time.Now()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	t, err := e.TimeSync(sctx, in, pod)
	detail := ""
	if err == nil {
		err = t.Check(in.Meta.NTPServers)
		detail = fmt.Sprintf("NTP=%s, systemd-timesyncd %s/%s, synchronised %v", strings.Join(in.Meta.NTPServers, " "), t.Active, t.Sub, t.Synced)
		if e.sntp != nil {
			detail += fmt.Sprintf(" (the harness answered %d SNTP requests)", e.sntp.served.Load())
		}
	}
	r.add("systemd-timesyncd on the metadata's ntp-conf/ntp-servers ("+boot+")", s, err, detail)
}
