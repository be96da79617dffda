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
			case m[2] == "start" && m[3] == "started":
				// The agent's start phase is stamped with the exec of its
				// process: when systemd started drover-agent.
				add("agent exec", up)
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

// NetReadyRow names the figure issue 36 sets its Ready target on: node
// Ready less the agent's config phase, the wait for DHCP's default route
// and the metadata service's answers. Those waits are the network's and
// the metadata service's, not the node's (a smoke with injected metadata
// faults stretches them by design), so what is left is the boot's own
// work: kernel, initrd, systemd, apply, containerd, the kubelet, the join.
const NetReadyRow = "node Ready net of config"

// NetReady is node Ready less the config phase (its start, "agent
// started", to its end, "agent config"); false if an event is missing.
func (t Timeline) NetReady() (float64, bool) {
	ready, ok1 := t.Get("node Ready")
	start, ok2 := t.Get("agent started")
	end, ok3 := t.Get("agent config")
	if !ok1 || !ok2 || !ok3 || end < start {
		return 0, false
	}
	return ready - (end - start), true
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

// Row is one event of a first-boot/reboot table; NaN marks an event a boot
// did not have.
type Row struct {
	Event         string
	First, Reboot float64
	hasF, hasR    bool
}

// Table is the first-boot and reboot timeline side by side, the figure
// `make bench` tracks (bench/timeline-previous.txt holds the last one
// recorded).
type Table struct{ Rows []Row }

// MakeTable joins a first-boot and a reboot timeline, in first-boot order.
func MakeTable(first, reboot Timeline) Table {
	var t Table
	idx := map[string]int{}
	for _, e := range first.Events {
		idx[e.Name] = len(t.Rows)
		t.Rows = append(t.Rows, Row{Event: e.Name, First: e.Uptime, hasF: true})
	}
	for _, e := range reboot.Events {
		i, ok := idx[e.Name]
		if !ok {
			idx[e.Name], i = len(t.Rows), len(t.Rows)
			t.Rows = append(t.Rows, Row{Event: e.Name})
		}
		t.Rows[i].Reboot, t.Rows[i].hasR = e.Uptime, true
	}
	return t
}

func cell(v float64, ok bool) string {
	if !ok {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// Format writes the table in the form ParseTable reads: one event a line,
// "event name  first  reboot" with "-" for a missing figure.
func (t Table) Format() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-28s %10s %10s\n", "# event (guest s since boot)", "first boot", "reboot")
	for _, r := range t.Rows {
		fmt.Fprintf(&b, "%-28s %10s %10s\n", r.Event, cell(r.First, r.hasF), cell(r.Reboot, r.hasR))
	}
	return b.String()
}

// ParseTable reads what Format wrote ('#' lines are comments).
func ParseTable(text string) (Table, error) {
	var t Table
	for n, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 3 {
			return Table{}, fmt.Errorf("timeline table line %d: want \"event first reboot\", got %q", n+1, line)
		}
		r := Row{Event: strings.Join(f[:len(f)-2], " ")}
		var err error
		for i, dst := range []*float64{&r.First, &r.Reboot} {
			s := f[len(f)-2+i]
			if s == "-" {
				continue
			}
			if *dst, err = strconv.ParseFloat(s, 64); err != nil {
				return Table{}, fmt.Errorf("timeline table line %d: %q is not a number of seconds", n+1, s)
			}
			if i == 0 {
				r.hasF = true
			} else {
				r.hasR = true
			}
		}
		t.Rows = append(t.Rows, r)
	}
	return t, nil
}

// SideBySide prints the current table next to a previous one: each figure
// with the previous value and the difference, so a regression shows in
// review.
func SideBySide(cur, prev Table) string {
	prevRow := map[string]Row{}
	for _, r := range prev.Rows {
		prevRow[r.Event] = r
	}
	diff := func(a float64, aok bool, b float64, bok bool) string {
		if !aok || !bok {
			return ""
		}
		return fmt.Sprintf("(%+.2f)", a-b)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-28s %10s %10s %9s   %10s %10s %9s\n", "event (guest s since boot)", "first boot", "previous", "", "reboot", "previous", "")
	seen := map[string]bool{}
	row := func(r, p Row) {
		fmt.Fprintf(&b, "%-28s %10s %10s %9s   %10s %10s %9s\n", r.Event,
			cell(r.First, r.hasF), cell(p.First, p.hasF), diff(r.First, r.hasF, p.First, p.hasF),
			cell(r.Reboot, r.hasR), cell(p.Reboot, p.hasR), diff(r.Reboot, r.hasR, p.Reboot, p.hasR))
	}
	for _, r := range cur.Rows {
		seen[r.Event] = true
		row(r, prevRow[r.Event])
	}
	for _, p := range prev.Rows {
		if !seen[p.Event] {
			row(Row{Event: p.Event}, p)
		}
	}
	return b.String()
}
