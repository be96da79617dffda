// Package conformance runs Kubernetes' own node conformance tests — the
// e2e suite's [NodeConformance] specs, built as e2e.test from the Go module
// proxy at the node's Kubernetes version — against a drover node booted by
// the smoke harness, with test images built here (images.go) and served by
// the harness registry, so nothing is pulled from anywhere else. It writes
// the suite's JUnit file and a table: passed, failed, and skipped by reason.
package conformance

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// DefaultFocus is upstream's node conformance selection: the specs tagged
// [NodeConformance], the set every node image is judged by.
const DefaultFocus = `\[NodeConformance\]`

// Skip is one class of specs not run, with the reason written down.
type Skip struct {
	Pattern string // ginkgo regexp on the spec's full name
	Reason  string
}

// Skips are upstream's usual skips for a node conformance run (the node
// e2e jobs' and Sonobuoy's) and the features a drover node does not claim.
// Nothing else is skipped by the harness; a spec the suite itself skips at
// run time (e2eskipper) is reported with the suite's own message.
var Skips = []Skip{
	{`\[Serial\]`, "[Serial]: needs the cluster to itself; upstream runs them in a separate serial job"},
	{`\[Slow\]`, "[Slow]: over five minutes each; upstream's node conformance job leaves them out"},
	{`\[Flaky\]`, "[Flaky]: known flaky upstream, excluded from every blocking job"},
	{`\[Disruptive\]`, "[Disruptive]: restarts or breaks the kubelet or node; upstream runs them in a separate job"},
	{`\[Alpha\]`, "[Alpha]: alpha feature gates, off on a drover node (it runs the kubelet's defaults)"},
	{`\[Feature:[^\]]+\]`, "[Feature:…]: an optional feature a drover node does not claim (none of the [NodeConformance] specs of v1.37 carries one)"},
}

// Plan is one run of the suite.
type Plan struct {
	Focus string // ginkgo focus regexp; DefaultFocus when empty
	Skips []Skip // Skips when nil
	// Timeout bounds the suite (ginkgo's own timeout, so it writes its
	// report); 0 means 3h.
	Timeout time.Duration
	// Procs > 1 runs the specs in that many parallel processes through
	// the ginkgo CLI (Options.Ginkgo), as upstream's jobs do; 0 or 1
	// runs them one after another in e2e.test itself.
	Procs int
}

func (p Plan) focus() string {
	if p.Focus == "" {
		return DefaultFocus
	}
	return p.Focus
}

func (p Plan) skips() []Skip {
	if p.Skips == nil {
		return Skips
	}
	return p.Skips
}

// skipRegexp joins the skips into ginkgo's one --ginkgo.skip value.
func (p Plan) skipRegexp() string {
	var parts []string
	for _, s := range p.skips() {
		parts = append(parts, s.Pattern)
	}
	return strings.Join(parts, "|")
}

// Validate compiles every pattern, so a typo is an error naming it, not a
// suite that silently runs everything or nothing.
func (p Plan) Validate() error {
	if _, err := regexp.Compile(p.focus()); err != nil {
		return fmt.Errorf("conformance focus %q: %w", p.focus(), err)
	}
	for _, s := range p.skips() {
		if _, err := regexp.Compile(s.Pattern); err != nil {
			return fmt.Errorf("conformance skip %q: %w", s.Pattern, err)
		}
	}
	return nil
}

// Args are e2e.test's arguments for the plan against the cluster of
// kubeconfig, writing its JUnit report into reportDir, when e2e.test runs
// the specs itself, one after another.
func (p Plan) Args(kubeconfig, reportDir string) []string {
	var out []string
	for _, f := range p.ginkgoFlags() {
		out = append(out, "--ginkgo."+f)
	}
	return append(out, suiteArgs(kubeconfig, reportDir)...)
}

// GinkgoArgs are the ginkgo CLI's arguments to run the plan's specs of the
// suite binary e2e in Procs parallel processes (the CLI's flags, then the
// suite's after "--"); the suite still writes one JUnit report, from the
// first process, with every process's specs.
func (p Plan) GinkgoArgs(e2e, kubeconfig, reportDir string) []string {
	out := []string{fmt.Sprintf("--procs=%d", p.Procs)}
	for _, f := range p.ginkgoFlags() {
		out = append(out, "--"+f)
	}
	out = append(out, e2e, "--")
	return append(out, suiteArgs(kubeconfig, reportDir)...)
}

// ginkgoFlags are ginkgo's own flags for the plan, without their prefix
// (e2e.test takes them as --ginkgo.X, the CLI as --X).
func (p Plan) ginkgoFlags() []string {
	timeout := p.Timeout
	if timeout == 0 {
		timeout = 3 * time.Hour
	}
	return []string{
		"focus=" + p.focus(),
		"skip=" + p.skipRegexp(),
		"timeout=" + timeout.String(),
		"no-color",
	}
}

func suiteArgs(kubeconfig, reportDir string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		// skeleton: no cloud provider; the node's ECS identity is
		// drover's business, not the suite's.
		"--provider=skeleton",
		"--report-dir=" + reportDir,
		// One node, and it must be Ready: none may be left out.
		"--allowed-not-ready-nodes=0",
		// No log dump over SSH: a drover node has no sshd.
		"--disable-log-dump",
	}
}

// Selected are the specs of all (e2e.test --list-tests) that the plan
// runs: those its focus matches and none of its skips does, as ginkgo
// selects them. Checked before the boot, so that a focus selecting
// nothing is an error in seconds, not after a node was started.
func (p Plan) Selected(all []string) []string {
	focus := regexp.MustCompile(p.focus())
	var out []string
	for _, name := range all {
		if focus.MatchString(name) && p.reasonFor(name) == "" {
			out = append(out, name)
		}
	}
	return out
}

// reasonFor is why a spec named name was not run by the plan: the first
// skip whose pattern matches, "" if none does.
func (p Plan) reasonFor(name string) string {
	for _, s := range p.skips() {
		if regexp.MustCompile(s.Pattern).MatchString(name) {
			return s.Reason
		}
	}
	return ""
}
