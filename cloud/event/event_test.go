package event

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// Each event is one line a JSON reader takes back whole; an event without
// a time gets the printer's, one with a time keeps it.
func TestJSONLines(t *testing.T) {
	var buf bytes.Buffer
	now := time.Date(2026, 12, 6, 1, 2, 3, 0, time.UTC)
	set := now.Add(-time.Hour)
	print := JSONLines(&buf, func() time.Time { return now })
	print(Event{Kind: "upload", Region: "cn-hangzhou", Progress: "50%", Message: "a\nmultiline message"})
	print(Event{Time: set, Kind: Done, Group: "asg-1", Message: "done", Result: map[string]int{"n": 1}})
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), buf.String())
	}
	var got [2]Event
	for i, l := range lines {
		if err := json.Unmarshal([]byte(l), &got[i]); err != nil {
			t.Fatalf("line %d: %v: %s", i+1, err, l)
		}
	}
	if !got[0].Time.Equal(now) || got[0].Kind != "upload" || got[0].Progress != "50%" || got[0].Message != "a\nmultiline message" {
		t.Errorf("first event read back as %+v", got[0])
	}
	if !got[1].Time.Equal(set) || got[1].Group != "asg-1" || got[1].Result == nil {
		t.Errorf("second event read back as %+v", got[1])
	}
	if !strings.Contains(lines[0], `"event":"upload"`) || strings.Contains(lines[0], `"result"`) {
		t.Errorf("first line %s: want the kind under \"event\" and no empty result", lines[0])
	}
}
