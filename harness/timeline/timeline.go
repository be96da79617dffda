// Package timeline reads a drover node's boot timeline from its serial
// console: kernel start, drover-init, the hand-over to systemd, and each
// drover-agent phase up to Node Ready, in seconds since boot (the kernel's
// printk clock and the agent's own uptime stamps), so the numbers are the
// guest's, not the emulator's.
package timeline

import (
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Event is one point of the timeline.
type Event struct {
	Name   string  `json:"name"`
	Uptime float64 `json:"uptime"` // seconds since the kernel started
}

// Timeline is the ordered list of events found.
type Timeline struct {
	Events []Event `json:"events"`
}

var (
	kmsg  = regexp.MustCompile(`^\[\s*(\d+\.\d+)\]\s(.*)$`)
	agent = regexp.MustCompile(`drover-agent: \[\s*(\d+\.\d+)s\] (\w+): (started|ok|FAILED)`)
)

// Parse extracts the timeline from a console log. When a log holds several
// boots, the last one is used.
func Parse(log string) Timeline {
	if i := strings.LastIndex(log, "Linux version"); i >= 0 {
		if j := strings.LastIndex(log[:i], "\n"); j >= 0 {
			log = log[j+1:]
		}
	}
	var t Timeline
	seen := map[string]bool{}
	add := func(name string, up float64) {
		if !seen[name] {
			seen[name] = true
			t.Events = append(t.Events, Event{name, up})
		}
	}
	for _, line := range strings.Split(log, "\n") {
		line = strings.TrimRight(line, "\r")
		if m := agent.FindStringSubmatch(line); m != nil {
			up, _ := strconv.ParseFloat(m[1], 64)
			switch {
			case m[2] == "kubelet" && m[3] == "started":
				add("kubelet starting", up)
			case m[2] == "ready" && m[3] == "ok":
				add("node Ready", up)
			case m[3] == "ok":
				add("agent "+m[2], up)
			case m[3] == "FAILED":
				add("agent "+m[2]+" FAILED", up)
			case m[2] == "config" && m[3] == "started":
				add("agent started", up)
			}
			continue
		}
		m := kmsg.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		up, _ := strconv.ParseFloat(m[1], 64)
		msg := m[2]
		switch {
		case strings.HasPrefix(msg, "Linux version"):
			add("kernel", up)
		case strings.HasPrefix(msg, "drover-init: mount-api"):
			add("initrd (drover-init)", up)
		case strings.HasPrefix(msg, "drover-init: verity"):
			add("verity root", up)
		case strings.HasPrefix(msg, "drover-init: exec "):
			add("systemd", up)
		}
	}
	sort.SliceStable(t.Events, func(i, j int) bool { return t.Events[i].Uptime < t.Events[j].Uptime })
	return t
}

// Get returns the uptime of the named event.
func (t Timeline) Get(name string) (float64, bool) {
	for _, e := range t.Events {
		if e.Name == name {
			return e.Uptime, true
		}
	}
	return 0, false
}

// Print writes the timeline as a table.
func (t Timeline) Print(w io.Writer) {
	for _, e := range t.Events {
		fmt.Fprintf(w, "  %8.2fs  %s\n", e.Uptime, e.Name)
	}
}

// Median combines several boots' timelines event by event (the events
// found in every boot), for `make bench`.
func Median(ts []Timeline) Timeline {
	if len(ts) == 0 {
		return Timeline{}
	}
	var out Timeline
	for _, e := range ts[0].Events {
		var vals []float64
		for _, t := range ts {
			if v, ok := t.Get(e.Name); ok {
				vals = append(vals, v)
			}
		}
		if len(vals) != len(ts) {
			continue
		}
		sort.Float64s(vals)
		out.Events = append(out.Events, Event{e.Name, vals[len(vals)/2]})
	}
	return out
}
