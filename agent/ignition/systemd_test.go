package ignition

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/coreos/ignition/v2/config/v3_5/types"
)

func TestSystemdLines(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"a", []string{"a"}},
		{"a\n", []string{"a"}},
		{"a\nb", []string{"a", "b"}},
		{"a\rb", []string{"a", "b"}},       // a lone CR ends a line
		{"a\r\nb", []string{"a", "b"}},     // CRLF is one ending
		{"a\n\rb", []string{"a", "b"}},     // so is LFCR
		{"a\n\nb", []string{"a", "", "b"}}, // a repeated kind is two
		{"a\r\rb", []string{"a", "", "b"}},
		{"a\r\n\r\nb", []string{"a", "", "b"}},
		{"a\x00b", []string{"a", "b"}},
		{"a\x00\nb", []string{"a", "", "b"}}, // after NUL a new line always starts
		{"\n", []string{""}},
	} {
		if got := systemdLines(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("systemdLines(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestUnitSettings(t *testing.T) {
	show := func(ss []unitSetting) string {
		var out []string
		for _, s := range ss {
			out = append(out, fmt.Sprintf("%d [%s] %s=%s", s.line, s.section, s.key, s.value))
		}
		return strings.Join(out, " | ")
	}
	for _, tc := range []struct{ in, want string }{
		{"[Service]\nExecStart=/x\n", "2 [Service] ExecStart=/x"},
		{"[Service]\rExecStart=\rExecStart=/x", "2 [Service] ExecStart= | 3 [Service] ExecStart=/x"},
		{"  [Service]  \n\t ExecStart = /x \r\n", "2 [Service] ExecStart=/x"},
		// A continuation joins lines, the backslash becoming a space; a
		// comment inside it is skipped and does not end it.
		{"[Service]\nEnvironment=A=1 \\\n# note\n  KUBELET_ARGS=x\n", "2 [Service] Environment=A=1    KUBELET_ARGS=x"},
		// An escaped backslash does not continue the line.
		{"[Service]\nEnvironment=A=\\\\\nExecStart=/x", "2 [Service] Environment=A=\\\\ | 3 [Service] ExecStart=/x"},
		// A continuation open at the end is parsed.
		{"[Service]\nExecStart=/x \\", "2 [Service] ExecStart=/x"},
		{"# ExecStart=/x\n; ExecStart=/y\n[Service]\n", ""},
		{"\uFEFF[Service]\nExecStart=/x", "2 [Service] ExecStart=/x"},
		{"ExecStart=/x\n[Broken\nA=b\n=c\nnoequals", "1 [] ExecStart=/x | 3 [] A=b"},
	} {
		if got := show(unitSettings(tc.in)); got != tc.want {
			t.Errorf("unitSettings(%q)\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
}

func TestForbiddenSetting(t *testing.T) {
	const bad = "--anonymous-auth=true --authorization-mode=AlwaysAllow --read-only-port=10255"
	for _, tc := range []struct{ unit, in, want string }{
		{kubeletUnit, "[Service]\nExecStart=\nExecStart=/usr/bin/kubelet " + bad, "ExecStart="},
		{kubeletUnit, "[Service]\rExecStart=/usr/bin/kubelet " + bad, "ExecStart="},
		{kubeletUnit, "[Service]\nEnvironmentFile=-/var/lib/x/env", "EnvironmentFile="},
		{kubeletUnit, "[Service]\nEnvironment=\"KUBELET_ARGS=" + bad + "\"", "KUBELET_ARGS (Environment=)"},
		{kubeletUnit, "[Service]\nEnvironment=GOGC=1 \\\n KUBELET_ARGS=" + bad, "KUBELET_ARGS (Environment=)"},
		{kubeletUnit, "[Service]\nEnvironment=\"KUBELET\\x5fARGS=" + bad + "\"", "KUBELET_ARGS (Environment=)"},
		{kubeletUnit, "[Service]\nEnvironment=KUBELET\"_\"ARGS=" + bad, "KUBELET_ARGS (Environment=)"},
		{kubeletUnit, "[Service]\nEnvironment=KUBELET\\137ARGS=" + bad, "KUBELET_ARGS (Environment=)"},
		{kubeletUnit, "[Service]\nUnsetEnvironment=KUBELET_ARGS", "KUBELET_ARGS (UnsetEnvironment=)"},
		{kubeletUnit, "[Service]\nBindReadOnlyPaths=/var/lib/x/c.yaml:/etc/kubernetes/kubelet-config.yaml", "BindReadOnlyPaths="},
		{kubeletUnit, "[Service]\nRootDirectory=/var/lib/x", "RootDirectory="},
		{kubeletUnit, "[Service]\nEnvironment=FOO=bar", "FOO (Environment=)"},
		{kubeletUnit, "[Service]\nEnvironment=KUBELET_EXTRA_ARGS=--v=2", "KUBELET_EXTRA_ARGS (Environment=)"},
		{kubeletUnit, "[Service]\nUnsetEnvironment=FOO", "UnsetEnvironment="},
		{kubeletUnit, "[Service]\n# ExecStart=/usr/bin/kubelet " + bad, ""},
		{kubeletUnit, "[Unit]\nAfter=network-online.target", "After="},
		{kubeletUnit, "[Service]\nExecStartPre=/bin/sh -c 'sed -i s/x/y/ /etc/kubernetes/kubelet-config.yaml'", "ExecStartPre="},
		{kubeletUnit, "[Service]\nEnvironment=\"HTTPS_PROXY=http://p:3128\" NO_PROXY=.svc\nMemoryMax=2G\n", ""},
		{kubeletUnit, "[Service]\nEnvironment=HTTPS_PROXY=http://p:3128 LD_PRELOAD=/var/lib/x.so", "LD_PRELOAD (Environment=)"},
		{kubeletUnit, "[Service]\nEnvironment=", "an empty Environment="},
		{kubeletUnit, "[Unit]\nMemoryMax=1G", "MemoryMax="},
		{containerdUnit, "[Service]\nExecStart=\nExecStart=/usr/bin/containerd --config /var/lib/x/config.toml", "ExecStart="},
		{containerdUnit, "[Service]\r\nEnvironmentFile=/var/lib/x/env", "EnvironmentFile="},
		{containerdUnit, "[Service]\nLimitNOFILE=1048576\nEnvironment=KUBELET_ARGS=x", "KUBELET_ARGS (Environment=)"},
		{containerdUnit, "[Service]\nLimitNOFILE=1048576\nNice=-5\n", ""},
		{"app.service", "[Service]\nExecStart=/x", ""},
	} {
		k, ok := forbiddenSetting(tc.unit, tc.in)
		if (ok && k.show != tc.want) || (!ok && tc.want != "") {
			t.Errorf("forbiddenSetting(%s, %q) = %q, %v; want %q", tc.unit, tc.in, k.show, ok, tc.want)
		}
	}
}

func TestDropinDirNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		want []string
	}{
		{"kubelet.service", []string{"kubelet.service.d", "service.d"}},
		{"drover-agent.service", []string{"drover-.service.d", "drover-agent.service.d", "service.d"}},
		{"foo-bar-baz.service", []string{"foo-.service.d", "foo-bar-.service.d", "foo-bar-baz.service.d", "service.d"}},
		{"foo-bar@x.service", []string{"foo-@.service.d", "foo-@x.service.d", "foo-bar@.service.d", "foo-bar@x.service.d", "service.d"}},
		{"foo-.service", []string{"foo-.service.d", "service.d"}},
		{"-foo.socket", []string{"-foo.socket.d", "socket.d"}},
		{"notaunit", nil},
	} {
		if got := dropinDirNames(tc.name); !slices.Equal(got, tc.want) {
			t.Errorf("dropinDirNames(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func link(p, target string) types.Link {
	return types.Link{Node: types.Node{Path: p}, LinkEmbedded1: types.LinkEmbedded1{Target: &target}}
}

func TestUnitAliases(t *testing.T) {
	links := []types.Link{
		link("/etc/systemd/system/kube.service", "/usr/lib/systemd/system/kubelet.service"),
		link("/etc/systemd/system.control/kl.service", "kubelet.service"),
		link("/etc/systemd/system/a.service", "b.service"),
		link("/etc/systemd/system/b.service", "/usr/lib/systemd/system/drover-agent.service"),
		link("/etc/systemd/system/masked.service", "/dev/null"),
		link("/etc/systemd/system/multi-user.target.wants/kubelet.service", "/usr/lib/systemd/system/kubelet.service"),
		link("/etc/opt/app/kubelet.service", "/usr/lib/systemd/system/kubelet.service"),
		link("/etc/systemd/system/kubelet.service", "/usr/lib/systemd/system/kubelet.service"), // self
		link("/etc/systemd/system/run.service", "/var/run/systemd/system/containerd.service"),
	}
	got := unitAliases(links, nodeResolver(links))
	want := map[string]string{"kube.service": kubeletUnit, "kl.service": kubeletUnit,
		"a.service": "drover-agent.service", "b.service": "drover-agent.service", "run.service": containerdUnit}
	if !maps.Equal(got, want) {
		t.Errorf("unitAliases = %v, want %v", got, want)
	}
	if got := unitNames(kubeletUnit, want); !slices.Equal(got, []string{kubeletUnit, "kl.service", "kube.service"}) {
		t.Errorf("unitNames = %q", got)
	}
}

func TestDropinOf(t *testing.T) {
	aliases := map[string]string{"kube-let.service": kubeletUnit, "agent.service": "drover-agent.service"}
	for _, tc := range []struct{ path, unit, name string }{
		{"/etc/systemd/system/kubelet.service.d/x.conf", kubeletUnit, "kubelet.service"},
		{"/etc/systemd/system.control/kubelet.service.d/x.conf", kubeletUnit, "kubelet.service"},
		{"/etc/systemd/system.attached/kubelet.service.d", kubeletUnit, "kubelet.service"},
		{"/run/systemd/generator.early/containerd.service.d/x.conf", containerdUnit, "containerd.service"},
		{"/etc/systemd/system/kube-.service.d/x.conf", kubeletUnit, "kube-.service"},
		{"/etc/systemd/system/agent.service.d/x.conf", "drover-agent.service", "agent.service"},
		{"/etc/systemd/system/service.d/x.conf", "", ""}, // guarded whole by the surface
		{"/etc/systemd/system/app.service.d/x.conf", "", ""},
		{"/etc/systemd/system/kubelet.service", "", ""},
		{"/etc/systemd/system-evil/kubelet.service.d/x.conf", "", ""},
		{"/etc/systemd/system/sub/kubelet.service.d/x.conf", "", ""},
	} {
		u, name, ok := dropinOf(tc.path, aliases)
		if u.name != tc.unit || name != tc.name || ok != (tc.unit != "") {
			t.Errorf("dropinOf(%q) = %q, %q, %v; want %q, %q", tc.path, u.name, name, ok, tc.unit, tc.name)
		}
	}
}

func TestResolver(t *testing.T) {
	r := nodeResolver([]types.Link{
		link("/etc/opt/app/state", "/var/lib/app"),
		link("/etc/opt/app/up", "../../../var/lib"),
		link("/etc/opt/app/loop", "/etc/opt/app/loop"),
	})
	for _, tc := range []struct{ in, want, parent string }{
		{"/var/run/systemd/system.control/x", "/run/systemd/system.control/x", ""},
		{"/var/lock/app", "/run/lock/app", ""},
		{"/var/run", "/run", "/var/run"},
		{"/var/run/..", "/", ""},
		{"/var/run/../etc/shadow", "/etc/shadow", ""},
		{"/etc-evil/x", "/etc-evil/x", ""},
		{"/variable/run/x", "/variable/run/x", ""},
		{"/var/runner/x", "/var/runner/x", ""},
		{"/etc/opt/app/state/../drover/config.ign", "/var/lib/drover/config.ign", ""},
		{"/etc/opt/app/up/drover", "/var/lib/drover", ""},
		{"/etc/resolv.conf", "/run/systemd/resolve/stub-resolv.conf", "/etc/resolv.conf"},
		{"/etc/opt/app/loop/x", "/etc/opt/app/loop/x", ""}, // a loop stops after 40 hops
	} {
		parent := tc.parent
		if parent == "" {
			parent = tc.want
		}
		if got := r.resolve(tc.in); got != tc.want {
			t.Errorf("resolve(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := r.resolveParent(tc.in); got != parent {
			t.Errorf("resolveParent(%q) = %q, want %q", tc.in, got, parent)
		}
	}
}

func TestTmpfilesEntries(t *testing.T) {
	in := "# comment\n\nf+ /var/lib/a 0644 root root - hello world\r" +
		"L \"/var/lib/with space\" - - - - /etc/opt/x\n" +
		"w /var/lib/b\\x2fc - - - - -\n" +
		"d /var/lib/d\n" +
		"?bad /x\n" +
		"f\n" +
		"f '/open\n"
	entries, errs := tmpfilesEntries(in)
	var got []string
	for _, e := range entries {
		got = append(got, fmt.Sprintf("%d %c %s %s %s %s %s %q", e.line, e.typ, e.path, e.mode, e.user, e.group, e.age, e.arg))
	}
	want := []string{
		`3 f /var/lib/a 0644 root root - "hello world"`,
		`4 L /var/lib/with space - - - - "/etc/opt/x"`,
		`5 w /var/lib/b/c - - - - ""`,
		`6 d /var/lib/d     ""`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("entries\n got %q\nwant %q", got, want)
	}
	if len(errs) != 3 {
		t.Errorf("errors: %v", errs)
	}
}

func TestExpandSpecifiers(t *testing.T) {
	for _, tc := range []struct{ in, want, unknown string }{
		{"%S/drover", "/var/lib/drover", ""},
		{"%t/systemd/system", "/run/systemd/system", ""},
		{"/var/lib/%H/x", "/var/lib/*/x", "%H"},
		{"/var/lib/%m%b", "/var/lib/**", "%m %b"},
		{"/var/lib/100%%", "/var/lib/100%", ""},
		{"/var/lib/%Z", "/var/lib/*", "%Z"},
	} {
		got, unknown, err := expandSpecifiers(tc.in)
		if err != nil || got != tc.want || strings.Join(unknown, " ") != tc.unknown {
			t.Errorf("expandSpecifiers(%q) = %q, %q, %v", tc.in, got, unknown, err)
		}
	}
	if _, _, err := expandSpecifiers("/x%"); err == nil {
		t.Error("a lone % at the end is accepted")
	}
}

// TestTmpfilesJudge: one line each, refused (with the protected path it
// names) or accepted.
func TestTmpfilesJudge(t *testing.T) {
	links := []types.Link{link("/etc/opt/app/state", "/var/lib/app"), link("/etc/systemd/system/kube.service", "kubelet.service")}
	r := nodeResolver(links)
	j := tmpfilesJudge{guard: tmpfilesGuard(unitAliases(links, r)), links: r}
	for _, tc := range []struct{ line, names string }{
		{"f /var/lib/kubelet/pki/kubelet-client-current.pem 0600 - - - x", "/var/lib/kubelet/pki"},
		{"L /var/lib/x/shadow - - - - /etc/shadow", "/etc/shadow"},
		{"L /var/lib/x/shadow - - - - ../../../etc/shadow", "/etc/shadow"},
		{"C /var/lib/x/pki - - - - /var/lib/kubelet/pki", "/var/lib/kubelet/pki"},
		{"w /var/lib/drover/config.sha256 - - - - 0", "/var/lib/drover"},
		{"f %S/drover/config.ign - - - - {}", "/var/lib/drover"},
		{"f /var/lib/%H/x - - - - y", "/var/lib/drover"},
		{"r /var/lib/d*r/config.ign", "/var/lib/drover"},
		{"r /var/r?n/systemd/system/kubelet.service.d/x.conf", "/run/systemd/system/kubelet.service.d"},
		{"f /var/run/systemd/system.control/kubelet.service - - - - x", "/run/systemd/system.control/kubelet.service"},
		{"f /run/systemd/transient/drover-agent.service - - - - x", "/run/systemd/transient/drover-agent.service"},
		{"f /run/systemd/generator.late/containerd.service.d/x.conf - - - - x", "/run/systemd/generator.late/containerd.service.d"},
		{"f /run/systemd/system.attached/service.d/x.conf - - - - x", "/run/systemd/system.attached/service.d"},
		{"f /etc/systemd/system/kube.service.d/x.conf - - - - x", "/etc/systemd/system/kube.service.d"},
		{"f /etc/tmpfiles.d/more.conf - - - - x", "/etc/tmpfiles.d"},
		{"f /etc/sysusers.d/x.conf - - - - u x", "/etc/sysusers.d"},
		{"f /etc/opt/app/state/../drover/config.ign - - - - x", "/var/lib/drover"},
		{"R /var/lib", "/var/lib/drover"},
		{"Z / 0777", "/etc/passwd"},
		{"d /var/lib/kubelet 0777 - - -", "/var/lib/kubelet"},
		{"d /var/lib/kubelet - - - 1d", "/var/lib/kubelet"},
		{"L+ /etc/kubernetes - - - - /var/lib/x", "/etc/kubernetes"},
		{"d /var/lib/myapp 0755 root root -", ""},
		{"f /var/lib/drover-evil/x - - - - y", ""},
		{"f /variable/lib/drover/config.ign - - - - y", "not a place tmpfiles.d lines may act on"},
		{"f /etc-evil/shadow - - - - y", "not a place tmpfiles.d lines may act on"},
		{"w /proc/sys/kernel/kptr_restrict - - - - 0", "not a place tmpfiles.d lines may act on"},
		{"f /etc/sysctl.d/90-x.conf - - - - kernel.kptr_restrict=0", "not a place tmpfiles.d lines may act on"},
		{"f /etc/systemd/system/x.timer - - - - [Timer]\\nUnit=kubelet.service", "not a place tmpfiles.d lines may act on"},
		{"f /run/systemd/system.conf.d/x.conf - - - - [Manager]", "not a place tmpfiles.d lines may act on"},
		{"f /var/lib/containerd/x - - - - y", "not a place tmpfiles.d lines may act on"},
		{"d /var/log/j* 0777 - - -", "not a place tmpfiles.d lines may act on"},
		{"f /var/lib/myapp/%H.conf - - - - y", ""},
		{"d /tmp/app 1777 - - -", ""},
		{"d /etc/opt/app/conf.d 0755 - - -", ""},
		{"d /var/lib - - - -", ""},
		{"x /var/lib/kubelet", ""},
		{"L /var/lib/myapp/link - - - - ../myapp/data", ""},
		{"f /run/app/%H.conf - - - - y", "not a place tmpfiles.d lines may act on"},
		{"f relative - - - - y", ""},
	} {
		entries, errs := tmpfilesEntries(tc.line)
		if len(entries) != 1 || len(errs) != 0 {
			t.Fatalf("%q: %v", tc.line, errs)
		}
		got := j.problem(entries[0])
		switch {
		case tc.names == "" && got != "":
			t.Errorf("%q refused: %s", tc.line, got)
		case tc.names != "" && !strings.Contains(got, tc.names):
			t.Errorf("%q: %q does not name %s", tc.line, got, tc.names)
		}
	}
}

// TestUnitSurface: the static surface follows every unit search directory
// and the other root-read directories, and no lexical sibling of a
// protected path is taken for it.
func TestUnitSurface(t *testing.T) {
	s := surface(protectedSurface())
	for _, p := range []string{
		"/etc/systemd/system.control/kubelet.service",
		"/etc/systemd/system.attached/kubelet.service",
		"/etc/systemd/system.control/containerd.service",
		"/etc/systemd/system/containerd.service",
		"/run/systemd/system/kubelet.service",
		"/run/systemd/generator.early/kubelet.service.d/x.conf",
		"/run/systemd/transient/containerd.service.d/x.conf",
		"/etc/systemd/system.control/drover-agent.service",
		"/etc/systemd/system.attached/drover-agent.service.d/x.conf",
		"/etc/systemd/system.attached/drover-.service.d/x.conf",
		"/etc/systemd/system.control/service.d/x.conf",
		"/run/systemd/system.control/drover-agent.service.d/x.conf",
		"/etc/sysusers.d/x.conf",
		"/run/tmpfiles.d/x.conf",
		"/etc/systemd/system-generators/x",
		"/etc/systemd/system-environment-generators/x",
	} {
		if _, ok := s.covering(p); !ok {
			t.Errorf("%s is not protected", p)
		}
	}
	for _, p := range []string{
		"/etc/systemd/system.control/app.service",
		"/etc/systemd/system.control/kubelet.service.d/x.conf", // read by checkDropins
		"/etc/systemd/system/kubelet.service.d/x.conf",
		"/etc/systemd/system.attached/containerd.service.d/x.conf",
		"/etc/tmpfiles.d/x.conf", // read by checkTmpfiles
		"/etc-evil/shadow",
		"/etc/shadow-evil",
		"/variable/lib/drover/x",
		"/var/lib/drover-evil/x",
		"/var/lib/kubelet/pki-evil/x",
		"/etc/systemd/system.controlx/kubelet.service",
	} {
		if g, ok := s.covering(p); ok {
			t.Errorf("%s is taken for %s", p, g.pattern)
		}
	}
}

// TestTmpfilesBudget: a config cannot make the policy match millions of
// tmpfiles.d lines against the surface.
func TestTmpfilesBudget(t *testing.T) {
	body := strings.Repeat("d%20/var/lib/app/x%0A", maxTmpfilesLines+1)
	cfg := `{"ignition": {"version": "3.5.0"}, "storage": {"files": [{"path": "/etc/tmpfiles.d/big.conf", "contents": {"source": "data:,` + body + `"}}]}}`
	ps := lines(Validate([]byte(cfg), Options{}))
	if len(ps) != 1 || !strings.Contains(ps[0], "more than 4096 lines") {
		t.Errorf("got %q", ps)
	}
	body = strings.Repeat("d%20/var/lib/app/x%0A", maxTmpfilesLines)
	cfg = `{"ignition": {"version": "3.5.0"}, "storage": {"files": [{"path": "/etc/tmpfiles.d/big.conf", "contents": {"source": "data:,` + body + `"}}]}}`
	if ps := lines(Validate([]byte(cfg), Options{})); len(ps) != 0 {
		t.Errorf("got %q", ps)
	}
}
