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

const zeroHash = "sha256-0000000000000000000000000000000000000000000000000000000000000000"

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
			cfg:  `"storage": {"links": [{"path": "/etc/opt/app", "target": "/var/lib/x"}], "files": [{"path": "/etc/opt/app/conf", "contents": {"source": "data:,x"}}]}`,
			want: []string{`$.storage.files[0]: file path includes link in config`},
		},
		{
			name: "a remote drop-in of a checked unit names what it is checked for",
			cfg: `"storage": {"files": [{"path": "/etc/systemd/system/containerd.service.d/x.conf", "contents": {"source": "https://x.test/c", "verification": {"hash": "` + zeroHash + `"}}},
{"path": "/etc/systemd/system/kubelet.service.d/x.conf", "contents": {"source": "https://x.test/k", "verification": {"hash": "` + zeroHash + `"}}}]}`,
			want: []string{
				`$.storage.files[0].contents: a containerd.service drop-in must be given inline (a data: URL or systemd.units dropins), so that it can be checked against the directives its drop-ins may set (docs/node-config.md) — inline it`,
				`$.storage.files[1].contents: a kubelet.service drop-in must be given inline (a data: URL or systemd.units dropins), so that it can be checked against the directives its drop-ins may set (docs/node-config.md) — inline it`,
			},
		},
		{
			name: "a tmpfiles.d link may mask an image file with /dev/null only",
			cfg:  `"storage": {"links": [{"path": "/etc/tmpfiles.d/img.conf", "target": "/dev/null"}, {"path": "/etc/tmpfiles.d/x.conf", "target": "/dev/zero"}]}`,
			want: []string{
				`$.storage.links[1].target: "/dev/zero": a tmpfiles.d link must point to /dev/null (to mask a file) or to a file the config writes inline, so that its lines can be checked — write the file in /etc/tmpfiles.d`,
				`$.storage.links[1].target: symbolic link target "/dev/zero" is outside /etc and /var; through it, whatever writes /etc/tmpfiles.d/x.conf would write to /dev/zero — link to a file under /etc, /var or the read-only /usr, or write the file itself`,
			},
		},
		{
			name: "/etc/tmpfiles.d itself may not be a link",
			cfg:  `"storage": {"links": [{"path": "/etc/tmpfiles.d", "target": "/var/lib/t"}]}`,
			want: []string{`$.storage.links[0].path: "/etc/tmpfiles.d" would make /etc/tmpfiles.d a link; the tmpfiles.d files behind it could not be checked — give tmpfiles.d files in /etc/tmpfiles.d`},
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
