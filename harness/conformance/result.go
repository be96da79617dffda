package conformance

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
)

// junitSuites is the part of a ginkgo JUnit report read here (the e2e
// framework's --report-dir junit_01.xml).
type junitSuites struct {
	Suites []struct {
		Cases []junitCase `xml:"testcase"`
	} `xml:"testsuite"`
}

type junitCase struct {
	Name    string `xml:"name,attr"`
	Status  string `xml:"status,attr"`
	Time    string `xml:"time,attr"`
	Skipped *struct {
		Message string `xml:"message,attr"`
	} `xml:"skipped"`
	Failure *struct {
		Message string `xml:"message,attr"`
		Text    string `xml:",chardata"`
	} `xml:"failure"`
	Error *struct {
		Message string `xml:"message,attr"`
	} `xml:"error"`
}

// Outcome of one spec.
type Outcome struct {
	Name   string
	State  string // passed, failed, skipped
	Reason string // why skipped, or the failure's first line
	Step   bool   // a suite step ([SynchronizedBeforeSuite], …), not a spec
}

// Result is the run as the table shows it: the [NodeConformance] specs,
// each passed, failed or skipped with a reason.
type Result struct {
	Specs []Outcome
	// Others ran but are not in the table: specs outside [NodeConformance]
	// that a narrowed focus selected, and the suite's own nodes
	// ([SynchronizedBeforeSuite], …) when they failed. A run is judged on
	// them too: a focused spec failing is a failed run.
	Others []Outcome
	// SuiteErr is how the suite exited when it did not exit 0.
	SuiteErr error
}

// notRunReason is the reason given to a spec of the focus that the suite
// never reached.
const notRunReason = "not run (the suite stopped before it: timeout or interrupt)"

// specName strips ginkgo's node-type prefix ("[It] ") from a JUnit case
// name, leaving the full text `e2e.test --list-tests` prints.
func specName(s string) string {
	return strings.TrimSpace(strings.TrimPrefix(s, "[It] "))
}

// listedRE is a line of `e2e.test --list-tests`: "    file.go:123: name".
var listedRE = regexp.MustCompile(`^\s*\S+\.go:\d+: (.+)$`)

// ParseList reads `e2e.test --list-tests` output into spec names.
func ParseList(out string) []string {
	var names []string
	for _, l := range strings.Split(out, "\n") {
		if m := listedRE.FindStringSubmatch(l); m != nil {
			names = append(names, strings.TrimSpace(m[1]))
		}
	}
	return names
}

// Classify judges every spec of the suite (all, from --list-tests) that
// upstream's node conformance focus selects, from the JUnit report r of a
// run of plan: what ran passed or failed; what did not run is skipped by
// the plan's reason, by being outside a narrowed focus, or by the suite's
// own message.
func Classify(all []string, junit io.Reader, plan Plan) (*Result, error) {
	var js junitSuites
	if err := xml.NewDecoder(junit).Decode(&js); err != nil {
		return nil, fmt.Errorf("reading the e2e JUnit report: %w", err)
	}
	cases := map[string]junitCase{}
	for _, s := range js.Suites {
		for _, c := range s.Cases {
			cases[specName(c.Name)] = c
		}
	}
	conf := regexp.MustCompile(DefaultFocus)
	focus, err := regexp.Compile(plan.focus())
	if err != nil {
		return nil, err
	}
	res := &Result{}
	seen := map[string]bool{}
	for _, name := range all {
		if !conf.MatchString(name) || seen[name] {
			continue
		}
		seen[name] = true
		o := Outcome{Name: name}
		c, ran := cases[name]
		switch {
		case ran && c.Failure != nil, ran && c.Error != nil, ran && c.Status == "failed":
			o.State, o.Reason = "failed", failureLine(c)
		case ran && c.Skipped == nil && c.Status != "skipped" && c.Status != "pending":
			o.State = "passed"
		default:
			o.State = "skipped"
			if r := plan.reasonFor(name); r != "" {
				o.Reason = r
			} else if !focus.MatchString(name) {
				o.Reason = "outside this run's focus (CONFORMANCE_FOCUS=" + plan.focus() + ")"
			} else if ran && c.Skipped != nil && c.Skipped.Message != "" {
				o.Reason = "skipped by the suite: " + firstLine(c.Skipped.Message)
			} else {
				o.Reason = notRunReason
			}
		}
		res.Specs = append(res.Specs, o)
	}
	// In the report's order, so that the list is stable.
	for _, s := range js.Suites {
		for _, c := range s.Cases {
			name := specName(c.Name)
			if seen[name] {
				continue
			}
			spec := strings.HasPrefix(c.Name, "[It] ")
			switch {
			case c.Failure != nil, c.Error != nil, c.Status == "failed":
				res.Others = append(res.Others, Outcome{Name: name, State: "failed", Reason: failureLine(c), Step: !spec})
			case spec && c.Skipped == nil && c.Status != "skipped" && c.Status != "pending":
				res.Others = append(res.Others, Outcome{Name: name, State: "passed"})
			}
		}
	}
	return res, nil
}

// Verdict is nil when the run passed: every [NodeConformance] spec it ran
// passed, every spec its focus selected ran, nothing else it ran failed,
// it ran something, and the suite exited 0. Otherwise it says what did
// not, counted.
func (r *Result) Verdict() error {
	var why []string
	if n := r.Count("failed"); n > 0 {
		why = append(why, fmt.Sprintf("%d [NodeConformance] spec(s) failed", n))
	}
	notRun := 0
	for _, o := range r.Specs {
		if o.State == "skipped" && o.Reason == notRunReason {
			notRun++
		}
	}
	if notRun > 0 {
		why = append(why, fmt.Sprintf("%d [NodeConformance] spec(s) of the focus did not run (the suite stopped before them)", notRun))
	}
	others, ran := count(r.Others, "failed"), r.Count("passed")+r.Count("failed")
	for _, o := range r.Others {
		if !o.Step {
			ran++
		}
	}
	if others > 0 {
		why = append(why, fmt.Sprintf("%d other spec(s) or suite step(s) failed", others))
	}
	if len(why) == 0 && ran == 0 {
		why = append(why, "the focus selected no spec that ran: check --focus (make's CONFORMANCE_FOCUS), a ginkgo regexp matched against the names `e2e.test --list-tests` prints")
	}
	if len(why) == 0 && r.SuiteErr != nil {
		why = append(why, fmt.Sprintf("the suite exited with %v though its report shows no failure", r.SuiteErr))
	}
	if len(why) == 0 {
		return nil
	}
	return errors.New(strings.Join(why, "; "))
}

func failureLine(c junitCase) string {
	switch {
	case c.Failure != nil && strings.TrimSpace(c.Failure.Message) != "":
		return firstLine(c.Failure.Message)
	case c.Failure != nil:
		return firstLine(c.Failure.Text)
	case c.Error != nil:
		return firstLine(c.Error.Message)
	}
	return "failed"
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// Count returns how many specs are in state.
func (r *Result) Count(state string) int { return count(r.Specs, state) }

// count returns how many of outs are in state.
func count(outs []Outcome, state string) int {
	n := 0
	for _, o := range outs {
		if o.State == state {
			n++
		}
	}
	return n
}

// Print writes the table: totals, skipped by reason, and every failure.
func (r *Result) Print(w io.Writer) {
	ran := r.Count("passed") + r.Count("failed")
	fmt.Fprintf(w, "node conformance ([NodeConformance] specs of the suite: %d)\n", len(r.Specs))
	fmt.Fprintf(w, "  %-8s %4d\n", "passed", r.Count("passed"))
	fmt.Fprintf(w, "  %-8s %4d\n", "failed", r.Count("failed"))
	fmt.Fprintf(w, "  %-8s %4d\n", "skipped", r.Count("skipped"))
	if ran > 0 {
		fmt.Fprintf(w, "  pass rate of the specs run: %.1f %%\n", 100*float64(r.Count("passed"))/float64(ran))
	}
	reasons := map[string]int{}
	for _, o := range r.Specs {
		if o.State == "skipped" {
			reasons[o.Reason]++
		}
	}
	keys := make([]string, 0, len(reasons))
	for k := range reasons {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return reasons[keys[i]] > reasons[keys[j]] || reasons[keys[i]] == reasons[keys[j]] && keys[i] < keys[j]
	})
	if len(keys) > 0 {
		fmt.Fprintln(w, "skipped by reason:")
		for _, k := range keys {
			fmt.Fprintf(w, "  %4d  %s\n", reasons[k], k)
		}
	}
	if r.Count("failed") > 0 {
		fmt.Fprintln(w, "failed:")
		for _, o := range r.Specs {
			if o.State == "failed" {
				fmt.Fprintf(w, "  %s\n      %s\n", o.Name, o.Reason)
			}
		}
	}
	if len(r.Others) > 0 {
		passed := count(r.Others, "passed")
		fmt.Fprintf(w, "outside [NodeConformance], run by the focus or the suite: %d passed, %d failed\n", passed, len(r.Others)-passed)
		for _, o := range r.Others {
			if o.State == "failed" {
				fmt.Fprintf(w, "  %s\n      %s\n", o.Name, o.Reason)
			}
		}
	}
}
