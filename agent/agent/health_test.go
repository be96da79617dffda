package agent

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-os/drover/agent/health"
)

// kmsgFake returns one record per Read, as /dev/kmsg does, then blocks.
type kmsgFake struct {
	records []string
	i       int
}

func (k *kmsgFake) Read(p []byte) (int, error) {
	if k.i >= len(k.records) {
		select {} // no more records: block as /dev/kmsg does
	}
	rec := k.records[k.i]
	k.i++
	if rec == "EPIPE" {
		return 0, syscall.EPIPE
	}
	return copy(p, rec), nil
}

func TestKernelFindingsReachTheNode(t *testing.T) {
	api := &fakeAPI{refuse: 2}
	var notes []string
	clock := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	r := &kernelReporter{api: func() (NodeAPI, string, error) { return api, "n1", nil },
		note: func(s string) { notes = append(notes, s) }, now: func() time.Time { return clock }}
	found := make(chan health.Finding, 16)
	kmsg := &kmsgFake{records: []string{
		"6,1,1000,-;EXT4-fs (vda4): mounted filesystem with ordered data mode\n",
		"3,2,2000,-;Memory cgroup out of memory: Killed process 812 (probe) total-vm:1101876kB\n SUBSYSTEM=memory\n",
		"EPIPE",
		"3,3,2100,-;Memory cgroup out of memory: Killed process 813 (probe) total-vm:1101876kB\n",
		"2,4,3000,-;EXT4-fs (loop0): Remounting filesystem read-only\n",
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go readKmsg(ctx, kmsg, found, func(string) {})
	for range 3 {
		select {
		case f := <-found:
			r.add(f)
		case <-time.After(5 * time.Second):
			t.Fatal("a finding did not arrive")
		}
	}
	// Refused twice, then accepted: the order holds.
	for i := 0; len(r.pending) > 0; i++ {
		if i > 3 {
			t.Fatalf("still pending after retries: %+v", r.pending)
		}
		_ = r.flush(ctx)
	}
	if len(api.events) != 2 || !strings.HasPrefix(api.events[0], "OOMKilling: kernel: Memory cgroup out of memory: Killed process 812 (probe)") ||
		!strings.HasPrefix(api.events[1], "FilesystemError: kernel: EXT4-fs (loop0): Remounting") {
		t.Errorf("events %q: want the first OOM kill (the second within %s left out) and the remount", api.events, eventEvery)
	}
	if len(api.conds) != 1 || api.conds[0].Type != "ReadonlyFilesystem" || api.conds[0].Status != "True" || api.conds[0].Message != "EXT4-fs (loop0): Remounting filesystem read-only" {
		t.Errorf("conditions %+v", api.conds)
	}
	// Past the interval, the next Event counts what was left out.
	clock = clock.Add(eventEvery)
	r.add(health.Finding{Event: "OOMKilling", Evidence: "Out of memory: Killed process 9 (x)"})
	if err := r.flush(ctx); err != nil || len(api.events) != 3 || !strings.HasSuffix(api.events[2], "(and 1 more OOMKilling since the last Event)") {
		t.Errorf("events %q, %v: want a third that counts the one left out", api.events, err)
	}
}

func TestKernelWatchStopsOnAReadError(t *testing.T) {
	var notes []string
	found := make(chan health.Finding)
	readKmsg(context.Background(), errReader{}, found, func(s string) { notes = append(notes, s) })
	if len(notes) != 1 || !strings.Contains(notes[0], "not reported from now on") {
		t.Errorf("notes %q", notes)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.Join(io.ErrUnexpectedEOF) }

func TestRestartsAndLinksReachTheNode(t *testing.T) {
	api := &fakeAPI{}
	r := &kernelReporter{api: func() (NodeAPI, string, error) { return api, "n1", nil }, note: func(string) {}, now: time.Now}
	found := make(chan health.Finding, 16)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// containerd killed six times between two readings.
	counts := map[string][]uint32{"containerd.service": {0, 6}, "kubelet.service": {0, 0}}
	read := func(_ context.Context, unit string) (uint32, error) {
		c := counts[unit]
		n := c[0]
		if len(c) > 1 {
			counts[unit] = c[1:]
		}
		return n, nil
	}
	ws := []*health.Restarts{{Unit: "containerd.service"}, {Unit: "kubelet.service"}}
	go watchRestarts(ctx, read, ws, time.Millisecond, found, func(string) {})
	links := &health.Links{}
	go watchLinks(ctx, func(ctx context.Context, update func(health.Link)) error {
		update(health.Link{Index: 2, Name: "eth0", MAC: "52:54:00:12:34:56", Watched: true, Up: true, Carrier: true})
		update(health.Link{Index: 2, Name: "eth0", MAC: "52:54:00:12:34:56", Watched: true, Up: true})
		update(health.Link{Index: 2, Name: "eth0", MAC: "52:54:00:12:34:56", Watched: true, Up: true, Carrier: true})
		return nil
	}, links, found, func(string) {})
	for range 3 { // FrequentContainerdRestart, NICLinkDown True, NICLinkDown False
		select {
		case f := <-found:
			r.add(f)
		case <-time.After(5 * time.Second):
			t.Fatal("a finding did not arrive")
		}
	}
	if err := r.flush(ctx); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range api.conds {
		got = append(got, c.Type+"="+c.Status)
	}
	slices.Sort(got)
	if want := []string{"FrequentContainerdRestart=True", "NICLinkDown=False", "NICLinkDown=True"}; !slices.Equal(got, want) {
		t.Errorf("conditions %q, want %q", got, want)
	}
	if len(api.events) != 2 || !slices.ContainsFunc(api.events, func(e string) bool {
		return strings.HasPrefix(e, "FrequentContainerdRestart: containerd.service restarted 6 times")
	}) || !slices.ContainsFunc(api.events, func(e string) bool {
		return strings.HasPrefix(e, "NICLinkDown: eth0 (52:54:00:12:34:56): carrier lost at ")
	}) {
		t.Errorf("events %q", api.events)
	}
}
