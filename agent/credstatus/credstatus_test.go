package credstatus

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestEncodeParse(t *testing.T) {
	at := time.Date(2026, 12, 4, 8, 0, 0, 0, time.UTC)
	var b bytes.Buffer
	long := strings.Repeat("x", 3000)
	if err := Encode(&b, Status{Time: at, Registry: "r.example:5000", Class: NoRAMRole, Message: long}); err != nil {
		t.Fatal(err)
	}
	s, err := Parse(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if !s.Time.Equal(at) || s.Registry != "r.example:5000" || s.Class != NoRAMRole || len(s.Message) != maxMessage {
		t.Errorf("round trip: %+v", s)
	}
	for _, bad := range []string{"", "{", `{"registry":"x"}`, `{"time":"2026-12-04T08:00:00Z"}`} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func TestReason(t *testing.T) {
	for class, want := range map[string]string{NoRAMRole: "ACRNoRAMRole", AccessDenied: "ACRAccessDenied",
		InstanceNotFound: "ACRInstanceNotFound", Failed: "ACRCredentialsFailed", "other": "ACRCredentialsFailed"} {
		if got := Reason(class); got != want {
			t.Errorf("Reason(%q) = %q, want %q", class, got, want)
		}
	}
}

// TestWatch: a failure is reported once, again after RepeatEvery or after
// a success, and at once when its class or registry changes; a status
// seen before, or older, is not reported.
func TestWatch(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 8, 0, 0, 0, time.UTC)
	st := func(sec int, class, reg string) Status {
		return Status{Time: t0.Add(time.Duration(sec) * time.Second), Registry: reg, Class: class, Message: "the instance has no RAM role attached"}
	}
	var w Watch
	steps := []struct {
		now    time.Duration
		s      Status
		reason string // "" for no Event
	}{
		{0, st(0, "", "a:1"), ""},                                  // success
		{1 * time.Second, st(1, NoRAMRole, "a:1"), "ACRNoRAMRole"}, // first failure
		{2 * time.Second, st(1, NoRAMRole, "a:1"), ""},             // the same file again
		{3 * time.Second, st(2, NoRAMRole, "a:1"), ""},             // a retry, reported recently
		{4 * time.Second, st(0, AccessDenied, "a:1"), ""},          // older than the last seen
		{5 * time.Second, st(3, AccessDenied, "a:1"), "ACRAccessDenied"},
		{6 * time.Second, st(4, AccessDenied, "b:2"), "ACRAccessDenied"}, // another registry
		{RepeatEvery, st(5, AccessDenied, "b:2"), ""},
		{RepeatEvery + 7*time.Second, st(6, AccessDenied, "b:2"), "ACRAccessDenied"},
		{RepeatEvery + 8*time.Second, st(7, "", "b:2"), ""},
		{RepeatEvery + 9*time.Second, st(8, AccessDenied, "b:2"), "ACRAccessDenied"}, // after a success
	}
	for i, s := range steps {
		reason, msg, ok := w.Observe(t0.Add(s.now), s.s)
		if ok != (s.reason != "") || reason != s.reason {
			t.Errorf("step %d: Observe = %q, %v; want %q", i, reason, ok, s.reason)
		}
		if ok && (!strings.Contains(msg, s.s.Registry) || !strings.Contains(msg, "no RAM role attached")) {
			t.Errorf("step %d: message %q names neither the registry nor the cause", i, msg)
		}
	}
}
