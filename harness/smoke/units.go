package smoke

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// UnitsResult is what the probe's "units" mode reports: the node's own
// `systemctl list-units --failed` and, for each failed unit, its last
// journal lines of this boot.
type UnitsResult struct {
	Failed  []string            `json:"failed"`
	Journal map[string][]string `json:"journal"`
	Error   string              `json:"error"`
}

// FailedUnits asks the node (through the probe, with its own systemctl and
// journalctl) which units have failed this boot.
func (e *Env) FailedUnits(ctx context.Context, in *Instance, pod string) (*UnitsResult, error) {
	msg, err := e.probe(ctx, in, pod, []string{"units"})
	if err != nil {
		return nil, err
	}
	var u UnitsResult
	if err := json.Unmarshal([]byte(msg), &u); err != nil {
		return nil, fmt.Errorf("probe units report %q: %w", msg, err)
	}
	if u.Error != "" {
		return nil, fmt.Errorf("probe could not list the node's units: %s", u.Error)
	}
	return &u, nil
}

// Err is nil when no unit failed; otherwise it names every failed unit
// with its journal lines.
func (u *UnitsResult) Err() error {
	if len(u.Failed) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d failed unit(s) (systemctl --failed): %s", len(u.Failed), strings.Join(u.Failed, ", "))
	names := append([]string(nil), u.Failed...)
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "\n  journalctl -b -u %s:", n)
		for _, l := range u.Journal[n] {
			b.WriteString("\n    " + l)
		}
	}
	return fmt.Errorf("%s", b.String())
}

// consoleRules are what a boot's serial console must not show: systemd's
// status line of a failed unit, a database rebuilt at boot (the image ships
// them built, issue 15), and dm-verity hashing with the kernel's generic
// C code (the initrd loads the CPU's SHA-256 module first, image/build).
var consoleRules = []struct{ match, problem string }{
	{"[FAILED]", "a unit failed"},
	{"Rebuild Hardware Database", "the udev hwdb is rebuilt at boot"},
	{"Rebuild Journal Catalog", "the journal catalog is rebuilt at boot"},
	{"Rebuild Dynamic Linker Cache", "ld.so.cache is rebuilt at boot"},
	{`device-mapper: verity: sha256 using shash "sha256-generic"`, "dm-verity hashes with sha256-generic: the initrd did not load the CPU's SHA-256 module (crypto-sha256) before the verity target"},
}

// ConsoleProblems reads the last boot in a serial console log (from its
// last "Linux version" line) against consoleRules: one problem per
// offending line, with the line.
func ConsoleProblems(log string) []string {
	if i := strings.LastIndex(log, "Linux version"); i >= 0 {
		log = log[i:]
	}
	var out []string
	for _, line := range strings.Split(log, "\n") {
		line = strings.TrimRight(line, "\r")
		for _, rule := range consoleRules {
			if strings.Contains(line, rule.match) {
				out = append(out, rule.problem+": "+strings.TrimSpace(line))
			}
		}
	}
	return out
}

// checkNoFailedUnits adds the checks "no failed systemd units (boot)": a
// node must come up with `systemctl --failed` empty, on every boot; and
// "serial console clean (boot)": no [FAILED] line, no database rebuilt, no
// sha256-generic under dm-verity (ConsoleProblems).
func (e *Env) checkNoFailedUnits(ctx context.Context, r *Report, in *Instance, boot, pod string) {
	s := time.Now()
	r.add("serial console clean ("+boot+")", s, errIf(ConsoleProblems(in.VM.Log())),
		"no [FAILED], no Rebuild Hardware Database / Journal Catalog / Dynamic Linker Cache, dm-verity not on sha256-generic")
	sctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	u, err := e.FailedUnits(sctx, in, pod)
	if err == nil {
		err = u.Err()
	}
	r.add("no failed systemd units ("+boot+")", s, err, "systemctl --failed: none")
}

// ChainResult is systemd's own account of the boot from the probe's
// "chain" mode.
type ChainResult struct {
	Chain string `json:"chain"` // systemd-analyze critical-chain drover-agent.service kubelet.service
	Time  string `json:"time"`  // systemd-analyze time
	Error string `json:"error"`
}

// CriticalChain runs systemd-analyze on the node through the probe.
func (e *Env) CriticalChain(ctx context.Context, in *Instance, pod string) (*ChainResult, error) {
	msg, err := e.probe(ctx, in, pod, []string{"chain"})
	if err != nil {
		return nil, err
	}
	var c ChainResult
	if err := json.Unmarshal([]byte(msg), &c); err != nil {
		return nil, fmt.Errorf("probe chain report %q: %w", msg, err)
	}
	if c.Error != "" && c.Chain == "" {
		return nil, fmt.Errorf("systemd-analyze on the node: %s", c.Error)
	}
	return &c, nil
}
