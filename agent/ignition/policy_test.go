package ignition

import (
	"strings"
	"testing"
)

// refusals validates a 3.5.0 config made of the given top-level sections
// (without the braces) and returns its problems as "path: message" lines.
func refusals(t *testing.T, sections string) []string {
	t.Helper()
	cfg := `{"ignition": {"version": "3.5.0"}`
	if sections != "" {
		cfg += ", " + sections
	}
	return lines(Validate([]byte(cfg+"}"), Options{}))
}

// TestPolicyVerdicts: one config each, accepted (no problems) or refused
// with exactly the problems a user sees, each naming its JSON path.
func TestPolicyVerdicts(t *testing.T) {
	for _, tc := range []struct {
		name, cfg string
		want      []string
	}{
		{
			name: "an empty file in /var needs no contents",
			cfg:  `"storage": {"files": [{"path": "/var/lib/app/ready"}]}`,
		},
		{
			name: "appending to a /var file with its contents given",
			cfg:  `"storage": {"files": [{"path": "/var/lib/app/log", "contents": {"source": "data:,a"}, "append": [{"source": "data:,b"}]}]}`,
		},
		{
			name: "appending to an /etc file without contents",
			cfg:  `"storage": {"files": [{"path": "/etc/hosts", "append": [{"source": "data:,b"}]}]}`,
		},
		{
			name: "a file below another file, sorted last",
			cfg:  `"storage": {"files": [{"path": "/var/lib/a/b", "contents": {"source": "data:,b"}}, {"path": "/var/lib/a", "contents": {"source": "data:,a"}}]}`,
			want: []string{`$.storage.files[0].path: "/var/lib/a/b" lies below "/var/lib/a", which $.storage.files[1].path writes as a file or link — move one of them`},
		},
		{
			name: "every path below a file collides, not its sibling",
			cfg:  `"storage": {"files": [{"path": "/var/lib/a", "contents": {"source": "data:,a"}}, {"path": "/var/lib/a/c"}, {"path": "/var/lib/a/b/d"}, {"path": "/var/lib/ab"}]}`,
			want: []string{
				`$.storage.files[1].path: "/var/lib/a/c" lies below "/var/lib/a", which $.storage.files[0].path writes as a file or link — move one of them`,
				`$.storage.files[2].path: "/var/lib/a/b/d" lies below "/var/lib/a", which $.storage.files[0].path writes as a file or link — move one of them`,
			},
		},
		{
			name: "a file below a storage link is left to Ignition",
			cfg:  `"storage": {"links": [{"path": "/etc/app", "target": "/var/lib/x"}], "files": [{"path": "/etc/app/conf", "contents": {"source": "data:,x"}}]}`,
			want: []string{`$.storage.files[0]: file path includes link in config`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := refusals(t, tc.cfg)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
