package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/agent/health"
	"github.com/drover-os/drover/agent/kube"
)

// reporter is a kernelReporter sending to api, with a clock the test
// moves.
func reporter(api NodeAPI, clock *time.Time, notes *[]string) *kernelReporter {
	return &kernelReporter{api: func() (NodeAPI, string, error) { return api, "n1", nil },
		note: func(s string) { *notes = append(*notes, s) }, now: func() time.Time { return *clock }}
}

func inRange(d, lo, hi time.Duration) bool { return d >= lo && d <= hi }

// TestHealthPartialRefusals: the API server accepts part of the queue and
// refuses the rest: what it accepted is not sent again, the rest goes
// next in the order it was found; a refused first Event (and a refused
// read of the Node for it) is retried like anything else. Backoff starts
// from the first attempt after every flush that emptied the queue.
func TestHealthPartialRefusals(t *testing.T) {
	api := &scriptAPI{}
	clock := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	var notes []string
	r := reporter(api, &clock, &notes)
	ctx := context.Background()
	r.cond(kube.Condition{Type: health.ReadonlyFilesystem, Status: "False"})
	r.add(health.Finding{Event: "OOMKilling", Evidence: "Killed process 1 (a)", Kernel: true})
	r.add(health.Finding{Event: health.NICLinkDown, Condition: health.NICLinkDown, Reason: "NICLinkDown", Evidence: "eth0 lost its carrier"})

	// The condition goes, the first Event is refused: everything after
	// it waits, the first attempt's backoff.
	api.refuseNext("event", 1)
	wait, ok := r.deliver(ctx)
	if !ok || !inRange(wait, 100*time.Millisecond, 200*time.Millisecond) {
		t.Errorf("after a refusal: wait %s, %v; want 100-200ms (attempt 1)", wait, ok)
	}
	// Then the read of the Node for it, then the Event again: the
	// backoff grows.
	api.refuseNext("get", 1)
	if wait, ok = r.deliver(ctx); !ok || !inRange(wait, 200*time.Millisecond, 400*time.Millisecond) {
		t.Errorf("second refusal: wait %s, %v; want 200-400ms (attempt 2)", wait, ok)
	}
	api.refuseNext("event", 1)
	if wait, ok = r.deliver(ctx); !ok || !inRange(wait, 400*time.Millisecond, 800*time.Millisecond) {
		t.Errorf("third refusal: wait %s, %v; want 400-800ms (attempt 3)", wait, ok)
	}
	// The OOM Event goes; the NICLinkDown condition is refused.
	api.refuseNext("cond", 1)
	if _, ok = r.deliver(ctx); !ok {
		t.Error("a refused condition left nothing to retry")
	}
	if wait, ok = r.deliver(ctx); ok || wait != 0 || len(r.pending) != 0 {
		t.Errorf("all accepted: wait %s, %v, pending %+v", wait, ok, r.pending)
	}
	oom := "OOMKilling: kernel: Killed process 1 (a)"
	nic := "NICLinkDown: eth0 lost its carrier"
	want := []string{"ReadonlyFilesystem=False", "!" + oom, "!" + oom, oom, "!NICLinkDown=True", "NICLinkDown=True", nic}
	if got := api.log(); !slices.Equal(got, want) {
		t.Errorf("calls\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The failure is on the console once per run of refusals.
	failed := func() (n int) {
		for _, s := range notes {
			if strings.HasPrefix(s, "health: reporting to the API server failed") {
				n++
			}
		}
		return n
	}
	if n := failed(); n != 1 {
		t.Errorf("%d console lines for four refusals in a row, want 1:\n%s", n, strings.Join(notes, "\n"))
	}

	// Delivered: the next refusal backs off from the first attempt again.
	clock = clock.Add(time.Minute)
	r.add(health.Finding{Event: "OOMKilling", Evidence: "Killed process 2 (b)", Kernel: true})
	api.refuseNext("event", 1)
	if wait, ok = r.deliver(ctx); !ok || !inRange(wait, 100*time.Millisecond, 200*time.Millisecond) {
		t.Errorf("a refusal after a delivery: wait %s, %v; want 100-200ms (attempt 1 again)", wait, ok)
	}
	if n := failed(); n != 2 {
		t.Errorf("%d console lines for two runs of refusals, want 2", n)
	}
	if _, ok = r.deliver(ctx); ok || !slices.Contains(api.accepted(), "OOMKilling: kernel: Killed process 2 (b)") {
		t.Errorf("the retried Event: %q", api.accepted())
	}
}

// TestHealthBackoffCapped: however many refusals, the wait is at most a
// guard period, so the API server back is told within one.
func TestHealthBackoffCapped(t *testing.T) {
	api := &scriptAPI{}
	clock := time.Now()
	var notes []string
	r := reporter(api, &clock, &notes)
	r.cond(kube.Condition{Type: health.ReadonlyFilesystem, Status: "False"})
	api.refuseNext("cond", 100)
	var wait time.Duration
	for range 20 {
		wait, _ = r.deliver(context.Background())
		if wait > GuardPeriod {
			t.Fatalf("wait %s past the guard period", wait)
		}
	}
	if wait < 2500*time.Millisecond {
		t.Errorf("wait %s after 20 refusals, want the backoff's cap (2.5-5s)", wait)
	}
}

// TestHealthNoAPIClientIsRetried: without an API client yet, the queue
// is kept and retried with backoff.
func TestHealthNoAPIClientIsRetried(t *testing.T) {
	api := &scriptAPI{}
	var notes []string
	r := &kernelReporter{note: func(s string) { notes = append(notes, s) }, now: time.Now}
	ready := false
	r.api = func() (NodeAPI, string, error) {
		if !ready {
			return nil, "", errors.New("no API client")
		}
		return api, "n1", nil
	}
	r.cond(kube.Condition{Type: health.ReadonlyFilesystem, Status: "False"})
	if wait, ok := r.deliver(context.Background()); !ok || wait <= 0 {
		t.Errorf("without a client: wait %s, %v", wait, ok)
	}
	ready = true
	if _, ok := r.deliver(context.Background()); ok || !slices.Equal(api.accepted(), []string{"ReadonlyFilesystem=False"}) {
		t.Errorf("once there is a client: %q", api.accepted())
	}
}

// TestEventRateLimit: at most one Event per reason per eventEvery,
// counted from the last one queued; the next says how many were left
// out, and then the count starts again. Other reasons have their own
// limit, and a left-out finding's condition still goes.
func TestEventRateLimit(t *testing.T) {
	api := &scriptAPI{}
	start := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	clock := start
	var notes []string
	r := reporter(api, &clock, &notes)
	at := func(d time.Duration, f health.Finding) { clock = start.Add(d); r.add(f) }
	oom := func(n int) health.Finding {
		return health.Finding{Event: "OOMKilling", Evidence: fmt.Sprintf("Killed process %d", n), Kernel: true}
	}
	ro := health.Finding{Event: "FilesystemError", Condition: health.ReadonlyFilesystem, Reason: "FilesystemIsReadOnly", Evidence: "Remounting filesystem read-only", Kernel: true}
	at(0, oom(1))
	at(time.Second, oom(2))
	at(2*time.Second, ro)
	at(3*time.Second, ro) // left out; its condition is not
	at(eventEvery-time.Nanosecond, oom(3))
	at(eventEvery, oom(4))   // eventEvery after the first: goes, counting 2
	at(eventEvery+1, oom(5)) // left out again
	at(eventEvery+2*time.Second, ro)
	at(3*eventEvery, oom(6)) // one left out since the last
	at(5*eventEvery, oom(7)) // none since
	if _, ok := r.deliver(context.Background()); ok {
		t.Fatal("not delivered")
	}
	want := []string{
		"OOMKilling: kernel: Killed process 1",
		"ReadonlyFilesystem=True",
		"FilesystemError: kernel: Remounting filesystem read-only",
		"ReadonlyFilesystem=True",
		"OOMKilling: kernel: Killed process 4 (and 2 more OOMKilling since the last Event)",
		"ReadonlyFilesystem=True",
		"FilesystemError: kernel: Remounting filesystem read-only (and 1 more FilesystemError since the last Event)",
		"OOMKilling: kernel: Killed process 6 (and 1 more OOMKilling since the last Event)",
		"OOMKilling: kernel: Killed process 7",
	}
	if got := api.accepted(); !slices.Equal(got, want) {
		t.Errorf("sent\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestHealthRunRetriesAndBacksOff: the running reporter retries a refused
// report on its own (the first Event of the boot here), and findings that
// arrive while it backs off are queued, not sent at once.
func TestHealthRunRetriesAndBacksOff(t *testing.T) {
	api := &scriptAPI{}
	r := &kernelReporter{api: func() (NodeAPI, string, error) { return api, "n1", nil }, now: time.Now, note: func(string) {}}
	found := make(chan health.Finding)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.run(ctx, found); close(done) }()
	defer func() { cancel(); <-done }()
	api.refuseNext("event", 1)
	start := time.Now()
	found <- health.Finding{Event: "TaskHung", Evidence: "task kworker blocked for more than 120 seconds", Kernel: true}
	// While it backs off (at least 100ms), more findings: queued only.
	for i := range 5 {
		found <- health.Finding{Event: fmt.Sprint("E", i), Evidence: "x"}
	}
	if n := len(api.log()); n != 1 && time.Since(start) < 100*time.Millisecond {
		t.Errorf("%d calls while backing off, want the one refused: %q", n, api.log())
	}
	for end := time.Now().Add(5 * time.Second); len(api.accepted()) < 6; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("not retried: %q", api.log())
		}
	}
	if time.Since(start) < 100*time.Millisecond {
		t.Errorf("retried after %s, before the backoff's least 100ms", time.Since(start))
	}
	want := []string{"!TaskHung: kernel: task kworker blocked for more than 120 seconds", "TaskHung: kernel: task kworker blocked for more than 120 seconds",
		"E0: x", "E1: x", "E2: x", "E3: x", "E4: x"}
	if got := api.log(); !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
}

// TestWatchHealthStartsFalse: each condition the agent owns is set False
// at the start, before any evidence, in a fixed order: ReadonlyFilesystem
// (only with a kernel log to read), NICLinkDown, then the restart
// conditions; a refusal of the first is retried, the order kept; the
// storage phase's Events follow; evidence turns a condition True after.
func TestWatchHealthStartsFalse(t *testing.T) {
	for _, kmsg := range []bool{true, false} {
		t.Run(fmt.Sprint("kmsg=", kmsg), func(t *testing.T) {
			g := newGuardRig(t)
			g.a.events = []pendingReport{{event: DataDiskNotUsed, message: "/dev/vdc holds ext4"}}
			src := HealthSources{
				Links:    func(ctx context.Context, _ func(health.Link)) error { <-ctx.Done(); return ctx.Err() },
				Restarts: func(context.Context, string) (uint32, error) { return 0, nil },
			}
			want := []string{"!ReadonlyFilesystem=False", "ReadonlyFilesystem=False"}
			if kmsg {
				src.Kmsg = &kmsgFake{records: []string{"2,4,3000,-;EXT4-fs (vda1): Remounting filesystem read-only\n"}}
			} else {
				want = []string{"!NICLinkDown=False"}
			}
			want = append(want, "NICLinkDown=False", "FrequentContainerdRestart=False", "FrequentKubeletRestart=False",
				DataDiskNotUsed+": /dev/vdc holds ext4")
			if kmsg {
				want = append(want, "ReadonlyFilesystem=True", "FilesystemError: kernel: EXT4-fs (vda1): Remounting filesystem read-only")
			}
			g.api.refuseNext("cond", 1)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { g.a.WatchHealth(ctx, src); close(done) }()
			defer func() { cancel(); <-done }()
			g.waitLog(t, want...)
		})
	}
}
