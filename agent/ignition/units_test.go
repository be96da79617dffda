package ignition

import (
	"context"
	"strings"
	"testing"
)

// TestEnableLinks: enabling a unit writes the links systemctl enable
// would: one per WantedBy= and RequiredBy= target, an empty assignment
// resetting the list; multi-user.target only when neither is set (an
// [Install] look-alike section does not count); a template's [Install]
// for an instance the config enables without contents.
func TestEnableLinks(t *testing.T) {
	cfg := `{"ignition": {"version": "3.5.0"}, "systemd": {"units": [
{"name": "req.service", "enabled": true, "contents": "[Service]\nExecStart=/bin/true\n[Install]\nRequiredBy=kubelet.service\n"},
{"name": "reset.service", "enabled": true, "contents": "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=a.target\nWantedBy=\nWantedBy=b.target c.target\nRequiredBy=d.target\nRequiredBy=\n"},
{"name": "side.service", "enabled": true, "contents": "[Service]\nExecStart=/bin/true\n[X-Install]\nWantedBy=x.target\n"},
{"name": "tpl@.service", "contents": "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=t.target\n"},
{"name": "tpl@one.service", "enabled": true}
]}}`
	plan, err := Prepare(context.Background(), []byte(cfg), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range managedLines(plan.Managed) {
		if strings.HasPrefix(l, "symlink ") {
			got = append(got, l)
		}
	}
	want := []string{
		"symlink /etc/systemd/system/kubelet.service.requires/req.service -> /etc/systemd/system/req.service",
		"symlink /etc/systemd/system/b.target.wants/reset.service -> /etc/systemd/system/reset.service",
		"symlink /etc/systemd/system/c.target.wants/reset.service -> /etc/systemd/system/reset.service",
		"symlink /etc/systemd/system/multi-user.target.wants/side.service -> /etc/systemd/system/side.service",
		"symlink /etc/systemd/system/t.target.wants/tpl@one.service -> /etc/systemd/system/tpl@.service",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
