package smoke

import (
	"encoding/xml"
	"fmt"
	"io"
	"sort"
	"strings"
)

// JUnit writes the report as JUnit XML for CI systems.
func (r *Report) JUnit(w io.Writer, suite string) error {
	type failure struct {
		Message string `xml:"message,attr"`
		Body    string `xml:",chardata"`
	}
	type tc struct {
		Name      string   `xml:"name,attr"`
		ClassName string   `xml:"classname,attr"`
		Time      string   `xml:"time,attr"`
		Failure   *failure `xml:"failure,omitempty"`
		Out       string   `xml:"system-out,omitempty"`
	}
	type ts struct {
		XMLName  xml.Name `xml:"testsuite"`
		Name     string   `xml:"name,attr"`
		Tests    int      `xml:"tests,attr"`
		Failures int      `xml:"failures,attr"`
		Cases    []tc     `xml:"testcase"`
		Out      string   `xml:"system-out,omitempty"`
	}
	s := ts{Name: suite, Tests: len(r.Checks), Failures: r.Failed()}
	for _, c := range r.Checks {
		t := tc{Name: c.Name, ClassName: suite, Time: fmt.Sprintf("%.3f", c.Took.Seconds()), Out: c.Detail}
		if !c.Passed {
			t.Failure = &failure{Message: c.Detail, Body: c.Detail}
		}
		s.Cases = append(s.Cases, t)
	}
	var out strings.Builder
	names := make([]string, 0, len(r.Timelines))
	for n := range r.Timelines {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&out, "timeline (%s), seconds since boot:\n", n)
		r.Timelines[n].Print(&out)
	}
	for _, n := range sortedKeys(r.Logs) {
		fmt.Fprintf(&out, "serial log (%s): %s\n", n, r.Logs[n])
	}
	s.Out = out.String()
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	return enc.Encode(s)
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Print writes a human summary: each check, then the timelines.
func (r *Report) Print(w io.Writer) {
	for _, c := range r.Checks {
		mark := "PASS"
		if !c.Passed {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "%s  %-62s %6.1fs  %s\n", mark, c.Name, c.Took.Seconds(), c.Detail)
	}
	names := make([]string, 0, len(r.Timelines))
	for n := range r.Timelines {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "boot timeline (%s), guest seconds since boot:\n", n)
		r.Timelines[n].Print(w)
	}
	for _, n := range sortedKeys(r.Logs) {
		fmt.Fprintf(w, "serial log (%s): %s\n", n, r.Logs[n])
	}
}
