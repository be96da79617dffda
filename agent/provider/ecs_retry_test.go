package provider

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/harness/ecsmeta"
)

func TestECSErrorRate(t *testing.T) {
	inst := ecsmeta.DefaultInstance()
	inst.UserData = []byte("data")
	f := newFixture(t, inst, hardened())
	f.srv.SetFaults(ecsmeta.Faults{ErrorRate: 0.3, Seed: 7})
	ctx := context.Background()

	// Fresh clients (no caches, no token) so that enough requests are made for
	// the error rate to show; each must still get everything.
	for i := range 20 {
		c := &ECSClient{BaseURL: f.base, Log: f.log.add, Now: f.clock.Now, Sleep: f.clock.Sleep, Rand: f.client.Rand}
		if _, present, err := c.UserData(ctx); err != nil || !present {
			t.Fatalf("client %d: UserData under a 30%% error rate: %v, %v", i, present, err)
		}
		facts, err := c.Facts(ctx)
		if err != nil || facts != wantFacts(inst) {
			t.Fatalf("client %d: Facts under a 30%% error rate: %+v, %v", i, facts, err)
		}
	}
	st := f.srv.Stats()
	if st.Injected < st.Requests/10 {
		t.Fatalf("only %d of %d requests failed, the test proves little: %+v", st.Injected, st.Requests, st)
	}
	if n := f.log.count("; retrying in "); n != st.Injected {
		t.Errorf("%d retries logged for %d injected failures", n, st.Injected)
	}
	t.Logf("%d requests, %d injected failures %v", st.Requests, st.Injected, st.ByStatus)
}

func TestECSBurstOf503(t *testing.T) {
	f := newFixture(t, ecsmeta.DefaultInstance(), hardened())
	f.srv.SetFaults(ecsmeta.Faults{FailNext: 5, FailStatus: http.StatusServiceUnavailable,
		FailPaths: []string{"/latest/meta-data/"}})
	if v, err := f.client.Get(context.Background(), "instance-id"); err != nil || v == "" {
		t.Fatalf("Get after five 503s = %q, %v", v, err)
	}
	if st := f.srv.Stats(); st.ByStatus[503] != 5 {
		t.Errorf("stats = %+v, want five 503s", st)
	}
	// With Rand fixed at 0.5 the waits are 3/4 of 200ms, 400ms, 800ms, 1.6s, 3.2s.
	for _, line := range []string{
		"metadata: GET /latest/meta-data/instance-id attempt 1: 503 Service Unavailable; retrying in 150ms",
		"metadata: GET /latest/meta-data/instance-id attempt 3: 503 Service Unavailable; retrying in 600ms",
		"metadata: GET /latest/meta-data/instance-id attempt 5: 503 Service Unavailable; retrying in 2.4s",
		"metadata: GET /latest/meta-data/instance-id attempt 6: 200 OK",
	} {
		if f.log.count(line) != 1 {
			t.Errorf("log lacks %q", line)
		}
	}
}

func TestECSDeadlineExceeded(t *testing.T) {
	f := newFixture(t, ecsmeta.DefaultInstance(), hardened())
	f.client.Deadline = 30 * time.Second
	f.srv.SetFaults(ecsmeta.Faults{FailNext: 1 << 30, FailStatus: http.StatusServiceUnavailable,
		FailPaths: []string{"/latest/meta-data/"}})
	_, err := f.client.Get(context.Background(), "instance-id")
	if err == nil {
		t.Fatal("Get succeeded against a service that always fails")
	}
	msg := err.Error()
	for _, want := range []string{"/latest/meta-data/instance-id", "503 Service Unavailable", "30s", "reachable"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	var se *StatusError
	if !errors.As(err, &se) || se.Code != 503 {
		t.Errorf("error does not wrap the last status: %v", err)
	}
	if f.log.count("giving up") != 1 {
		t.Errorf("giving up not logged")
	}
	// The fake clock never passes the deadline: giving up is decided before sleeping.
	if spent := f.clock.Now().Sub(newFakeClock().Now()); spent > 30*time.Second {
		t.Errorf("slept %s, beyond the 30s deadline", spent)
	}
}

func TestECSInterrupted(t *testing.T) {
	f := newFixture(t, ecsmeta.DefaultInstance(), hardened())
	f.srv.SetFaults(ecsmeta.Faults{FailNext: 1 << 30})
	ctx, cancel := context.WithCancel(context.Background())
	f.client.Sleep = func(context.Context, time.Duration) error { cancel(); return context.Canceled }
	_, err := f.client.Get(ctx, "instance-id")
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "interrupted") {
		t.Errorf("cancelled Get = %v, want an interruption wrapping context.Canceled", err)
	}
}

func TestECSSlowResponsesRetried(t *testing.T) {
	inst := ecsmeta.DefaultInstance()
	inst.UserData = []byte("data")
	f := newFixture(t, inst, hardened())
	f.client.AttemptTimeout = 100 * time.Millisecond
	f.srv.SetFaults(ecsmeta.Faults{Delay: time.Hour, DelayCount: 2, SlowPaths: []string{"/latest/user-data"}})
	data, present, err := f.client.UserData(context.Background())
	if string(data) != "data" || !present || err != nil {
		t.Fatalf("UserData after slow answers = %q, %v, %v", data, present, err)
	}
	if n := f.log.count("no answer within 100ms"); n != 2 {
		t.Errorf("%d timed-out attempts logged, want 2", n)
	}
	if f.log.count("metadata: GET /latest/user-data attempt 3: 200 OK") != 1 {
		t.Errorf("the third attempt did not succeed")
	}
}

// TestECSServiceStartsLate has the client start while nothing listens (as before
// DHCP) and the service appear a second later on the same loopback port. It
// uses the real clock because the retries must span real time.
func TestECSServiceStartsLate(t *testing.T) {
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := probe.Addr().String()
	probe.Close()

	inst := ecsmeta.DefaultInstance()
	inst.UserData = []byte("late")
	srv := ecsmeta.New(inst, hardened())
	t.Cleanup(func() { srv.Close() })
	started := make(chan error, 1)
	go func() {
		time.Sleep(time.Second)
		ln, err := net.Listen("tcp", addr)
		started <- err
		if err == nil {
			srv.Serve(ln)
		}
	}()

	log := &logLines{}
	c := &ECSClient{BaseURL: "http://" + addr, Log: log.add, Deadline: time.Minute}
	data, present, err := c.UserData(context.Background())
	if lerr := <-started; lerr != nil {
		t.Fatalf("re-listening on %s (another process took the port?): %v", addr, lerr)
	}
	if string(data) != "late" || !present || err != nil {
		t.Fatalf("UserData = %q, %v, %v\n%s", data, present, err, log)
	}
	if log.count("connection refused; retrying in") == 0 {
		t.Errorf("no refused connection logged:\n%s", log)
	}
}

func TestBackoff(t *testing.T) {
	for _, r := range []float64{0, 0.5, 0.999999} {
		c := &ECSClient{Rand: func() float64 { return r }}
		prevMax := time.Duration(0)
		for attempt := 1; attempt <= 40; attempt++ {
			d := min(retryBase<<min(attempt-1, 15), retryCap)
			got := c.backoff(attempt, outcome{})
			if got < d/2 || got > d || got > retryCap {
				t.Errorf("rand %v attempt %d: wait %s outside [%s, %s]", r, attempt, got, d/2, d)
			}
			if got < prevMax/2 {
				t.Errorf("rand %v attempt %d: wait %s shrank", r, attempt, got)
			}
			prevMax = max(prevMax, got)
		}
	}
	c := &ECSClient{Rand: func() float64 { return 0 }}
	if got := c.backoff(1, outcome{retryAfter: 2 * time.Second}); got != 2*time.Second {
		t.Errorf("Retry-After 2s: wait %s", got)
	}
	if got := c.backoff(1, outcome{retryAfter: time.Hour}); got != retryCap {
		t.Errorf("Retry-After 1h: wait %s, want the cap", got)
	}
}
