package ignition

import (
	"strings"
	"testing"
)

// TestProtectedDirectoryOwners: a directory entry that sets a mode, a user
// or a group (by id or by name) is refused when the directory holds a
// protected path; one that sets none of them only makes sure it exists,
// and one at a protected path is refused once, as protected.
func TestProtectedDirectoryOwners(t *testing.T) {
	for _, tc := range []struct {
		name, cfg string
		want      []string
	}{
		{
			name: "owners and modes",
			cfg: `"storage": {"directories": [{"path": "/var/lib"}, {"path": "/etc/systemd", "user": {"id": 0}},
{"path": "/etc/systemd/system", "user": {"name": "root"}}, {"path": "/var/lib/kubelet", "group": {"id": 0}},
{"path": "/etc/kubernetes", "group": {"name": "root"}}, {"path": "/var/lib/app", "mode": 448, "user": {"id": 0}, "group": {"id": 0}}]}`,
			want: []string{
				`$.storage.directories[1]: changing the mode or owner of "/etc/systemd" is refused: it holds /etc/systemd/system/service.d, which is protected (drop-ins for every service, drover-agent's included) — leave mode, user and group unset`,
				`$.storage.directories[2]: changing the mode or owner of "/etc/systemd/system" is refused: it holds /etc/systemd/system/service.d, which is protected (drop-ins for every service, drover-agent's included) — leave mode, user and group unset`,
				`$.storage.directories[3]: changing the mode or owner of "/var/lib/kubelet" is refused: it holds /var/lib/kubelet/kubeconfig, which is protected (the kubelet's credentials, written by its TLS bootstrap) — leave mode, user and group unset`,
				`$.storage.directories[4]: changing the mode or owner of "/etc/kubernetes" is refused: it holds /etc/kubernetes/kubelet-config.yaml, which is protected (drover-agent renders it from the node file at every boot) — leave mode, user and group unset`,
			},
		},
		{
			name: "a protected directory with a mode",
			cfg:  `"storage": {"directories": [{"path": "/var/lib/drover", "mode": 448}, {"path": "/etc/security", "user": {"id": 0}}]}`,
			want: []string{
				`$.storage.directories[0].path: "/var/lib/drover" is protected: drover-agent's own state: the stored user-data and the pinned cluster CA it is checked against — use another path`,
				`$.storage.directories[1].path: "/etc/security" is protected: PAM's limits and access rules; accounts and login are fixed by the image (a drover node has no login) — add system users and their settings in the image recipe; reach the node with kubectl debug node/<name>`,
			},
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
