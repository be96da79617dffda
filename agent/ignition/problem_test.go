package ignition

import (
	"fmt"
	"strings"
	"testing"
)

// TestSortProblems: located problems come first in document order (the
// document's first byte included), ties broken by path and then message;
// problems without a place follow, by path and message.
func TestSortProblems(t *testing.T) {
	ps := []Problem{
		{Path: "x.conf:2", Message: "b", offset: -1},
		{Path: "$.b", Message: "m", offset: 7},
		{Path: "x.conf:1", Message: "a", offset: -1},
		{Path: "$.a", Message: "z", offset: 7},
		{Path: "$.a", Message: "y", offset: 7},
		{Path: "$", Message: "root", offset: 0},
		{Path: "x.conf:1", Message: "0", offset: -1},
		{Path: "$.c", Message: "m", offset: 3},
	}
	sortProblems(ps)
	want := []string{"$: root", "$.c: m", "$.a: y", "$.a: z", "$.b: m", "x.conf:1: 0", "x.conf:1: a", "x.conf:2: b"}
	if got := lines(ps); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, pair := range [][2]Problem{
		{{Path: "$", Message: "m", offset: 0}, {Path: "$", Message: "m", offset: -1}},
		{{Path: "$", Message: "m", offset: -1}, {Path: "$", Message: "m", offset: 0}},
	} {
		ps := pair[:]
		sortProblems(ps)
		if ps[0].offset != 0 {
			t.Errorf("the problem at offset 0 sorts after one with no place: %+v", ps)
		}
	}
}

// TestProblemLines: every problem carries the line and column of its
// value, across lines, for type errors as for the policy.
func TestProblemLines(t *testing.T) {
	cfg := "{\"ignition\": {\"version\": \"3.5.0\"},\n" +
		"\"storage\": {\"files\": [\n" +
		"  {\"path\": \"/usr/a\"},\n" +
		"\t{\"path\": \"/etc/opt/b\", \"mode\": \"x\"}]}}"
	var got []string
	for _, p := range Validate([]byte(cfg), Options{}) {
		got = append(got, fmt.Sprintf("%s %d:%d", p.Path, p.Line, p.Column))
	}
	want := []string{"$.storage.files[1].mode 4:33"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("type error: got %q, want %q", got, want)
	}
	cfg = strings.Replace(cfg, `"x"`, "420", 1)
	got = nil
	for _, p := range Validate([]byte(cfg), Options{}) {
		got = append(got, fmt.Sprintf("%s %d:%d", p.Path, p.Line, p.Column))
	}
	want = []string{"$.storage.files[0].path 3:12"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("policy: got %q, want %q", got, want)
	}
}
