package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"syscall"
	"time"

	"github.com/drover-os/drover/agent/health"
	"github.com/drover-os/drover/agent/kube"
	"github.com/drover-os/drover/agent/provider"
)

// eventEvery is the least time between two Events of one reason: a
// container that the OOM killer kills in a loop must not flood the API
// server. The next Event says how many were left out.
const eventEvery = 10 * time.Second

// WatchKernel reports the kernel's evidence of a sick node (agent/health)
// on the Node: each finding as a Warning Event with the kernel's line, and
// ReadonlyFilesystem as a condition (False from the start of each boot,
// True on the first remount). kmsg is the node's /dev/kmsg, opened by main
// while the agent still had CAP_SYSLOG; its records are read from the
// start of the boot, so what happened before the join is reported too.
// Reports the API server did not accept are retried (provider.Backoff)
// until it does. It returns when ctx ends.
func (a *Agent) WatchKernel(ctx context.Context, kmsg io.Reader) {
	r := &kernelReporter{api: a.guardAPI, note: a.rec.Note, now: time.Now}
	r.cond(kube.Condition{Type: health.ReadonlyFilesystem, Status: "False", Reason: "FilesystemIsNotReadOnly",
		Message: "no filesystem has been remounted read-only since boot"})
	r.pending = append(r.pending, a.events...) // the storage phase's, found before the join
	found := make(chan health.Finding, 64)
	go readKmsg(ctx, kmsg, found, a.rec.Note)
	r.run(ctx, found)
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
		r.note(fmt.Sprintf("kernel: %s=True: %s", f.Condition, f.Evidence))
		r.cond(kube.Condition{Type: f.Condition, Status: "True", Reason: f.Reason, Message: f.Evidence})
	}
	if r.last == nil {
		r.last, r.skipped = map[string]time.Time{}, map[string]int{}
	}
	now := r.now()
	if t, ok := r.last[f.Event]; ok && now.Sub(t) < eventEvery {
		r.skipped[f.Event]++
		return
	}
	msg := "kernel: " + f.Evidence
	if n := r.skipped[f.Event]; n > 0 {
		msg += fmt.Sprintf(" (and %d more %s since the last Event)", n, f.Event)
	}
	r.last[f.Event], r.skipped[f.Event] = now, 0
	r.note(fmt.Sprintf("kernel: %s: %s", f.Event, f.Evidence))
	r.pending = append(r.pending, pendingReport{event: f.Event, message: msg})
}

func (r *kernelReporter) run(ctx context.Context, found <-chan health.Finding) {
	for {
		wait := time.Duration(-1) // nothing to retry: wait for a finding
		if len(r.pending) > 0 {
			if err := r.flush(ctx); err != nil {
				r.attempt++
				wait = min(provider.Backoff(r.attempt, rand.Float64()), GuardPeriod)
			} else {
				r.attempt = 0
			}
		}
		var retry <-chan time.Time
		if wait >= 0 {
			retry = time.After(wait)
		}
		select {
		case <-ctx.Done():
			return
		case f := <-found:
			r.add(f)
		case <-retry:
		}
	}
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
