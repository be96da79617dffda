package health

import (
	"fmt"
	"time"

	"github.com/drover-os/drover/nodecontract"
)

// Restarts of the node's own daemons. systemd restarts containerd and the
// kubelet when they die (Restart=always); each restart counts in the
// service's NRestarts. One restart is a blip; a daemon that keeps dying
// (a corrupt state directory, a bad config, a leak that ends in an OOM
// kill) leaves a node that looks Ready between deaths but loses its pods'
// state each time. node-problem-detector's systemd monitor reports it as
// FrequentContainerdRestart / FrequentKubeletRestart when a unit started 5
// times in 20 minutes; drover uses the same types, counts and window, so a
// repair rule written for NPD's conditions works unchanged.
const (
	RestartThreshold = 5
	RestartWindow    = 20 * time.Minute
)

// RestartConditions are the condition types the agent owns for the daemons
// it watches, by unit.
var RestartConditions = map[string]string{
	"containerd.service": nodecontract.ConditionFrequentContainerdRestart,
	"kubelet.service":    nodecontract.ConditionFrequentKubeletRestart,
}

// Restarts turns a service's NRestarts, read now and then, into its
// condition. The zero value is ready for a unit in RestartConditions.
type Restarts struct {
	Unit  string
	seen  bool
	last  uint32
	times []time.Time // a restart each, within the window
	on    bool
}

// Initial is the condition's value at the agent's start: False, as no
// restart has been counted yet.
func (r *Restarts) Initial() Finding {
	t := RestartConditions[r.Unit]
	return Finding{Condition: t, Status: "False", Reason: "No" + t, Evidence: r.Unit + " is not restarting repeatedly"}
}

// Observe takes NRestarts read at now and returns a finding when the
// condition changes. (Not the unit's Result: systemd resets it to
// "success" when the restarted process starts, so it never says why the
// last one died; the kernel's OOMKilling Event does, for an OOM kill.) The first reading is the
// baseline: restarts before the agent watched are not counted (a reboot
// resets NRestarts anyway).
func (r *Restarts) Observe(now time.Time, n uint32) (Finding, bool) {
	if !r.seen || n < r.last {
		r.seen, r.last = true, n
		return Finding{}, false
	}
	for ; r.last < n; r.last++ {
		// Restarts between two readings are dated at the second: the window
		// is minutes, the readings seconds apart.
		r.times = append(r.times, now)
	}
	for len(r.times) > 0 && now.Sub(r.times[0]) >= RestartWindow {
		r.times = r.times[1:]
	}
	t := RestartConditions[r.Unit]
	switch {
	case !r.on && len(r.times) >= RestartThreshold:
		r.on = true
		return Finding{Event: t, Condition: t, Status: "True", Reason: t,
			Evidence: fmt.Sprintf("%s restarted %d times in the last %s (NRestarts=%d since boot)",
				r.Unit, len(r.times), RestartWindow, n)}, true
	case r.on && len(r.times) < RestartThreshold:
		r.on = false
		f := r.Initial()
		f.Evidence = fmt.Sprintf("%s restarted %d times in the last %s, fewer than %d", r.Unit, len(r.times), RestartWindow, RestartThreshold)
		return f, true
	}
	return Finding{}, false
}
