package smoke

import (
	"bytes"
	"encoding/xml"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/harness/timeline"
)

// junitSuite is the JUnit schema subset CI systems read.
type junitSuite struct {
	XMLName  xml.Name `xml:"testsuite"`
	Name     string   `xml:"name,attr"`
	Tests    int      `xml:"tests,attr"`
	Failures int      `xml:"failures,attr"`
	Cases    []struct {
		Name      string `xml:"name,attr"`
		ClassName string `xml:"classname,attr"`
		Time      string `xml:"time,attr"`
		Failure   *struct {
			Message string `xml:"message,attr"`
			Body    string `xml:",chardata"`
		} `xml:"failure"`
		Out string `xml:"system-out"`
	} `xml:"testcase"`
	Out string `xml:"system-out"`
}

func sampleReport() *Report {
	r := &Report{
		Timelines: map[string]timeline.Timeline{
			"second boot": {Events: []timeline.Event{{Name: "kernel", Uptime: 0}, {Name: "ready", Uptime: 71.5}}},
			"first boot":  {Events: []timeline.Event{{Name: "kernel", Uptime: 0}, {Name: "ready", Uptime: 95.25}}},
		},
		Logs: map[string]string{"first boot": "/w/vm-join/serial.log", "policy boot": "/w/vm-policy/serial.log"},
	}
	r.Checks = []Check{
		{Name: "node joins and is Ready", Passed: true, Detail: "metadata: hardened", Took: 95250 * time.Millisecond},
		{Name: "node hardening", Passed: false, Detail: `listens on tcp 0.0.0.0:22 (pid 812 sshd) & <"quoted">`, Took: 1500 * time.Millisecond},
	}
	return r
}

func TestJUnit(t *testing.T) {
	var buf bytes.Buffer
	if err := sampleReport().JUnit(&buf, "drover-smoke"); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(buf.String(), xml.Header) {
		t.Errorf("no XML header:\n%s", buf.String())
	}
	var s junitSuite
	if err := xml.Unmarshal(buf.Bytes(), &s); err != nil {
		t.Fatalf("the JUnit XML does not parse: %v\n%s", err, buf.String())
	}
	if s.Name != "drover-smoke" || s.Tests != 2 || s.Failures != 1 || len(s.Cases) != 2 {
		t.Fatalf("suite %q: %d tests, %d failures, %d cases; want drover-smoke, 2, 1, 2", s.Name, s.Tests, s.Failures, len(s.Cases))
	}
	pass, fail := s.Cases[0], s.Cases[1]
	if pass.Name != "node joins and is Ready" || pass.ClassName != "drover-smoke" || pass.Time != "95.250" || pass.Failure != nil {
		t.Errorf("passed case %+v", pass)
	}
	want := `listens on tcp 0.0.0.0:22 (pid 812 sshd) & <"quoted">`
	if fail.Failure == nil || fail.Failure.Message != want || fail.Failure.Body != want || fail.Time != "1.500" {
		t.Errorf("failed case %+v: want a failure carrying %q (escaped in the XML, intact when read)", fail, want)
	}
	// Timelines and serial logs in a stable (sorted) order.
	wantOut := "timeline (first boot), seconds since boot:\n" +
		"      0.00s  kernel\n     95.25s  ready\n" +
		"timeline (second boot), seconds since boot:\n" +
		"      0.00s  kernel\n     71.50s  ready\n" +
		"serial log (first boot): /w/vm-join/serial.log\n" +
		"serial log (policy boot): /w/vm-policy/serial.log\n"
	if s.Out != wantOut {
		t.Errorf("system-out:\n%s\nwant:\n%s", s.Out, wantOut)
	}
}

func TestJUnitAllPassedAndEmpty(t *testing.T) {
	r := &Report{}
	var buf bytes.Buffer
	if err := r.JUnit(&buf, "empty"); err != nil {
		t.Fatal(err)
	}
	var s junitSuite
	if err := xml.Unmarshal(buf.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	if s.Tests != 0 || s.Failures != 0 || len(s.Cases) != 0 {
		t.Errorf("empty report: %+v", s)
	}
}

type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.n += len(p); w.n > 64 {
		return 0, errors.New("disk full")
	}
	return len(p), nil
}

func TestJUnitWriteError(t *testing.T) {
	if err := sampleReport().JUnit(&failWriter{}, "drover-smoke"); err == nil {
		t.Error("a failing writer gave no error: a truncated JUnit file would look written")
	}
}

func TestReportAddAndFailed(t *testing.T) {
	r := &Report{}
	if !r.add("ok", time.Now(), nil, "detail") || r.add("bad", time.Now(), errors.New("boom"), "ignored") {
		t.Error("add returned the wrong pass/fail")
	}
	if r.Failed() != 1 || r.Checks[1].Detail != "boom" || r.Checks[0].Detail != "detail" {
		t.Errorf("checks %+v", r.Checks)
	}
}

func TestPrint(t *testing.T) {
	var buf bytes.Buffer
	sampleReport().Print(&buf)
	out := buf.String()
	for _, want := range []string{"PASS  node joins and is Ready", "FAIL  node hardening", "boot timeline (first boot)", "serial log (policy boot): /w/vm-policy/serial.log"} {
		if !strings.Contains(out, want) {
			t.Errorf("Print output lacks %q:\n%s", want, out)
		}
	}
}
