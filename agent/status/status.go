// Package status keeps the agent's boot timeline: which phase it is in,
// when each phase started and ended (wall time and seconds since boot), and
// the error that stopped it. It is written to /run/drover/status.json after
// every change (atomically), printed on the serial console one line per
// phase, and read back by `drover-agent status` and the smoke harness.
package status

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/drover-os/drover/internal/atomicfile"
)

// Path is where the status file lives on a node (under the agent's root).
const Path = "/run/drover/status.json"

// LastBootPath keeps a copy on the persistent /var, so the last boot's
// timeline and error survive a reboot and can be read from the disk of a
// stopped instance (the smoke harness does).
const LastBootPath = "/var/lib/drover/last-boot-status.json"

// Phase is one step of the agent's timeline.
type Phase struct {
	Name     string    `json:"name"`
	Started  time.Time `json:"started"`
	Ended    time.Time `json:"ended,omitempty"`
	UptimeS  float64   `json:"uptimeStart"`         // seconds since boot at start
	UptimeE  float64   `json:"uptimeEnd,omitempty"` // seconds since boot at end
	Result   string    `json:"result"`              // running, ok, failed, skipped
	Detail   string    `json:"detail,omitempty"`    // e.g. "node IP 10.0.2.15"
	Error    string    `json:"error,omitempty"`
	Attempts int       `json:"attempts,omitempty"`
}

// Status is the whole file.
type Status struct {
	Phase string `json:"phase"` // current or last phase
	State string `json:"state"` // provisioning, joined, failed, refused
	Error string `json:"error,omitempty"`
	// SecureBoot is whether the firmware enforced UEFI Secure Boot, as
	// drover-init read it from the EFI variable; nil when it did not say
	// or could not read it (SecureBootState "unknown").
	SecureBoot       *bool  `json:"secureBoot,omitempty"`
	SecureBootState  string `json:"secureBootState,omitempty"` // on, off or unknown
	SecureBootSource string `json:"secureBootSource,omitempty"`
	// SignedUKI: the initrd says its UKI was signed for Secure Boot.
	SignedUKI bool    `json:"signedUKI,omitempty"`
	Phases    []Phase `json:"phases"`
	// Units is the result of each unit the config enables, as systemd
	// reported it after the agent started them (the units phase); nil
	// until that phase ends.
	Units   []Unit `json:"units,omitempty"`
	Updated string `json:"updated"`
}

// Unit is one enabled unit of the config after the agent started it.
type Unit struct {
	Name string `json:"name"`
	// State is "ok" (the start job completed and the unit is active, or a
	// oneshot exited successfully) or "failed".
	State       string `json:"state"`
	Job         string `json:"job,omitempty"`         // the start job's result: done, failed, dependency, timeout, …
	ActiveState string `json:"activeState,omitempty"` // systemd's ActiveState afterwards
	SubState    string `json:"subState,omitempty"`    // running, exited, waiting, listening, dead, …
	Result      string `json:"result,omitempty"`      // the unit's Result: success, exit-code, signal, timeout, …
	Error       string `json:"error,omitempty"`
}

// Recorder updates the status file and prints console lines.
type Recorder struct {
	mu      sync.Mutex
	st      Status
	path    string
	copy    string
	console func(string)
	uptime  func() float64
	now     func() time.Time
}

// NewRecorder writes to root+Path; console receives one line per event.
func NewRecorder(root string, console func(string), uptime func() float64) *Recorder {
	return &Recorder{path: filepath.Join(root, Path), copy: filepath.Join(root, LastBootPath), console: console, uptime: uptime, now: time.Now,
		st: Status{State: "provisioning"}}
}

// Begin starts a phase and returns its index for Finish. Phases may
// overlap (the agent starts containerd beside the network wait).
func (r *Recorder) Begin(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	up := r.uptime()
	r.st.Phase = name
	r.st.Phases = append(r.st.Phases, Phase{Name: name, Started: r.now().UTC(), UptimeS: up, Result: "running"})
	r.line(fmt.Sprintf("drover-agent: [%7.2fs] %s: started", up, name))
	r.save()
	return len(r.st.Phases) - 1
}

// Span records a phase that began before the recorder existed, at uptime
// start (seconds since boot), and ends now: the agent's own start-up, from
// the process's exec to its first phase. The started line carries the
// earlier stamp, so the console timeline orders it where it happened.
func (r *Recorder) Span(name string, start float64, detail string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	up, now := r.uptime(), r.now().UTC()
	began := now.Add(-time.Duration((up - start) * float64(time.Second)))
	r.st.Phases = append(r.st.Phases, Phase{Name: name, Started: began, Ended: now, UptimeS: start, UptimeE: up, Result: "ok", Detail: detail})
	r.line(fmt.Sprintf("drover-agent: [%7.2fs] %s: started", start, name))
	r.line(fmt.Sprintf("drover-agent: [%7.2fs] %s: ok (%.1fs): %s", up, name, up-start, detail))
	r.save()
}

// End finishes the phase begun last; err nil means ok.
func (r *Recorder) End(detail string, err error) { r.Finish(-1, detail, err) }

// Finish finishes phase i (as returned by Begin; -1: the last one); err
// nil means ok.
func (r *Recorder) Finish(i int, detail string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i < 0 {
		i = len(r.st.Phases) - 1
	}
	if i < 0 || i >= len(r.st.Phases) {
		return
	}
	p := &r.st.Phases[i]
	p.Ended, p.UptimeE, p.Detail = r.now().UTC(), r.uptime(), detail
	if err != nil {
		p.Result, p.Error = "failed", err.Error()
		// The first failure is the node's: the background phases a
		// failure cancels end failed too, after it, and say only that.
		if r.st.State != "failed" {
			r.st.State, r.st.Error = "failed", fmt.Sprintf("%s: %v", p.Name, err)
		}
		r.line(fmt.Sprintf("drover-agent: [%7.2fs] %s: FAILED: %v", p.UptimeE, p.Name, err))
	} else {
		p.Result = "ok"
		msg := fmt.Sprintf("drover-agent: [%7.2fs] %s: ok (%.1fs)", p.UptimeE, p.Name, p.UptimeE-p.UptimeS)
		if detail != "" {
			msg += ": " + detail
		}
		r.line(msg)
	}
	r.save()
}

// SetState records a final state such as "joined" or "refused".
func (r *Recorder) SetState(state, errText string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.st.State, r.st.Error = state, errText
	r.save()
}

// SetSecureBoot records drover-init's Secure Boot finding: state "on",
// "off" or "unknown" (it could not be read), where it was read from, and
// whether the initrd says its UKI is signed.
func (r *Recorder) SetSecureBoot(state, source string, signedUKI bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.st.SecureBoot = nil
	if state == "on" || state == "off" {
		on := state == "on"
		r.st.SecureBoot = &on
	}
	r.st.SecureBootState, r.st.SecureBootSource, r.st.SignedUKI = state, source, signedUKI
	uki := "unsigned UKI"
	if signedUKI {
		uki = "signed UKI"
	}
	r.line(fmt.Sprintf("drover-agent: [%7.2fs] secure boot %s (%s, read by drover-init; %s)", r.uptime(), state, source, uki))
	r.save()
}

// SetUnits records the results of the config's enabled units.
func (r *Recorder) SetUnits(units []Unit) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.st.Units = units
	r.save()
}

// Note prints a console line and keeps it in the current phase's detail.
func (r *Recorder) Note(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.line(fmt.Sprintf("drover-agent: [%7.2fs] %s", r.uptime(), msg))
}

// Snapshot returns a copy of the status.
func (r *Recorder) Snapshot() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.st
	s.Phases = append([]Phase(nil), r.st.Phases...)
	return s
}

func (r *Recorder) line(s string) {
	if r.console != nil {
		r.console(s)
	}
}

// save writes the file atomically; a failure to write status must not stop
// provisioning, so it is reported on the console only.
func (r *Recorder) save() {
	r.st.Updated = r.now().UTC().Format(time.RFC3339Nano)
	data, _ := json.MarshalIndent(r.st, "", "  ")
	if err := atomicfile.Write(r.path, append(data, '\n'), 0o644); err != nil {
		r.line("drover-agent: cannot write status file: " + err.Error())
	}
	// /var is mounted by drover-init before the agent starts; a failure
	// here only loses the persistent copy.
	_ = atomicfile.Write(r.copy, append(data, '\n'), 0o644)
}

// Read loads a status file.
func Read(root string) (*Status, error) {
	data, err := os.ReadFile(filepath.Join(root, Path))
	if err != nil {
		return nil, fmt.Errorf("reading agent status: %w", err)
	}
	var s Status
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", Path, err)
	}
	return &s, nil
}

// Format renders a status for an operator.
func Format(s *Status) string {
	var b strings.Builder
	fmt.Fprintf(&b, "state: %s (phase %s)\n", s.State, s.Phase)
	if s.SecureBootState != "" {
		fmt.Fprintf(&b, "secure boot: %s (%s)", s.SecureBootState, s.SecureBootSource)
		if s.SignedUKI {
			b.WriteString(", signed UKI")
		}
		b.WriteString("\n")
	} else if s.SecureBoot != nil {
		fmt.Fprintf(&b, "secure boot: %t (%s)\n", *s.SecureBoot, s.SecureBootSource)
	}
	if s.Error != "" {
		fmt.Fprintf(&b, "error: %s\n", s.Error)
	}
	for _, u := range s.Units {
		fmt.Fprintf(&b, "unit %s: %s (job %s, %s/%s, result %s)", u.Name, u.State, u.Job, u.ActiveState, u.SubState, u.Result)
		if u.Error != "" {
			fmt.Fprintf(&b, "  error: %s", u.Error)
		}
		b.WriteByte('\n')
	}
	for _, p := range s.Phases {
		fmt.Fprintf(&b, "  %-10s %-8s %7.2fs → %7.2fs", p.Name, p.Result, p.UptimeS, p.UptimeE)
		if p.Detail != "" {
			fmt.Fprintf(&b, "  %s", p.Detail)
		}
		if p.Error != "" {
			fmt.Fprintf(&b, "  error: %s", p.Error)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// ProcessStart returns when the calling process was exec'd, in seconds since
// boot: field 22 of /proc/self/stat under root (starttime, in clock ticks;
// USER_HZ is 100 on every Linux architecture drover builds for).
func ProcessStart(root string) (float64, error) {
	data, err := os.ReadFile(filepath.Join(root, "/proc/self/stat"))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// count the fields after its closing one.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/self/stat: no command name in %q", data)
	}
	f := strings.Fields(string(data[i+1:]))
	const starttime = 22 - 3 // fields 3.. follow the command name
	if len(f) <= starttime {
		return 0, fmt.Errorf("/proc/self/stat: %d fields after the command name, want more than %d", len(f), starttime)
	}
	var ticks uint64
	if _, err := fmt.Sscanf(f[starttime], "%d", &ticks); err != nil {
		return 0, fmt.Errorf("/proc/self/stat: starttime %q: %w", f[starttime], err)
	}
	return float64(ticks) / 100, nil
}

// SchedStat returns how long the calling process (its first thread, the
// one systemd forked) has run on a CPU and how long it has waited in a run
// queue for one since the fork, in seconds (/proc/self/schedstat: the
// kernel's sched_info, nanoseconds). Called first thing in main, it splits
// the start-up into work, contention for the CPUs and the rest (blocked on
// I/O or sleeping).
func SchedStat(root string) (onCPU, waiting float64, err error) {
	data, err := os.ReadFile(filepath.Join(root, "/proc/self/schedstat"))
	if err != nil {
		return 0, 0, err
	}
	var run, wait uint64
	if _, err := fmt.Sscanf(string(data), "%d %d", &run, &wait); err != nil {
		return 0, 0, fmt.Errorf("/proc/self/schedstat: %q: %w", data, err)
	}
	return float64(run) / 1e9, float64(wait) / 1e9, nil
}

// Uptime reads /proc/uptime under root (seconds since boot), or 0.
func Uptime(root string) func() float64 {
	return func() float64 {
		data, err := os.ReadFile(filepath.Join(root, "/proc/uptime"))
		if err != nil {
			return 0
		}
		var up float64
		fmt.Sscanf(string(data), "%f", &up)
		return up
	}
}
