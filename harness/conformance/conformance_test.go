package conformance

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/drover-os/drover/harness/registry"
)

const listOut = `  k8s.io/kubernetes@v1.37.2/test/e2e/common/node/pods.go:10: [sig-node] Pods should get a host IP [Conformance] [NodeConformance]
  k8s.io/kubernetes@v1.37.2/test/e2e/common/node/pods.go:20: [sig-node] Pods should be slow [Slow] [NodeConformance]
  k8s.io/kubernetes@v1.37.2/test/e2e/common/node/pods.go:30: [sig-node] Pods should fail [NodeConformance]
  k8s.io/kubernetes@v1.37.2/test/e2e/common/node/pods.go:40: [sig-node] Pods should skip itself [NodeConformance]
  k8s.io/kubernetes@v1.37.2/test/e2e/common/node/pods.go:50: [sig-node] Pods outside the subset [NodeConformance]
  k8s.io/kubernetes@v1.37.2/test/e2e/apps/x.go:60: [sig-apps] not node conformance
`

const junitOut = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites><testsuite name="Kubernetes e2e suite">
<testcase name="[It] [sig-node] Pods should get a host IP [Conformance] [NodeConformance]" status="passed" time="3"></testcase>
<testcase name="[It] [sig-node] Pods should fail [NodeConformance]" status="failed" time="3"><failure message="expected 1, got 2&#xA;more" type="failed">trace</failure></testcase>
<testcase name="[It] [sig-node] Pods should skip itself [NodeConformance]" status="skipped" time="0"><skipped message="skipped - Only supported for providers [gce]"></skipped></testcase>
<testcase name="[SynchronizedBeforeSuite]" status="passed" time="0"></testcase>
<testcase name="[It] [sig-apps] not node conformance" status="failed" time="300"><failure message="pulling agnhost:2.55: not found" type="failed">trace</failure></testcase>
<testcase name="[It] [sig-apps] also not node conformance" status="passed" time="3"></testcase>
<testcase name="[It] [sig-apps] skipped, not node conformance" status="skipped" time="0"><skipped message=""></skipped></testcase>
<testcase name="[ReportAfterSuite] Kubernetes e2e suite report" status="failed" time="0"><failure message="writing the report: disk full" type="failed"></failure></testcase>
</testsuite></testsuites>`

// TestClassify: every [NodeConformance] spec of the list is judged once:
// run ones by the report, the plan's skips by their reason, the others by
// the narrowed focus or the suite's message; other specs that ran, and
// failed suite steps, are kept apart in Others.
func TestClassify(t *testing.T) {
	plan := Plan{Focus: `host IP|should fail|skip itself|be slow`}
	res, err := Classify(ParseList(listOut), strings.NewReader(junitOut), plan)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Outcome{}
	for _, o := range res.Specs {
		got[o.Name] = o
	}
	want := map[string][2]string{
		"[sig-node] Pods should get a host IP [Conformance] [NodeConformance]": {"passed", ""},
		"[sig-node] Pods should fail [NodeConformance]":                        {"failed", "expected 1, got 2"},
		"[sig-node] Pods should skip itself [NodeConformance]":                 {"skipped", "skipped by the suite: skipped - Only supported for providers [gce]"},
		"[sig-node] Pods should be slow [Slow] [NodeConformance]":              {"skipped", Skips[1].Reason},
		"[sig-node] Pods outside the subset [NodeConformance]":                 {"skipped", "outside this run's focus (CONFORMANCE_FOCUS=" + plan.Focus + ")"},
	}
	if len(got) != len(want) {
		t.Errorf("%d specs judged, want %d: %+v", len(got), len(want), res.Specs)
	}
	for name, w := range want {
		if o := got[name]; o.State != w[0] || o.Reason != w[1] {
			t.Errorf("%s: %s %q, want %s %q", name, o.State, o.Reason, w[0], w[1])
		}
	}
	wantOthers := []Outcome{
		{Name: "[sig-apps] not node conformance", State: "failed", Reason: "pulling agnhost:2.55: not found"},
		{Name: "[sig-apps] also not node conformance", State: "passed"},
		{Name: "[ReportAfterSuite] Kubernetes e2e suite report", State: "failed", Reason: "writing the report: disk full", Step: true},
	}
	if fmt.Sprint(res.Others) != fmt.Sprint(wantOthers) {
		t.Errorf("others:\n%+v\nwant\n%+v", res.Others, wantOthers)
	}
	var b bytes.Buffer
	res.Print(&b)
	for _, line := range []string{"passed      1", "failed      1", "skipped     3", "pass rate of the specs run: 50.0 %",
		"outside [NodeConformance], run by the focus or the suite: 1 passed, 2 failed\n  [sig-apps] not node conformance\n      pulling agnhost:2.55: not found\n  [ReportAfterSuite]"} {
		if !strings.Contains(b.String(), line) {
			t.Errorf("table lacks %q:\n%s", line, b.String())
		}
	}
	if _, err := Classify(nil, strings.NewReader("not xml"), plan); err == nil {
		t.Error("a damaged report was accepted")
	}
}

// TestVerdict: a run passes only when every spec it ran passed, every
// spec of its focus ran, no suite step failed, something ran and the
// suite exited 0; each failure is named with its count.
func TestVerdict(t *testing.T) {
	passed := Outcome{Name: "p", State: "passed"}
	for _, c := range []struct {
		name string
		r    Result
		want string // "" passes
	}{
		{"all passed", Result{Specs: []Outcome{passed, {Name: "s", State: "skipped", Reason: "[Slow]"}}}, ""},
		{"a focused spec outside [NodeConformance] passed", Result{Others: []Outcome{passed}}, ""},
		{"a [NodeConformance] spec and one outside it passed", Result{Specs: []Outcome{passed}, Others: []Outcome{passed}}, ""},
		{"a spec failed", Result{Specs: []Outcome{passed, {Name: "f", State: "failed"}, {Name: "g", State: "failed"}}}, "2 [NodeConformance] spec(s) failed"},
		{"the suite stopped", Result{Specs: []Outcome{passed, {Name: "n", State: "skipped", Reason: notRunReason}}}, "1 [NodeConformance] spec(s) of the focus did not run"},
		{"a focused other spec failed", Result{Others: []Outcome{{Name: "o", State: "failed"}}}, "1 other spec(s) or suite step(s) failed"},
		{"a suite step failed", Result{Specs: []Outcome{passed}, Others: []Outcome{{Name: "[SynchronizedBeforeSuite]", State: "failed", Step: true}}}, "1 other spec(s) or suite step(s) failed"},
		{"nothing ran", Result{Specs: []Outcome{{Name: "s", State: "skipped", Reason: "outside this run's focus"}}}, "the focus selected no spec that ran"},
		{"only a suite step ran", Result{Others: []Outcome{{Name: "[SynchronizedBeforeSuite]", State: "passed", Step: true}}}, "the focus selected no spec that ran"},
		{"the suite exited 1 with nothing failed", Result{Specs: []Outcome{passed}, SuiteErr: errors.New("exit status 1")}, "the suite exited with exit status 1 though its report shows no failure"},
	} {
		err := c.r.Verdict()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want a pass", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// TestPlanSelected: the specs a plan runs are those its focus matches
// and no skip does.
func TestPlanSelected(t *testing.T) {
	all := ParseList(listOut)
	for focus, want := range map[string]int{
		"":            4, // [NodeConformance] less the [Slow] one
		"host IP":     1,
		"be slow":     0, // only a [Slow] spec
		"nothing":     0,
		"conformance": 1, // the [sig-apps] spec, outside [NodeConformance]
	} {
		if got := (Plan{Focus: focus}).Selected(all); len(got) != want {
			t.Errorf("focus %q: %d specs %q, want %d", focus, len(got), got, want)
		}
	}
}

// TestPlanArgs: the default plan focuses [NodeConformance] and skips
// exactly the documented classes; a bad pattern is refused by name.
func TestPlanArgs(t *testing.T) {
	args := Plan{}.Args("/k", "/r")
	joined := strings.Join(args, "\n")
	for _, want := range []string{"--kubeconfig=/k", "--report-dir=/r", `--ginkgo.focus=\[NodeConformance\]`,
		`--ginkgo.skip=\[Serial\]|\[Slow\]|\[Flaky\]|\[Disruptive\]|\[Alpha\]|\[Feature:[^\]]+\]`} {
		if !strings.Contains(joined, want+"\n") {
			t.Errorf("args lack %s:\n%s", want, joined)
		}
	}
	if err := (Plan{Focus: "host IP"}).Validate(); err != nil {
		t.Errorf("a good focus with the documented skips: %v", err)
	}
	if err := (Plan{Focus: "("}).Validate(); err == nil || !strings.Contains(err.Error(), `focus "("`) {
		t.Errorf("bad focus: %v", err)
	}
}

// TestPlanGinkgoArgs: through the ginkgo CLI the same focus, skips and
// timeout are the CLI's own flags (a --ginkgo. prefix there is refused by
// it), the suite binary comes next, and the suite's flags after "--".
func TestPlanGinkgoArgs(t *testing.T) {
	got := strings.Join(Plan{Procs: 4}.GinkgoArgs("/w/e2e.test", "/k", "/r"), " ")
	want := `--procs=4 --focus=\[NodeConformance\] --skip=\[Serial\]|\[Slow\]|\[Flaky\]|\[Disruptive\]|\[Alpha\]|\[Feature:[^\]]+\] ` +
		`--timeout=3h0m0s --no-color /w/e2e.test -- --kubeconfig=/k --provider=skeleton --report-dir=/r --allowed-not-ready-nodes=0 --disable-log-dump`
	if got != want {
		t.Errorf("ginkgo args\n got %s\nwant %s", got, want)
	}
}

// TestRepoList: every registry the framework knows points at the harness
// registry (the keys are RegistryList's yaml tags in
// k8s.io/kubernetes/test/utils/image/manifest.go of v1.37.2).
func TestRepoList(t *testing.T) {
	var m map[string]string
	if err := yaml.UnmarshalStrict(RepoList("100.64.0.2:5000"), &m); err != nil {
		t.Fatal(err)
	}
	keys := []string{"promoterE2eRegistry", "buildImageRegistry", "invalidRegistry", "gcEtcdRegistry", "gcRegistry",
		"sigStorageRegistry", "privateRegistry", "dockerLibraryRegistry", "cloudProviderGcpRegistry"}
	if len(m) != len(keys) {
		t.Errorf("%d registries, want %d: %v", len(m), len(keys), m)
	}
	for _, k := range keys {
		if !strings.HasPrefix(m[k], "100.64.0.2:5000/") {
			t.Errorf("%s = %q, not on the harness registry", k, m[k])
		}
	}
}

// TestLayerDeterministic: entries in any order give the same bytes, in
// path order, root-owned and stamped with the epoch.
func TestLayerDeterministic(t *testing.T) {
	es := []entry{{path: "bin/sh", link: "/bin/busybox", mode: 0o777}, {path: "bin", dir: true, mode: 0o755},
		{path: "bin/busybox", mode: 0o755, data: []byte("elf")}}
	a, err := layerTar(es)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := layerTar([]entry{es[2], es[0], es[1]})
	if !bytes.Equal(a, b) {
		t.Error("layer depends on the order of entries")
	}
	tr := tar.NewReader(bytes.NewReader(a))
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || !h.ModTime.Equal(h.ModTime.UTC()) || h.ModTime.Unix() != 0 {
			t.Errorf("%s: uid %d mtime %v", h.Name, h.Uid, h.ModTime)
		}
		names = append(names, h.Name)
	}
	if strings.Join(names, " ") != "bin/ bin/busybox bin/sh" {
		t.Errorf("entries %v", names)
	}
	if _, err := layerTar([]entry{{path: "/abs"}}); err == nil {
		t.Error("an absolute path was accepted")
	}
}

// TestUnbuilt: manifests asked for outside the built images are listed
// once with the registry's answer, another tag of a built repository
// (agnhost's previous version) too; blobs, built tags and digests in a
// built repository are not; one answered other than 404 is an error
// naming it.
func TestUnbuilt(t *testing.T) {
	reqs := []registry.Request{
		{Method: "GET", Path: "/v2/e2e-test-images/agnhost/manifests/2.66.1", Status: 200},
		{Method: "GET", Path: "/v2/e2e-test-images/agnhost/manifests/sha256:0a", Status: 200},
		{Method: "HEAD", Path: "/v2/e2e-test-images/agnhost/manifests/2.55", Status: 404},
		{Method: "HEAD", Path: "/v2/e2e-test-images/nginx/manifests/1.27.0-2", Status: 404},
		{Method: "GET", Path: "/v2/e2e-test-images/nginx/manifests/1.27.0-2", Status: 404},
		{Method: "GET", Path: "/v2/invalid/alpine/manifests/3.1", Status: 404},
		{Method: "GET", Path: "/v2/e2e-test-images/agnhost/blobs/sha256:00", Status: 200},
		// the harness's own image: pushed (HEAD 404, PUT 201), then read
		{Method: "HEAD", Path: "/v2/drover/hello/manifests/v1", Status: 404},
		{Method: "PUT", Path: "/v2/drover/hello/manifests/v1", Status: 201},
		{Method: "PUT", Path: "/v2/drover/hello/manifests/sha256:0b", Status: 201},
		{Method: "GET", Path: "/v2/drover/hello/manifests/v1", Status: 200},
		{Method: "PUT", Path: "/v2/e2e-test-images/other/manifests/1", Status: 201},
	}
	built := []Image{{Repo: "e2e-test-images/agnhost", Tag: "2.66.1"}}
	got, err := Unbuilt(reqs, built, "drover/hello:v1")
	if err != nil || strings.Join(got, ", ") != "e2e-test-images/agnhost:2.55 404, e2e-test-images/nginx:1.27.0-2 404, invalid/alpine:3.1 404" {
		t.Errorf("Unbuilt = %v, %v", got, err)
	}
	reqs = append(reqs, registry.Request{Method: "GET", Path: "/v2/library/nginx/manifests/latest", Status: 200})
	if _, err := Unbuilt(reqs, built, "drover/hello:v1"); err == nil || !strings.Contains(err.Error(), "library/nginx:latest 200") {
		t.Errorf("an unbuilt image served: %v", err)
	}
}

// TestImageUser: the image config carries the user given (nonroot's 1234,
// which the runAsNonRoot specs read), and none when none is given; the
// setuid bit of nonewprivs' nnp survives into the layer.
func TestImageUser(t *testing.T) {
	es := []entry{{path: "usr/local/bin/nnp", mode: 0o4755, data: []byte("x")}}
	for _, user := range []string{"1234", ""} {
		img, err := imageOf("t", "amd64", es, nil, []string{"sh"}, user)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Config.User != user {
			t.Errorf("config user %q, want %q", cf.Config.User, user)
		}
	}
	data, err := layerTar(es)
	if err != nil {
		t.Fatal(err)
	}
	hdr, err := tar.NewReader(bytes.NewReader(data)).Next()
	if err != nil || hdr.Mode&0o4000 == 0 {
		t.Errorf("nnp's header %+v, %v: no setuid bit", hdr, err)
	}
}

// TestResultPrint: the table users read: totals, the pass rate of the specs
// run, the skip reasons by count (ties by name), every failure with its
// reason; none of the optional parts when there is nothing to show.
func TestResultPrint(t *testing.T) {
	r := &Result{Specs: []Outcome{
		{Name: "a", State: "passed"}, {Name: "b", State: "passed"}, {Name: "c", State: "passed"},
		{Name: "d", State: "failed", Reason: "timed out"},
		{Name: "e", State: "skipped", Reason: "[Slow]"}, {Name: "f", State: "skipped", Reason: "[Serial]"},
		{Name: "g", State: "skipped", Reason: "[Slow]"}, {Name: "h", State: "skipped", Reason: "[Alpha]"},
		// Four ties: a comparator that is not a strict order on the count
		// leaves them in map order, which two ties can hide.
		{Name: "i", State: "skipped", Reason: "[Disruptive]"}, {Name: "j", State: "skipped", Reason: "[Flaky]"},
	}}
	var b strings.Builder
	r.Print(&b)
	want := `node conformance ([NodeConformance] specs of the suite: 10)
  passed      3
  failed      1
  skipped     6
  pass rate of the specs run: 75.0 %
skipped by reason:
     2  [Slow]
     1  [Alpha]
     1  [Disruptive]
     1  [Flaky]
     1  [Serial]
failed:
  d
      timed out
`
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	(&Result{}).Print(&b)
	if want := "node conformance ([NodeConformance] specs of the suite: 0)\n  passed      0\n  failed      0\n  skipped     0\n"; b.String() != want {
		t.Errorf("empty table:\n%q\nwant\n%q", b.String(), want)
	}
}

// TestFirstLine: a failure's reason is its first line, trimmed, cut at 200
// bytes with an ellipsis.
func TestFirstLine(t *testing.T) {
	long := strings.Repeat("x", 201)
	for in, want := range map[string]string{
		"  one\ntwo": "one", "one": "one", strings.Repeat("y", 200): strings.Repeat("y", 200),
		long: strings.Repeat("x", 200) + "…", "\n\nfirst\nsecond": "first",
	} {
		if got := firstLine(in); got != want {
			t.Errorf("firstLine(%.20q) = %.30q, want %.30q", in, got, want)
		}
	}
}

// TestFailureLine: a failed case's reason is its failure's message, else
// the failure's text, else its error's message, else "failed" (ginkgo's
// JUnit holds a failure with a message; the others are JUnit's other forms).
func TestFailureLine(t *testing.T) {
	for in, want := range map[string]string{
		`<testcase><failure message="m1&#10;m2">text</failure></testcase>`:    "m1",
		`<testcase><failure message=" ">text1&#10;text2</failure></testcase>`: "text1",
		`<testcase><error message="e1&#10;e2"></error></testcase>`:            "e1",
		`<testcase status="failed"></testcase>`:                               "failed",
	} {
		var c junitCase
		if err := xml.Unmarshal([]byte(in), &c); err != nil {
			t.Fatal(err)
		}
		if got := failureLine(c); got != want {
			t.Errorf("failureLine(%s) = %q, want %q", in, got, want)
		}
	}
}

// TestRunNeedsSpecs: Run judges the report against the specs its caller
// listed; without them it refuses before running anything.
func TestRunNeedsSpecs(t *testing.T) {
	_, err := Run(context.Background(), Target{}, nil, Options{WorkDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "list them with ListSpecs") {
		t.Errorf("Run without Specs: %v", err)
	}
}
