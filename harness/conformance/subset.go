package conformance

import (
	"fmt"
	"regexp"
	"strings"
)

// Subset is the few [NodeConformance] specs drover smoke runs on its own
// boot (make test, --conformance), chosen to span pods, probes, volumes,
// exec and logs, each well under a minute on a TCG node. None is [Serial]
// (the pull tests, an invalid registry's among them, are): the plan's
// skips apply to the subset too. Each entry is a part of one spec's
// full name; ResolveSubset finds the spec in e2e.test --list-tests, so a
// spec renamed upstream is an error, not a subset that silently shrinks.
var Subset = []string{
	"[sig-node] Pods should get a host IP",
	"[sig-node] Pods should support remote command execution over websockets",
	"[sig-node] Pods should support retrieving logs from the container over websockets",
	"[sig-node] Kubelet when scheduling a busybox command in a pod should print the output to logs",
	`[sig-node] Probing container should be restarted with a exec "cat /tmp/health" liveness probe`,
	"[sig-node] Probing container should be restarted with a /healthz http liveness probe",
	"[sig-storage] EmptyDir volumes should support (non-root,0644,tmpfs)",
	// "as non-root" alone also names the "with FSGroup" spec.
	"[sig-storage] ConfigMap should be consumable from pods in volume with mappings as non-root [Conformance]",
	"[sig-storage] Secrets should be consumable from pods in volume with defaultMode set",
	"[sig-node] Pods should be submitted and removed",
}

// ResolveSubset returns the full names of the [NodeConformance] specs of
// all (e2e.test --list-tests) that the parts name, one each, in order. A
// part that names no spec, more than one, or one the default plan skips
// ([Serial] …), is an error naming it.
func ResolveSubset(all, parts []string) ([]string, error) {
	conf := regexp.MustCompile(DefaultFocus)
	var out []string
	for _, p := range parts {
		var hits []string
		for _, name := range all {
			if conf.MatchString(name) && strings.Contains(name, p) && !contains(hits, name) {
				hits = append(hits, name)
			}
		}
		switch len(hits) {
		case 1:
			if r := (Plan{}).reasonFor(hits[0]); r != "" {
				return nil, fmt.Errorf("conformance subset: %q names %s, which the plan skips (%s); choose another", p, hits[0], r)
			}
			out = append(out, hits[0])
		case 0:
			return nil, fmt.Errorf("conformance subset: %q names no [NodeConformance] spec of this e2e.test (renamed upstream? fix conformance.Subset)", p)
		default:
			return nil, fmt.Errorf("conformance subset: %q names %d [NodeConformance] specs (%s); make it name one", p, len(hits), strings.Join(hits, "; "))
		}
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// FocusOn is a ginkgo focus regexp selecting exactly the specs named.
func FocusOn(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = regexp.QuoteMeta(n)
	}
	return "(" + strings.Join(q, "|") + ")"
}

// JudgeSubset passes if every spec named passed in res; its detail lists
// them, its error each one that did not, with why.
func JudgeSubset(res *Result, names []string) (string, error) {
	state := map[string]Outcome{}
	for _, o := range res.Specs {
		state[o.Name] = o
	}
	var bad []string
	for _, n := range names {
		o, ok := state[n]
		switch {
		case !ok:
			bad = append(bad, n+": not in the suite's [NodeConformance] specs")
		case o.State != "passed":
			bad = append(bad, fmt.Sprintf("%s: %s (%s)", n, o.State, o.Reason))
		}
	}
	if len(bad) > 0 {
		return "", fmt.Errorf("%d of %d e2e specs did not pass:\n  %s", len(bad), len(names), strings.Join(bad, "\n  "))
	}
	return fmt.Sprintf("%d specs passed: %s", len(names), strings.Join(names, "; ")), nil
}
