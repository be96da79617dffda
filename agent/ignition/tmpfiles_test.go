package ignition

import (
	"strings"
	"testing"

	"github.com/coreos/ignition/v2/config/v3_5/types"
)

// TestTmpfilesEscapes: a path is read with systemd-tmpfiles' C escapes, so
// the policy judges the path systemd-tmpfiles acts on; a line cut short by
// a final backslash does not read.
func TestTmpfilesEscapes(t *testing.T) {
	for _, tc := range []struct{ line, path string }{
		{`f /var/lib/a\tb`, "/var/lib/a\tb"},
		{`f /var/lib/a\\b`, `/var/lib/a\b`},
		{`f /var/lib/a\sb`, "/var/lib/a b"},
		{`f /var/lib/\144rover/x`, "/var/lib/drover/x"},
		{`f /var/lib/\u0064rover/x`, "/var/lib/drover/x"},
		{`f "/var/lib/a b"/c`, "/var/lib/a b/c"},
		{`f /var/lib/caf\u00e9`, "/var/lib/caf\u00e9"},
	} {
		entries, errs := tmpfilesEntries(tc.line)
		if len(errs) != 0 || len(entries) != 1 || entries[0].path != tc.path {
			t.Errorf("%q: %+v %v, want path %q", tc.line, entries, errs, tc.path)
		}
	}
	for _, line := range []string{`f /var/lib/x\`, `f /var/lib/x - - - -\`} {
		entries, errs := tmpfilesEntries(line)
		if len(entries) != 0 || len(errs) != 1 || !strings.Contains(errs[0].Error(), "a backslash ends the line") {
			t.Errorf("%q: %+v %v", line, entries, errs)
		}
	}
}

// TestTmpfilesHolding: a line may name a directory that holds a protected
// path only to make sure it exists (d, v, q, Q, e with every field "-" or
// absent) or to exclude it from cleaning (x, X).
func TestTmpfilesHolding(t *testing.T) {
	j := tmpfilesJudge{guard: tmpfilesGuard(nil), links: nodeResolver(nil)}
	for _, tc := range []struct {
		line    string
		refused bool
	}{
		{"d /var/lib", false},
		{"d /var/lib - - - -", false},
		{"v /var/lib -", false},
		{"q /var/lib", false},
		{"Q /var/lib", false},
		{"e /var/lib", false},
		{"x /var/lib", false},
		{"X /var/lib - - - 1d", false},
		{"d /var/lib 0755", true},
		{"d /var/lib - root", true},
		{"q /var/lib - - app", true},
		{"e /var/lib - - - 1d", true},
		{"z /var/lib", true},
		{"a /var/lib", true},
	} {
		entries, errs := tmpfilesEntries(tc.line)
		if len(entries) != 1 || len(errs) != 0 {
			t.Fatalf("%q: %v", tc.line, errs)
		}
		got := j.problem(entries[0])
		if refused := got != ""; refused != tc.refused {
			t.Errorf("%q: refused %v (%q), want %v", tc.line, refused, got, tc.refused)
		}
		if tc.refused && !strings.Contains(got, "a directory that holds") {
			t.Errorf("%q: %q does not say what it holds", tc.line, got)
		}
	}
}

// TestTmpfilesGlobThroughLink: a wildcard that can match a link the
// config makes is judged where the link leads, also when the wildcard is
// the last component.
func TestTmpfilesGlobThroughLink(t *testing.T) {
	links := []types.Link{link("/etc/opt/app/st", "/var/lib/drover")}
	j := tmpfilesJudge{guard: tmpfilesGuard(nil), links: nodeResolver(links)}
	for _, tc := range []struct{ line, want string }{
		{"R /etc/opt/app/s?", `line 1 (R /etc/opt/app/s?): it would act on "/etc/opt/app/s?" ("/var/lib/drover" on the node); /var/lib/drover is protected`},
		{"r /etc/opt/app/s*/config.ign", `line 1 (r /etc/opt/app/s*/config.ign): it would act on "/etc/opt/app/s*/config.ign" ("/var/lib/drover/config.ign" on the node); /var/lib/drover is protected`},
		{"R /etc/opt/app/x?", ""},
	} {
		entries, _ := tmpfilesEntries(tc.line)
		got := j.problem(entries[0])
		if (tc.want == "") != (got == "") || !strings.HasPrefix(got, tc.want) {
			t.Errorf("%q: got %q, want %q…", tc.line, got, tc.want)
		}
	}
}

// TestTmpfilesBudgetCountsUnreadableLines: a line that does not read costs
// the budget as a line that does, so errors cannot pad a config past it.
func TestTmpfilesBudgetCountsUnreadableLines(t *testing.T) {
	body := strings.Repeat("d%20/var/lib/app/x%0A", maxTmpfilesLines-1) + "?bad%20/x%0A"
	cfg := `{"ignition": {"version": "3.5.0"}, "storage": {"files": [{"path": "/etc/tmpfiles.d/big.conf", "contents": {"source": "data:,` + body + `"}}]}}`
	ps := lines(Validate([]byte(cfg), Options{}))
	if len(ps) != 1 || !strings.Contains(ps[0], `unknown type "?bad"`) {
		t.Errorf("at the budget: got %q", ps)
	}
	body += "?bad%20/y%0A"
	cfg = `{"ignition": {"version": "3.5.0"}, "storage": {"files": [{"path": "/etc/tmpfiles.d/big.conf", "contents": {"source": "data:,` + body + `"}}]}}`
	ps = lines(Validate([]byte(cfg), Options{}))
	if len(ps) != 1 || !strings.Contains(ps[0], "more than 4096 lines") {
		t.Errorf("one past the budget: got %q", ps)
	}
}
