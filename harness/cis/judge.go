package cis

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// Kind is the benchmark's own classification of a check.
type Kind string

const (
	// Automated checks are scored by the benchmark.
	Automated Kind = "Automated"
	// Manual checks are advisory: the benchmark leaves the judgement to
	// the operator.
	Manual Kind = "Manual"
)

// Status is a check's result.
type Status string

const (
	Pass Status = "PASS"
	Fail Status = "FAIL"
	// NotApplicable: what the check audits does not exist in drover's
	// design; the result says why.
	NotApplicable Status = "NOT APPLICABLE"
)

// A Manual check is judged like an Automated one (a node OS should pass
// them where its design allows): Pass when the node meets what the
// benchmark's test expects, its evidence then also saying what the
// benchmark leaves to the operator; Fail when the node contradicts it.

// Result is one check's verdict.
type Result struct {
	ID        string `json:"id"`
	Benchmark string `json:"benchmark"`
	Title     string `json:"title"`
	Kind      Kind   `json:"kind"`
	Status    Status `json:"status"`
	// Evidence is what decided it: the file's mode, the flag or the
	// /configz value; for NotApplicable why the check does not apply.
	Evidence string `json:"evidence"`
}

func (r Result) String() string {
	return fmt.Sprintf("%s %s (%s, %s): %s — %s", r.Benchmark, r.ID, r.Title, r.Kind, r.Status, r.Evidence)
}

// The benchmarks the checks come from.
const (
	ACK  = "CIS ACK 1.0"
	K8s9 = "CIS Kubernetes 1.9"
)

// check is one benchmark check: judge returns its status and evidence.
// A Manual check's Pass carries advice: what the operator still judges.
type check struct {
	id, benchmark, title string
	kind                 Kind
	advice               string // Manual: what the operator should look at
	judge                func(*view) (Status, string)
}

// view is the evidence made ready for the checks.
type view struct {
	ev      Evidence
	flags   map[string]string // the kubelet's --flags (last one wins, as pflag)
	kc      *kubeletv1beta1.KubeletConfiguration
	kcError string
}

// boolFlags are the kubelet's boolean flags the checks read: pflag takes
// "--flag" alone as true.
var boolFlags = map[string]bool{"anonymous-auth": true, "protect-kernel-defaults": true,
	"make-iptables-util-chains": true, "rotate-certificates": true}

// parseFlags reads "--name=value", "--name value" and, for a boolean flag,
// "--name" alone. Arguments after "--" and positional ones are ignored.
func parseFlags(args []string) map[string]string {
	out := map[string]string{}
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !hasValue {
			if boolFlags[name] {
				value = "true"
			} else if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++
				value = args[i]
			}
		}
		out[name] = value
	}
	return out
}

func newView(ev Evidence) *view {
	v := &view{ev: ev, flags: parseFlags(ev.KubeletArgs)}
	switch {
	case ev.Configz == nil && ev.ConfigzError != "":
		v.kcError = "the kubelet's /configz was not read: " + ev.ConfigzError
	case ev.Configz == nil:
		v.kcError = "the kubelet's /configz was not read"
	default:
		b, _ := json.Marshal(ev.Configz)
		var kc kubeletv1beta1.KubeletConfiguration
		if err := json.Unmarshal(b, &kc); err != nil {
			v.kcError = "the kubelet's /configz is not a KubeletConfiguration: " + err.Error()
		} else {
			v.kc = &kc
		}
	}
	return v
}

// Judge evaluates every check, in the benchmark's order.
func Judge(ev Evidence) []Result {
	v := newView(ev)
	out := make([]Result, 0, len(checks))
	for _, c := range checks {
		st, evidence := c.judge(v)
		if c.kind == Manual && st == Pass {
			evidence += "; operator: " + c.advice
		}
		out = append(out, Result{ID: c.id, Benchmark: c.benchmark, Title: c.title, Kind: c.kind, Status: st, Evidence: evidence})
	}
	return out
}

// Summary is the one line of a run: counts by status, failures named.
func Summary(rs []Result) (line string, failed []Result) {
	n := map[Status]int{}
	for _, r := range rs {
		n[r.Status]++
		if r.Status == Fail {
			failed = append(failed, r)
		}
	}
	line = fmt.Sprintf("%s worker node (+ %s kubelet checks): %d pass, %d not applicable", ACK, K8s9, n[Pass], n[NotApplicable])
	if len(failed) > 0 {
		ids := make([]string, len(failed))
		for i, r := range failed {
			ids[i] = r.Benchmark + " " + r.ID
		}
		line += fmt.Sprintf(", %d FAILED: %s", len(failed), strings.Join(ids, ", "))
	}
	return line, failed
}

// File checks.

// modeAtMost passes when path's mode has no bit beyond max (kube-bench's
// "permissions has max 644": setuid, setgid and sticky count too).
func (v *view) modeAtMost(max uint32, paths ...string) (Status, string) {
	return v.eachFile(paths, func(p string, f File) (bool, string) {
		s := fmt.Sprintf("%s %04o", p+link(f), f.Mode)
		if f.Mode&^max != 0 {
			return false, s + fmt.Sprintf(" (bits %04o beyond %04o)", f.Mode&^max, max)
		}
		return true, s
	})
}

// ownedByRoot passes when every path is owned by uid 0 and gid 0.
func (v *view) ownedByRoot(paths ...string) (Status, string) {
	return v.eachFile(paths, func(p string, f File) (bool, string) {
		s := fmt.Sprintf("%s %d:%d", p+link(f), f.UID, f.GID)
		if f.UID != 0 || f.GID != 0 {
			return false, s + " (not root:root)"
		}
		return true, s
	})
}

// eachFile judges every path the probe examined with ok, which says
// whether the file passes and what it saw; a path the probe did not
// examine, could not stat or found missing fails the check.
func (v *view) eachFile(paths []string, ok func(p string, f File) (bool, string)) (Status, string) {
	if len(paths) == 0 {
		return Fail, "no file to judge"
	}
	var seen []string
	st := Pass
	for _, p := range paths {
		f, examined := v.ev.Files[p]
		switch {
		case !examined:
			return Fail, p + " was not examined by the probe"
		case f.Error != "":
			return Fail, p + ": " + f.Error
		case f.Missing:
			return Fail, p + " does not exist"
		}
		pass, s := ok(p, f)
		if !pass {
			st = Fail
		}
		seen = append(seen, s)
	}
	return st, strings.Join(seen, "; ")
}

func link(f File) string {
	if f.Link == "" {
		return ""
	}
	return " -> " + f.Link
}

// flagFile is the file a kubelet flag names; "" when the flag is not set.
func (v *view) flagFile(name string) string { return v.flags[name] }

// clientCAFile is the kubelet's client CA: --client-ca-file, else the
// loaded configuration's authentication.x509.clientCAFile.
func (v *view) clientCAFile() (path, from string) {
	if p := v.flags["client-ca-file"]; p != "" {
		return p, "--client-ca-file"
	}
	if v.kc != nil && v.kc.Authentication.X509.ClientCAFile != "" {
		return v.kc.Authentication.X509.ClientCAFile, "/configz authentication.x509.clientCAFile"
	}
	return "", ""
}

// setting reads one kubelet setting both ways kube-bench does: the flag on
// the command line and the field of the loaded configuration. ok judges a
// value (the flag's text or the configuration's value); unset says whether
// the setting being absent from both passes. /configz holds what the
// kubelet runs with (the flag applied over the file), so a flag and the
// configuration can disagree only if the kubelet ignored one; both are
// judged anyway.
type setting struct {
	flag, path string
	// fromConfig returns the field's value as text and whether it is set.
	fromConfig func(*kubeletv1beta1.KubeletConfiguration) (string, bool)
	ok         func(string) bool
	unsetOK    bool
}

func (v *view) judgeSetting(s setting) (Status, string) {
	var parts []string
	st := Pass
	flagValue, flagSet := v.flags[s.flag]
	if flagSet {
		parts = append(parts, fmt.Sprintf("--%s=%s", s.flag, flagValue))
		if !s.ok(flagValue) {
			st = Fail
			parts[len(parts)-1] += " (fails)"
		}
	} else {
		parts = append(parts, "no --"+s.flag)
	}
	if v.kc == nil {
		return Fail, strings.Join(append(parts, v.kcError), "; ")
	}
	value, set := s.fromConfig(v.kc)
	switch {
	case set:
		parts = append(parts, fmt.Sprintf("/configz %s=%s", s.path, value))
		if !s.ok(value) {
			st = Fail
			parts[len(parts)-1] += " (fails)"
		}
	default:
		parts = append(parts, "/configz "+s.path+" not set")
		if !s.unsetOK && !flagSet {
			st = Fail
		}
	}
	return st, strings.Join(parts, "; ")
}

func isValue(want string) func(string) bool { return func(s string) bool { return s == want } }

func boolText(b *bool) (string, bool) {
	if b == nil {
		return "", false
	}
	return fmt.Sprint(*b), true
}

// CISCiphers are the TLS cipher suites ACK 4.2.10 (Kubernetes 1.9 4.2.12)
// permits.
var CISCiphers = []string{
	"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
	"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
	"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305", "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
	"TLS_RSA_WITH_AES_256_GCM_SHA384", "TLS_RSA_WITH_AES_128_GCM_SHA256",
}

// cipherAllowed accepts the CIS names and Go's, which spell the
// ChaCha20 suites with a _SHA256 suffix.
func cipherAllowed(name string) bool {
	return slices.Contains(CISCiphers, strings.TrimSuffix(name, "_SHA256")) || slices.Contains(CISCiphers, name)
}
