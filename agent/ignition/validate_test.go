package ignition

import (
	"strings"
	"testing"
)

// TestExtraProblemsLast: problems of the Extra hook have no place in the
// document, so they follow every problem that has one, whatever their
// address.
func TestExtraProblemsLast(t *testing.T) {
	cfg := []byte(`{"ignition": {"version": "3.5.0"},
"kernelArguments": {"shouldExist": ["quiet"]},
"storage": {"files": [{"path": "/etc/drover/node.yaml", "contents": {"source": "data:,cluster:%20x"}}]}}`)
	var seen map[string][]byte
	extra := func(files map[string][]byte) []Problem {
		seen = files
		return []Problem{{Path: "/etc/drover/node.yaml:1", Message: "cluster: unknown"}}
	}
	got := lines(Validate(cfg, Options{Extra: extra}))
	want := []string{
		"$.kernelArguments.shouldExist[0]: " + msgKernelArgs,
		"/etc/drover/node.yaml:1: cluster: unknown",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if string(seen["/etc/drover/node.yaml"]) != "cluster: x" {
		t.Errorf("Extra saw %q", seen)
	}
}
