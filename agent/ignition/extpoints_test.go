package ignition

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// cfgWith builds a 3.5.0 config from storage files (path: contents) and
// systemd units, in the order given.
func cfgWith(t *testing.T, files [][2]string, units []any) []byte {
	t.Helper()
	var fs []any
	for _, f := range files {
		fs = append(fs, map[string]any{"path": f[0], "contents": map[string]any{"source": "data:," + url.PathEscape(f[1])}})
	}
	cfg := map[string]any{"ignition": map[string]any{"version": "3.5.0"}}
	if fs != nil {
		cfg["storage"] = map[string]any{"files": fs}
	}
	if units != nil {
		cfg["systemd"] = map[string]any{"units": units}
	}
	data, err := json.Marshal(cfg)
	must(t, err)
	return data
}

// wantOne checks that Validate refuses data with exactly one problem, at
// at, whose message holds every one of words.
func wantOne(t *testing.T, name string, data []byte, at string, words ...string) {
	t.Helper()
	ps := Validate(data, Options{})
	if len(ps) != 1 || ps[0].Path != at {
		t.Errorf("%s: got %v, want one problem at %s", name, ps, at)
		return
	}
	for _, w := range words {
		if !strings.Contains(ps[0].Message, w) {
			t.Errorf("%s: %q does not say %q", name, ps[0].Message, w)
		}
	}
}

func wantNone(t *testing.T, name string, data []byte) {
	t.Helper()
	if ps := Validate(data, Options{}); len(ps) != 0 {
		t.Errorf("%s: refused: %v", name, ps)
	}
}

// TestNotExtensionPoints: the classes an outside review found the
// protected surface let through are refused by the allowlist, each with
// its JSON path and what to use instead.
func TestNotExtensionPoints(t *testing.T) {
	for _, tc := range []struct{ path, instead string }{
		{"/etc/ld.so.preload", "preloads nothing"},
		{"/etc/ld.so.cache", "image recipe"},
		{"/etc/ld.so.conf.d/x.conf", "image recipe"},
		{"/etc/systemd/system.conf", "Environment="},
		{"/etc/systemd/system.conf.d/10-env.conf", "Environment="},
		{"/etc/systemd/system.control/app.service", systemdDir},
		{"/etc/modprobe.d/x.conf", modulesLoadDir},
		{"/etc/udev/rules.d/99-x.rules", "image recipe"},
		{"/etc/profile.d/x.sh", "no login"},
		{"/etc/environment", "no login"},
		{"/etc/kubernetes/manifests/x.yaml", "node file"},
		{"/etc/crontab", "/var/lib/<app>"},
		{"/var/lib/containerd/x", "/var/lib/<app>"},
		{"/var/lib/systemd/linger/root", "/var/lib/<app>"},
		{"/var/log/journal/x", "/var/lib/<app>"},
		{"/var/spool/cron/crontabs/root", "/var/lib/<app>"},
	} {
		data := cfgWith(t, [][2]string{{nodeFileOK, "x"}, {tc.path, "x"}}, nil)
		wantOne(t, tc.path, data, "$.storage.files[1].path", fmt.Sprintf("%q is not an extension point of the node", tc.path), tc.instead)
	}
	for _, p := range []string{"/etc/opt/app/x", "/etc/containerd/certs.d/r.example/ca.crt", "/etc/cni/net.d/10-x.conflist",
		"/etc/systemd/journald.conf.d/50-size.conf", "/etc/systemd/timesyncd.conf.d/90-site.conf", "/etc/modules-load.d/x.conf",
		"/etc/hosts", "/var/lib/app/x", "/var/lib/kubelet/config.json", "/var/log/app/x", "/var/cache/app/x"} {
		wantNone(t, p, cfgWith(t, [][2]string{{p, "x"}}, nil))
	}
}

const nodeFileOK = "/etc/opt/placeholder" // an accepted first entry, so the refused one is files[1]

// TestLifecycleDependencies: every unit type and drop-in may order itself
// around the node's units but may name none in a lifecycle setting.
func TestLifecycleDependencies(t *testing.T) {
	// Listed here, not taken from lifecycleKeys, so that a key dropped
	// from the code fails this test.
	keys := []string{"Conflicts", "PartOf", "BindsTo", "Requisite", "OnSuccess", "OnFailure", "PropagatesStopTo",
		"StopPropagatedFrom", "PropagatesReloadTo", "ReloadPropagatedFrom", "JoinsNamespaceOf", "Upholds", "UpheldBy",
		"Unit", "Service", "Sockets", "Alias", "Also", "BindTo", "PropagateReloadTo", "PropagateReloadFrom", "RequisiteOverridable"}
	if len(keys) != len(lifecycleKeys) {
		t.Errorf("lifecycleKeys has %d keys, the test %d: add the new one here", len(lifecycleKeys), len(keys))
	}
	for _, k := range keys {
		for _, target := range []string{kubeletUnit, containerdUnit, "drover-agent.service", "drover-agent"} {
			text := "[Unit]\n" + k + "=other.service " + target + "\n"
			data := cfgWith(t, nil, []any{map[string]any{"name": "x.timer", "contents": text}})
			wantOne(t, k+" "+target, data, "$.systemd.units[0].contents", "x.timer may not name", "in "+k+"=")
		}
	}
	timer := "[Timer]\nOnCalendar=daily\nUnit=kubelet.service\n"
	wantOne(t, "a timer that starts the kubelet", cfgWith(t, nil, []any{map[string]any{"name": "t.timer", "contents": timer}}),
		"$.systemd.units[0].contents", "Unit=", "kubelet.service", "line 3")
	stop := "[Service]\nExecStart=/usr/bin/true\n[Unit]\nConflicts=containerd.service\n"
	wantOne(t, "a drop-in of another unit, as a file", cfgWith(t, [][2]string{{systemdDir + "/app.service.d/10.conf", stop}}, nil),
		"$.storage.files[0].contents", "app.service may not name containerd.service in Conflicts=")
	wantOne(t, "a drop-in of another unit", cfgWith(t, nil, []any{map[string]any{"name": "app.path",
		"dropins": []any{map[string]any{"name": "10.conf", "contents": "[Path]\nUnit=drover-agent.service\n"}}}}),
		"$.systemd.units[0].dropins[0].contents", "Unit=", "drover-agent.service")
	// Every setting that names a protected unit is named, each once
	// (readSettings reads each setting twice).
	many := "[Unit]\nConflicts=drover-agent.service\nPartOf=kubelet.service\nBindsTo=containerd.service kubelet.service\n"
	ps := Validate(cfgWith(t, nil, []any{map[string]any{"name": "m.service", "contents": many}}), Options{})
	var said []string
	for _, p := range ps {
		said = append(said, p.Message)
	}
	for _, w := range []string{"drover-agent.service in Conflicts= (line 2)", "kubelet.service in PartOf= (line 3)",
		"containerd.service in BindsTo= (line 4)", "kubelet.service in BindsTo= (line 4)"} {
		if n := strings.Count(strings.Join(said, "\n"), w); n != 1 {
			t.Errorf("%q said %d times in %q, want once", w, n, said)
		}
	}
	if len(ps) != 4 {
		t.Errorf("%d problems, want 4: %v", len(ps), said)
	}
	ordering := "[Unit]\nAfter=kubelet.service containerd.service\nBefore=drover-agent.service\nWants=kubelet.service\nRequires=containerd.service\n" +
		"[Service]\nExecStart=/usr/bin/true\n[Install]\nWantedBy=multi-user.target\n"
	wantNone(t, "ordering and pulling in", cfgWith(t, nil, []any{map[string]any{"name": "app.service", "contents": ordering}}))
	wantOne(t, "a unit file given remotely", []byte(`{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"`+systemdDir+
		`/app.timer","contents":{"source":"https://x.test/t","verification":{"hash":"sha256-`+strings.Repeat("0", 64)+`"}}}]}}`),
		"$.storage.files[0].contents", "must be given inline")
}

// TestProtectedDropinAllowlist: a drop-in of kubelet.service or
// containerd.service may set only the listed directives.
func TestProtectedDropinAllowlist(t *testing.T) {
	dropin := func(unit, text string) []byte {
		return cfgWith(t, nil, []any{map[string]any{"name": unit, "dropins": []any{map[string]any{"name": "10.conf", "contents": text}}}})
	}
	at := "$.systemd.units[0].dropins[0].contents"
	for _, tc := range []struct{ unit, text, word string }{
		{kubeletUnit, "[Service]\nExecStartPre=/bin/sh -c 'sed -i s/readOnlyPort:.0/readOnlyPort: 10255/ /etc/kubernetes/kubelet-config.yaml'\n", "ExecStartPre="},
		{kubeletUnit, "[Service]\nExecStartPost=/var/lib/x/run\n", "ExecStartPost="},
		{containerdUnit, "[Service]\nExecStop=/var/lib/x/run\n", "ExecStop="},
		{kubeletUnit, "[Service]\nEnvironment=LD_PRELOAD=/var/lib/x/x.so\n", "LD_PRELOAD"},
		{kubeletUnit, "[Service]\nEnvironment=GODEBUG=x509sha1=1\n", "GODEBUG"},
		{containerdUnit, "[Service]\nEnvironmentFile=/var/lib/x/env\n", "EnvironmentFile="},
		{kubeletUnit, "[Unit]\nWants=x.service\n", "Wants="},
		{kubeletUnit, "[Service]\nPrivateTmp=yes\n", "PrivateTmp="},
		{kubeletUnit, "[Service]\nBindPaths=/var/lib/x:/etc/kubernetes\n", "BindPaths="},
		{containerdUnit, "[Service]\nUser=nobody\n", "User="},
	} {
		wantOne(t, tc.unit+" "+tc.word, dropin(tc.unit, tc.text), at, "drop-in may not set", tc.word)
	}
	wantNone(t, "limits and a proxy", dropin(kubeletUnit, "[Unit]\nDescription=x\n[Service]\nMemoryMax=4G\nCPUQuota=200%\nTasksMax=8192\n"+
		"LimitNOFILE=1048576\nNice=-5\nOOMScoreAdjust=-900\nRestartSec=5\nEnvironment=\"HTTPS_PROXY=http://p.example:3128\" NO_PROXY=.svc,10.0.0.0/8\n"))
}

// TestSysctlSecuritySet: a sysctl.d file may set what workloads need but
// no key of the node's security set, however sysctl.d lets it be written.
func TestSysctlSecuritySet(t *testing.T) {
	const f = sysctlDir + "/90-app.conf"
	at := "$.storage.files[0].contents"
	for _, tc := range []struct{ text, key string }{
		{"kernel.unprivileged_bpf_disabled = 0\n", "kernel.unprivileged_bpf_disabled"},
		{"vm.max_map_count=262144\nkernel.kptr_restrict=0\n", "line 2 sets kernel.kptr_restrict"},
		{"kernel/yama/ptrace_scope = 0\n", "kernel.yama.ptrace_scope"},
		{"-kernel.core_pattern = |/var/lib/x/run %p\n", "kernel.core_pattern"},
		{"  ; a comment\n# another\nfs.protected_regular = 0\n", "line 3 sets fs.protected_regular"},
		{"fs.suid_dumpable=2\n", "fs.suid_dumpable"},
		{"net.ipv4.ip_forward = 0\n", "net.ipv4.ip_forward"},
		{"net/bridge/bridge-nf-call-iptables = 0\n", "net.bridge.bridge-nf-call-iptables"},
		{"vm.panic_on_oom = 1\n", "vm.panic_on_oom"},
		{"vm.overcommit_memory = 2\n", "vm.overcommit_memory"},
		{"kernel.panic_on_warn = 1\n", "kernel.panic_on_warn"},
		{"kernel.modprobe = /var/lib/x/modprobe\n", "kernel.modprobe"},
		{"kernel.kexec_load_disabled = 0\n", "kernel.kexec_load_disabled"},
		{"user.max_user_namespaces = 0\n", "user.max_user_namespaces"},
		{"kernel.* = 0\n", "kernel.*"},
		{"fs.protected_* = 0\n", "fs.protected_*"},
		{"fs.binfmt_misc.register = :x:M::MZ::/var/lib/x/run:\n", "fs.binfmt_misc.register"},
		// Two globs: neither matches the other ('*' stops at the '/' an
		// interface name's dot becomes), but their literal prefixes meet.
		{"fs/protected_a.b* = 0\n", "fs.protected_a/b*"},
	} {
		wantOne(t, tc.key, cfgWith(t, [][2]string{{f, tc.text}}, nil), at, f, tc.key, "node's security set")
	}
	wantNone(t, "workload settings", cfgWith(t, [][2]string{{f, "vm.max_map_count = 262144\nnet.core.somaxconn=4096\n" +
		"net.ipv4.conf.*.rp_filter = 0\nfs.inotify.max_user_watches=1048576\nkernel.pid_max = 4194304\n-net.ipv4.conf.all.accept_local = 1\n"}}, nil))
	wantOne(t, "an image file's name", cfgWith(t, [][2]string{{sysctlDir + "/99-protect-links.conf", "vm.max_map_count = 1\n"}}, nil),
		"$.storage.files[0].path", "replace the image's sysctl.d file")
	wantOne(t, "a link", []byte(`{"ignition":{"version":"3.5.0"},"storage":{"links":[{"path":"`+sysctlDir+`/50-x.conf","target":"/dev/null"}]}}`),
		"$.storage.links[0].path", "link in /etc/sysctl.d")
}

// TestExtensionPointDirectories: a directory entry may make sure an image
// directory at or above an extension point exists, but not change its
// mode or owner.
func TestExtensionPointDirectories(t *testing.T) {
	dirs := func(ds ...any) []byte {
		data, err := json.Marshal(map[string]any{"ignition": map[string]any{"version": "3.5.0"}, "storage": map[string]any{"directories": ds}})
		must(t, err)
		return data
	}
	for _, p := range []string{"/etc/cni", "/var/log", "/etc/opt"} {
		wantOne(t, p, dirs(map[string]any{"path": p, "mode": 0o777}), "$.storage.directories[0]", "changing the mode or owner of", p)
	}
	wantNone(t, "existence only", dirs(map[string]any{"path": "/etc/cni"}, map[string]any{"path": "/var/log"}, map[string]any{"path": "/var/lib/app", "mode": 0o700}))
	wantOne(t, "not above one", dirs(map[string]any{"path": "/etc/app"}), "$.storage.directories[0].path", "not an extension point of the node")
}

// TestExtensionPointLinks: a link may not replace the directory of an
// extension point, and a unit may not be a link to a file outside the unit
// directories, where the unit checks do not read it.
func TestExtensionPointLinks(t *testing.T) {
	links := func(ls ...any) []byte {
		data, err := json.Marshal(map[string]any{"ignition": map[string]any{"version": "3.5.0"}, "storage": map[string]any{"links": ls}})
		must(t, err)
		return data
	}
	wantOne(t, "a tree root", links(map[string]any{"path": "/etc/opt", "target": "/etc/ld.so.conf.d"}), "$.storage.links[0].path", "directory of an extension point a link")
	wantOne(t, "a linked unit", links(map[string]any{"path": systemdDir + "/app.timer", "target": "/etc/opt/app/app.timer"}),
		"$.storage.links[0].target", "a link in /etc/systemd/system may point only")
	wantNone(t, "masks, image units and aliases", links(map[string]any{"path": systemdDir + "/a.service", "target": "/dev/null"},
		map[string]any{"path": systemdDir + "/multi-user.target.wants/b.service", "target": "/usr/lib/systemd/system/b.service"},
		map[string]any{"path": systemdDir + "/c.service", "target": "a.service"}))
}
