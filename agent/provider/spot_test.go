package provider

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/harness/ecsmeta"
)

// TestSpotTermination asks the emulator, uncached, before and after the
// notice and after it is withdrawn: a 404 is no notice, a time is one.
func TestSpotTermination(t *testing.T) {
	inst := ecsmeta.DefaultInstance()
	f := newFixture(t, inst, hardened())
	ctx := context.Background()
	if at, notice, err := f.client.SpotTermination(ctx); notice || err != nil || !at.IsZero() {
		t.Fatalf("no notice served: %v %v %v", at, notice, err)
	}
	inst.SpotTerminationTime = "2026-12-02T08:00:00Z"
	f.srv.SetInstance(inst)
	at, notice, err := f.client.SpotTermination(ctx)
	if !notice || err != nil || !at.Equal(time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)) {
		t.Fatalf("notice served: %v %v %v", at, notice, err)
	}
	inst.SpotTerminationTime = ""
	f.srv.SetInstance(inst)
	if _, notice, err := f.client.SpotTermination(ctx); notice || err != nil {
		t.Fatalf("notice withdrawn, still read (cached?): %v %v", notice, err)
	}
	if n := f.log.count("spot/termination-time"); n != 0 {
		t.Errorf("a poll logged %d lines: a line every few seconds on the console", n)
	}
	if got := strings.Count(f.trace(), "GET /latest/meta-data/instance/spot/termination-time"); got != 3 {
		t.Errorf("%d requests for the key, want 3 (one per poll):\n%s", got, f.trace())
	}
}

func TestParseSpotTermination(t *testing.T) {
	for _, tc := range []struct {
		in     string
		notice bool
		err    string
	}{
		{"2026-12-02T08:00:00Z\n", true, ""},
		{"2026-12-02T16:00:00+08:00", true, ""},
		{"", false, `answered "", not a time: taken as no notice`},
		{"<html>error</html>", false, "not a time"},
		{"2026-12-02 08:00:00", false, "not a time"},
		{strings.Repeat("x", 200), false, "…"},
	} {
		at, notice, err := ParseSpotTermination(tc.in)
		if notice != tc.notice || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%q: %v %v %v", tc.in, at, notice, err)
		}
		if notice && at.Location() != time.UTC {
			t.Errorf("%q: %v not in UTC", tc.in, at)
		}
	}
}
