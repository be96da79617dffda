package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/drover-os/drover/agent/credstatus"
	"github.com/drover-os/drover/agent/health"
	"github.com/drover-os/drover/agent/kube"
	"github.com/drover-os/drover/agent/provider"
)

// eventEvery is the least time between two Events of one reason: a
// container that the OOM killer kills in a loop must not flood the API
// server. The next Event says how many were left out.
const eventEvery = 10 * time.Second

// HealthSources are what the agent watches for a sick node once it has
// joined; a nil source is not watched.
type HealthSources struct {
	// Kmsg is the node's /dev/kmsg, opened by main while the agent still
	// had CAP_SYSLOG; its records are read from the start of the boot, so
	// what happened before the join is reported too.
	Kmsg io.Reader
	// Links calls update with each network interface, then with every
	// change (RTM_NEWLINK, RTM_DELLINK), until ctx ends or it fails.
	Links func(ctx context.Context, update func(health.Link)) error
	// Restarts reads a service's NRestarts.
	Restarts func(ctx context.Context, unit string) (uint32, error)
	// CredentialStatus reads the status the kubelet's image credential
	// provider left (agent/credstatus); an error satisfying
	// os.IsNotExist is no status yet.
	CredentialStatus func() ([]byte, error)
}

// CredentialPoll is how often the agent reads the credential provider's
// status: a failed pull's Event follows within it.
const CredentialPoll = 5 * time.Second

// RestartPoll is how often the agent reads the daemons' restart counts:
// NRestarts counts every restart in between, so a slow poll loses none.
const RestartPoll = 30 * time.Second

// WatchHealth reports the evidence of a sick node (agent/health) on the
// Node: each finding as a Warning Event with its evidence line, and the
// agent's conditions (ReadonlyFilesystem, NICLinkDown, Frequent…Restart),
// each False from the start of the boot until its evidence turns it True.
// Reports the API server did not accept are retried (provider.RetryPolicy)
// until it does. It returns when ctx ends.
func (a *Agent) WatchHealth(ctx context.Context, src HealthSources) {
	r := &kernelReporter{api: a.guardAPI, note: a.rec.Note, now: time.Now}
	found := make(chan health.Finding, 64)
	if src.Kmsg != nil {
		r.cond(kube.Condition{Type: health.ReadonlyFilesystem, Status: "False", Reason: "FilesystemIsNotReadOnly",
			Message: "no filesystem has been remounted read-only since boot"})
		go readKmsg(ctx, src.Kmsg, found, a.rec.Note)
	}
	if src.Links != nil {
		var links health.Links
		r.add(links.Initial())
		go watchLinks(ctx, src.Links, &links, found, a.rec.Note)
	}
	if src.Restarts != nil {
		var ws []*health.Restarts
		for _, u := range slices.Sorted(maps.Keys(health.RestartConditions)) {
			w := &health.Restarts{Unit: u}
			r.add(w.Initial())
			ws = append(ws, w)
		}
		go watchRestarts(ctx, src.Restarts, ws, RestartPoll, found, a.rec.Note)
	}
	if src.CredentialStatus != nil {
		go watchCredentials(ctx, src.CredentialStatus, &credstatus.Watch{}, CredentialPoll, found, a.rec.Note)
	}
	r.pending = append(r.pending, a.events...) // the storage phase's, found before the join
	go func() {
		for {
			select {
			case f := <-a.imageReports:
				select {
				case found <- f:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	r.run(ctx, found)
}

// watchLinks sends what each link update means for the NICLinkDown
// condition.
func watchLinks(ctx context.Context, subscribe func(context.Context, func(health.Link)) error, links *health.Links, found chan<- health.Finding, note func(string)) {
	err := subscribe(ctx, func(l health.Link) {
		for _, f := range links.Observe(time.Now(), l) {
			select {
			case found <- f:
			case <-ctx.Done():
			}
		}
	})
	if err != nil && ctx.Err() == nil {
		note("link watch: " + err.Error() + "; NIC link loss is not reported from now on")
	}
}

// watchRestarts reads each daemon's restart count every period.
func watchRestarts(ctx context.Context, read func(context.Context, string) (uint32, error), ws []*health.Restarts,
	period time.Duration, found chan<- health.Finding, note func(string)) {
	failed := map[string]bool{}
	for {
		for _, w := range ws {
			n, err := read(ctx, w.Unit)
			if err != nil {
				if !failed[w.Unit] && ctx.Err() == nil {
					note(fmt.Sprintf("restart watch: reading %s: %v (noted once; retried every %s)", w.Unit, err, period))
				}
				failed[w.Unit] = true
				continue
			}
			if f, ok := w.Observe(time.Now(), n); ok {
				select {
				case found <- f:
				case <-ctx.Done():
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(period):
		}
	}
}

// watchCredentials reads the credential provider's status every period
// and sends each failure w reports as a Warning Event.
func watchCredentials(ctx context.Context, read func() ([]byte, error), w *credstatus.Watch, period time.Duration,
	found chan<- health.Finding, note func(string)) {
	complained := false
	for {
		data, err := read()
		if err == nil {
			var st credstatus.Status
			if st, err = credstatus.Parse(data); err == nil {
				if reason, msg, ok := w.Observe(time.Now(), st); ok {
					select {
					case found <- health.Finding{Event: reason, Evidence: msg}:
					case <-ctx.Done():
						return
					}
				}
			}
		}
		if err != nil && !os.IsNotExist(err) && !complained {
			note(fmt.Sprintf("credential watch: %v (noted once; read again every %s)", err, period))
			complained = true
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(period):
		}
	}
}

// readKmsg sends what each record of kmsg is evidence of. A reader that
// fell behind the ring buffer gets EPIPE once and goes on from the oldest
// record left.
func readKmsg(ctx context.Context, kmsg io.Reader, found chan<- health.Finding, note func(string)) {
	buf := make([]byte, 8192) // a record is at most 8 KiB (PRINTK_MESSAGE_MAX)
	for ctx.Err() == nil {
		n, err := kmsg.Read(buf)
		if errors.Is(err, syscall.EPIPE) {
			continue
		}
		if err != nil {
			note("kernel watch: reading /dev/kmsg: " + err.Error() + "; kernel problems are not reported from now on")
			return
		}
		rec, ok := health.ParseRecord(string(buf[:n]))
		if !ok {
			continue
		}
		if f, ok := health.Classify(rec.Message); ok {
			select {
			case found <- f:
			case <-ctx.Done():
				return
			}
		}
	}
}

// kernelReporter queues findings and delivers them in order.
type kernelReporter struct {
	api     func() (NodeAPI, string, error)
	note    func(string)
	now     func() time.Time
	pending []pendingReport
	last    map[string]time.Time // reason → when its last Event was queued
	skipped map[string]int       // reason → Events left out since
	attempt int
}

type pendingReport struct {
	event, message string
	cond           *kube.Condition
}

func (r *kernelReporter) cond(c kube.Condition) {
	r.pending = append(r.pending, pendingReport{cond: &c})
}

// add queues what a finding reports, its Event at most every eventEvery
// per reason.
func (r *kernelReporter) add(f health.Finding) {
	if f.Condition != "" {
		status := f.Status
		if status == "" {
			status = "True"
		}
		if status == "True" {
			r.note(fmt.Sprintf("health: %s=True: %s", f.Condition, f.Evidence))
		}
		r.cond(kube.Condition{Type: f.Condition, Status: status, Reason: f.Reason, Message: f.Evidence})
	}
	if f.Event == "" {
		return
	}
	if r.last == nil {
		r.last, r.skipped = map[string]time.Time{}, map[string]int{}
	}
	now := r.now()
	if t, ok := r.last[f.Event]; ok && now.Sub(t) < eventEvery {
		r.skipped[f.Event]++
		return
	}
	msg := f.Evidence
	if f.Kernel {
		msg = "kernel: " + msg
	}
	if n := r.skipped[f.Event]; n > 0 {
		msg += fmt.Sprintf(" (and %d more %s since the last Event)", n, f.Event)
	}
	r.last[f.Event], r.skipped[f.Event] = now, 0
	r.note(fmt.Sprintf("health: %s: %s", f.Event, f.Evidence))
	r.pending = append(r.pending, pendingReport{event: f.Event, message: msg})
}

func (r *kernelReporter) run(ctx context.Context, found <-chan health.Finding) {
	var retry <-chan time.Time // set while backing off
	for {
		if retry == nil {
			if wait, ok := r.deliver(ctx); ok {
				retry = time.After(wait)
			}
		}
		select {
		case <-ctx.Done():
			return
		case f := <-found:
			// Queued; sent at once unless backing off: a finding in
			// a loop must not turn the backoff into a flood.
			r.add(f)
		case <-retry:
			retry = nil
		}
	}
}

// deliver flushes the queue; when the API server refused part of it, ok
// and the wait before the next attempt: provider.RetryPolicy from the first
// attempt again after a flush that emptied the queue.
func (r *kernelReporter) deliver(ctx context.Context) (wait time.Duration, ok bool) {
	if len(r.pending) == 0 {
		return 0, false
	}
	if err := r.flush(ctx); err != nil {
		r.attempt++
		if r.attempt == 1 {
			r.note("health: reporting to the API server failed (retrying with backoff until it accepts): " + err.Error())
		}
		return min(provider.RetryPolicy().Wait(r.attempt-1, 0, rand.Float64()), GuardPeriod), true
	}
	r.attempt = 0
	return 0, false
}

// flush sends the queue in order, dropping what the API server accepted.
func (r *kernelReporter) flush(ctx context.Context) error {
	api, node, err := r.api()
	if err != nil {
		return err
	}
	var uid string
	for len(r.pending) > 0 {
		p := r.pending[0]
		if p.cond != nil {
			if err := api.SetCondition(ctx, node, *p.cond); err != nil {
				return fmt.Errorf("setting condition %s=%s: %w", p.cond.Type, p.cond.Status, err)
			}
		} else {
			if uid == "" {
				n, err := api.GetNode(ctx, node)
				if err != nil {
					return fmt.Errorf("reading node %s for the event: %w", node, err)
				}
				uid = n.Metadata.UID
			}
			if err := api.Event(ctx, node, uid, p.event, p.message); err != nil {
				return fmt.Errorf("posting event %s: %w", p.event, err)
			}
		}
		r.pending = r.pending[1:]
	}
	return nil
}
