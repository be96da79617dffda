package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-os/drover/agent/ignition"
	"github.com/drover-os/drover/agent/nodeconfig"
	"github.com/drover-os/drover/agent/status"
	"github.com/drover-os/drover/internal/atomicfile"
)

// TestCheckDriftModesOwnersLinks: besides contents, the guard sees a
// changed mode, owner and group, a retargeted symlink, a hard link that
// became its own file and a file replaced by a link.
func TestCheckDriftModesOwnersLinks(t *testing.T) {
	root := t.TempDir()
	write := func(p, data string, mode os.FileMode) {
		must(t, os.MkdirAll(filepath.Dir(root+p), 0o755))
		must(t, os.WriteFile(root+p, []byte(data), mode))
		must(t, os.Chmod(root+p, mode))
	}
	write("/etc/a", "a", 0o644)
	write("/etc/b", "b", 0o600)
	write("/etc/c", "c", 0o644)
	write("/etc/e", "e", 0o644)
	must(t, os.Symlink("/etc/a", root+"/etc/link"))
	must(t, os.Link(root+"/etc/c", root+"/etc/hard"))
	var w watchList
	for _, m := range []ignition.Managed{
		{Path: "/etc/a", Kind: "file", SHA256: digest([]byte("a"))},
		{Path: "/etc/b", Kind: "file", SHA256: digest([]byte("b"))},
		{Path: "/etc/c", Kind: "file", SHA256: digest([]byte("c"))},
		{Path: "/etc/e", Kind: "file", SHA256: digest([]byte("e"))},
		{Path: "/etc/link", Kind: "symlink", Target: "/etc/a"},
		{Path: "/etc/hard", Kind: "hardlink", Target: "/etc/c"},
	} {
		w.add(root, m, "user-data")
	}
	if d := CheckDrift(root, w.list()); len(d) != 0 {
		t.Fatalf("drift before any change: %v", d)
	}
	must(t, os.Chmod(root+"/etc/b", 0o644))
	must(t, os.Remove(root+"/etc/link"))
	must(t, os.Symlink("/etc/b", root+"/etc/link"))
	must(t, os.Remove(root+"/etc/hard"))
	write("/etc/hard", "c", 0o644) // same contents, no longer the same file
	must(t, os.Remove(root+"/etc/e"))
	must(t, os.Symlink("/etc/a", root+"/etc/e"))
	list := w.list()
	list[0].UID, list[0].GID = 4242, 4343 // as if the agent had chowned it
	var got []string
	for _, d := range CheckDrift(root, list) {
		got = append(got, d.String())
	}
	uid, gid := os.Getuid(), os.Getgid()
	want := []string{
		"/etc/a owner (want 4242:4343, got " + itoa(uid) + ":" + itoa(gid) + ")",
		"/etc/b mode (want 0600, got 0644)",
		"/etc/e type (want file, got symlink)",
		"/etc/hard link (want same file as /etc/c, got a different file)",
		"/etc/link link (want -> /etc/a, got -> /etc/b)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("drift\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestGuardRetriesReportsOnceAndClears: a report the API server refuses is
// retried until accepted; each change gives one Event and one condition;
// restoring the contents sets the condition back to False. Agent-rendered
// files are watched too.
func TestGuardRetriesReportsOnceAndClears(t *testing.T) {
	r := newRig(t, userData(t, "hello"))
	a := r.agent()
	if err := a.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A refusal the status already holds stays through drift and restore.
	const refused = "user-data refused: configuration is immutable; replace the instance"
	a.rec.SetState("joined", refused)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Guard(ctx, 20*time.Millisecond); close(done) }()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for end := time.Now().Add(10 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(end) {
				cancel()
				t.Fatalf("%s: conditions %+v events %v\n%s", what, r.api.conds, r.api.events, strings.Join(r.log, "\n"))
			}
		}
	}
	snapshot := func() (conds []string, events int) {
		r.api.mu.Lock()
		defer r.api.mu.Unlock()
		for _, c := range r.api.conds {
			conds = append(conds, c.Status)
		}
		return conds, len(r.api.events)
	}
	waitFor("the initial False condition", func() bool { c, _ := snapshot(); return slices.Equal(c, []string{"False"}) })

	// An agent-rendered file, while the API server refuses three requests.
	p := filepath.Join(r.root, nodeconfig.KubeletDefaultsPath)
	orig, err := os.ReadFile(p)
	must(t, err)
	r.api.mu.Lock()
	r.api.refuse = 3
	r.api.mu.Unlock()
	// Each edit is one rename: a guard round between os.WriteFile's
	// truncate and its write would see a second change (empty contents).
	must(t, atomicfile.Write(p, append(append([]byte(nil), orig...), "# edited\n"...), 0o644))
	waitFor("the drift report, after the refusals", func() bool { c, e := snapshot(); return len(c) == 2 && e == 1 })
	time.Sleep(100 * time.Millisecond) // several more guard rounds: nothing is sent again
	if c, e := snapshot(); !slices.Equal(c, []string{"False", "True"}) || e != 1 {
		t.Fatalf("want one True condition and one Event for one change, got %v and %d events", c, e)
	}
	if !strings.Contains(r.api.events[0], nodeconfig.KubeletDefaultsPath+" contents") {
		t.Errorf("event %q does not name %s", r.api.events[0], nodeconfig.KubeletDefaultsPath)
	}
	if !slices.ContainsFunc(r.log, func(l string) bool { return strings.Contains(l, "drift report to the API server failed (attempt 1") }) {
		t.Errorf("no console line for the refused report:\n%s", strings.Join(r.log, "\n"))
	}

	if st := a.rec.Snapshot(); !strings.HasPrefix(st.Error, refused+"; drift: ") {
		t.Errorf("status error while drifted: %q", st.Error)
	}
	must(t, atomicfile.Write(p, orig, 0o644))
	waitFor("the condition cleared", func() bool { c, _ := snapshot(); return slices.Equal(c, []string{"False", "True", "False"}) })
	cancel()
	<-done
	if st := a.rec.Snapshot(); st.Error != refused {
		t.Errorf("status error after the restore: %q, want the refusal back", st.Error)
	}
	if _, e := snapshot(); e != 1 {
		t.Errorf("restoring posted another event: %v", r.api.events)
	}
}

// surfaceRoot lays out, under a temporary root, the protected surface of
// an image that has run its first boot: accounts, sudo, PAM, the image's
// units (one of them aliased), a drop-in of the applied config, the
// kubelet's PKI after one client certificate, the agent's state.
func surfaceRoot(t *testing.T) string {
	root := t.TempDir()
	write := func(p, data string, mode os.FileMode) {
		must(t, os.MkdirAll(filepath.Dir(root+p), 0o755))
		must(t, os.WriteFile(root+p, []byte(data), mode))
		must(t, os.Chmod(root+p, mode))
	}
	link := func(p, target string) {
		must(t, os.MkdirAll(filepath.Dir(root+p), 0o755))
		must(t, os.Symlink(target, root+p))
	}
	for _, p := range Accounts {
		write(p, "root:x:0:0\n", 0o644)
	}
	must(t, os.Chmod(root+"/etc/gshadow-", 0o640))
	write("/etc/sudoers", "root ALL=(ALL) ALL\n@includedir /etc/sudoers.d\n", 0o440)
	write("/etc/sudoers.d/README", "#\n", 0o440)
	write("/etc/pam.d/common-auth", "auth required pam_unix.so\n", 0o644)
	write("/etc/security/limits.conf", "#\n", 0o644)
	for _, u := range []string{"kubelet.service", "containerd.service", "drover-agent.service", ResolvedUnit} {
		write("/usr/lib/systemd/system/"+u, "[Service]\nExecStart=/usr/bin/"+u+"\n", 0o644)
	}
	link("/usr/lib/systemd/system/kubelet2.service", "kubelet.service") // an alias the image defines
	link("/etc/systemd/system/dbus-org.freedesktop.resolve1.service", "/usr/lib/systemd/system/"+ResolvedUnit)
	write("/etc/systemd/system/containerd.service.d/10-image.conf", "[Service]\nLimitNOFILE=1048576\n", 0o644)
	write("/etc/kubelet-extra.conf", "[Service]\nNice=-5\n", 0o644)
	link("/etc/systemd/system/kubelet.service.d/20-link.conf", "/etc/kubelet-extra.conf")
	for _, d := range UnitSearchDirs {
		must(t, os.MkdirAll(root+d, 0o755))
	}
	pki := nodeconfig.CertDir
	write(pki+"/kubelet.crt", "cert", 0o644)
	write(pki+"/kubelet.key", "key", 0o600)
	write(pki+"/kubelet-client-2025-01-01-00-00-00.pem", "client 1", 0o600)
	link(pki+"/kubelet-client-current.pem", pki+"/kubelet-client-2025-01-01-00-00-00.pem")
	write(StoredConfig, `{"ignition":{"version":"3.4.0"}}`, 0o600)
	write(StoredDigest, digest([]byte("user-data"))+"\n", 0o644)
	write(ContentsDir+"/sha256-0123", "remote", 0o600)
	write(status.LastBootPath, "{}", 0o644)
	return root
}

// TestGuardSurface: every part of the protected surface reports a change
// there, naming the path and what changed, and stays quiet through what
// the node does by design (the kubelet's certificate rotation, the
// status copy, units that are not protected, a file rewritten as it was).
func TestGuardSurface(t *testing.T) {
	pki := nodeconfig.CertDir
	asRoot := os.Geteuid() == 0
	cases := []struct {
		name   string
		change func(t *testing.T, root string)
		want   []string // drift lines; none: no drift at all
		root   bool     // needs root (chown)
	}{
		{"a new file in sudoers.d", writeAt("/etc/sudoers.d/90-all", "ALL ALL=(ALL) NOPASSWD: ALL\n", 0o440),
			[]string{"/etc/sudoers.d/90-all presence (want absent, got file)"}, false},
		{"a changed shadow", writeAt("/etc/shadow", "root::0:0\n", 0o644),
			[]string{"/etc/shadow contents (want " + digest([]byte("root:x:0:0\n"))[:12] + ", got " + digest([]byte("root::0:0\n"))[:12] + ")"}, false},
		{"gshadow- made readable", chmodAt("/etc/gshadow-", 0o644),
			[]string{"/etc/gshadow- mode (want 0640, got 0644)"}, false},
		{"passwd given away", chownAt("/etc/passwd", 1000, 1000),
			[]string{"/etc/passwd owner (want 0:0, got 1000:1000)"}, true},
		{"sudoers edited", writeAt("/etc/sudoers", "ALL ALL=(ALL) ALL\n", 0o440),
			[]string{"/etc/sudoers contents"}, false},
		{"a PAM module edited", writeAt("/etc/pam.d/common-auth", "auth sufficient pam_permit.so\n", 0o644),
			[]string{"/etc/pam.d/common-auth contents"}, false},
		{"PAM limits added", writeAt("/etc/security/limits.d/99.conf", "* hard nofile 1\n", 0o644),
			[]string{"/etc/security/limits.d presence (want absent, got directory)", "/etc/security/limits.d/99.conf presence (want absent, got file)"}, false},
		{"a kubelet drop-in in system.control", writeAt("/run/systemd/system.control/kubelet.service.d/50-anon.conf", "[Service]\nExecStart=\n", 0o644),
			[]string{"/run/systemd/system.control/kubelet.service.d presence (want absent, got directory)",
				"/run/systemd/system.control/kubelet.service.d/50-anon.conf presence (want absent, got file)"}, false},
		{"the agent masked in system.control", linkAt("/etc/systemd/system.control/drover-agent.service", "/dev/null"),
			[]string{"/etc/systemd/system.control/drover-agent.service presence (want absent, got symlink -> /dev/null)"}, false},
		{"an alias of the kubelet with its own drop-in", func(t *testing.T, root string) {
			linkAt("/etc/systemd/system/k.service", "/usr/lib/systemd/system/kubelet.service")(t, root)
			writeAt("/run/systemd/system/k.service.d/x.conf", "[Service]\nExecStart=\n", 0o644)(t, root)
		}, []string{"/etc/systemd/system/k.service presence (want absent, got symlink -> /usr/lib/systemd/system/kubelet.service)",
			"/run/systemd/system/k.service.d presence (want absent, got directory)",
			"/run/systemd/system/k.service.d/x.conf presence (want absent, got file)"}, false},
		{"a drop-in for the image's alias of the kubelet", writeAt("/etc/systemd/system.attached/kubelet2.service.d/x.conf", "[Service]\n", 0o644),
			[]string{"/etc/systemd/system.attached/kubelet2.service.d presence (want absent, got directory)",
				"/etc/systemd/system.attached/kubelet2.service.d/x.conf presence (want absent, got file)"}, false},
		{"a drop-in for resolved's D-Bus alias", writeAt("/run/systemd/transient/dbus-org.freedesktop.resolve1.service.d/x.conf", "[Service]\n", 0o644),
			[]string{"/run/systemd/transient/dbus-org.freedesktop.resolve1.service.d presence (want absent, got directory)",
				"/run/systemd/transient/dbus-org.freedesktop.resolve1.service.d/x.conf presence (want absent, got file)"}, false},
		{"a drop-in for every drover-* service", writeAt("/run/systemd/system/drover-.service.d/x.conf", "[Service]\n", 0o644),
			[]string{"/run/systemd/system/drover-.service.d presence (want absent, got directory)",
				"/run/systemd/system/drover-.service.d/x.conf presence (want absent, got file)"}, false},
		{"a drop-in for every service", writeAt("/run/systemd/system.attached/service.d/x.conf", "[Service]\n", 0o644),
			[]string{"/run/systemd/system.attached/service.d presence (want absent, got directory)",
				"/run/systemd/system.attached/service.d/x.conf presence (want absent, got file)"}, false},
		{"a generator's containerd drop-in", writeAt("/run/systemd/generator.late/containerd.service.d/x.conf", "[Service]\n", 0o644),
			[]string{"/run/systemd/generator.late/containerd.service.d presence (want absent, got directory)",
				"/run/systemd/generator.late/containerd.service.d/x.conf presence (want absent, got file)"}, false},
		{"containerd's image drop-in edited", writeAt("/etc/systemd/system/containerd.service.d/10-image.conf", "[Service]\r\nExecStart=\r\n", 0o644),
			[]string{"/etc/systemd/system/containerd.service.d/10-image.conf contents"}, false},
		{"the file a kubelet drop-in links to edited", writeAt("/etc/kubelet-extra.conf", "[Service]\nExecStart=\n", 0o644),
			[]string{"/etc/systemd/system/kubelet.service.d/20-link.conf contents"}, false},
		{"a kubelet key chmod 0644", chmodAt(pki+"/kubelet.key", 0o644),
			[]string{pki + "/kubelet.key mode (want 0600 or stricter (a private key), got 0644)"}, false},
		{"a kubelet client certificate readable by all", chmodAt(pki+"/kubelet-client-2025-01-01-00-00-00.pem", 0o644),
			[]string{pki + "/kubelet-client-2025-01-01-00-00-00.pem mode (want 0600 or stricter (a private key), got 0644)"}, false},
		{"the serving certificate writable by all", chmodAt(pki+"/kubelet.crt", 0o666),
			[]string{pki + "/kubelet.crt mode (want no write by group or others, got 0666)"}, false},
		{"the PKI directory writable by all", chmodAt(pki, 0o777),
			[]string{pki + " mode (want no write by group or others, got 0777)"}, false},
		{"the kubelet key given away", chownAt(pki+"/kubelet.key", 1000, 1000),
			[]string{pki + "/kubelet.key owner (want 0:0, got 1000:1000)"}, true},
		{"the current client certificate linked out of the PKI", func(t *testing.T, root string) {
			writeAt("/var/tmp/mine.pem", "mine", 0o600)(t, root)
			relinkAt(pki+"/kubelet-client-current.pem", "/var/tmp/mine.pem")(t, root)
		}, []string{pki + "/kubelet-client-current.pem link (want -> a file in " + pki + ", got -> /var/tmp/mine.pem)"}, false},
		{"the kubelet key hard-linked elsewhere", func(t *testing.T, root string) {
			must(t, os.Link(root+pki+"/kubelet.key", root+"/var/lib/key"))
		}, []string{pki + "/kubelet.key link (want the only name of its file, got 2 names (a hard link elsewhere))"}, false},
		{"a directory in the PKI", func(t *testing.T, root string) { must(t, os.Mkdir(root+pki+"/sub", 0o700)) },
			[]string{pki + "/sub type (want file or link, got directory)"}, false},
		{"a new file in the agent's state", writeAt(StateDir+"/extra.ign", "{}", 0o600),
			[]string{StateDir + "/extra.ign presence (want absent, got file)"}, false},
		{"an edited config.ign", writeAt(StoredConfig, `{"ignition":{"version":"3.4.0"},"systemd":{}}`, 0o600),
			[]string{StoredConfig + " contents"}, false},
		{"a rewritten config.sha256", writeAt(StoredDigest, digest([]byte("other"))+"\n", 0o644),
			[]string{StoredDigest + " contents"}, false},
		{"a stored remote content deleted", func(t *testing.T, root string) { must(t, os.Remove(root+ContentsDir+"/sha256-0123")) },
			[]string{ContentsDir + "/sha256-0123 presence (want present, got missing)"}, false},

		{"the kubelet rotates its client certificate", func(t *testing.T, root string) {
			writeAt(pki+"/kubelet-client-2025-06-01-00-00-00.pem", "client 2", 0o600)(t, root)
			relinkAt(pki+"/kubelet-client-current.pem", pki+"/kubelet-client-2025-06-01-00-00-00.pem")(t, root)
			relinkAt(pki+"/kubelet-client-current.pem", "kubelet-client-2025-06-01-00-00-00.pem")(t, root) // relative, as well
		}, nil, false},
		{"the status copy rewritten", writeAt(status.LastBootPath, `{"state":"joined"}`, 0o644), nil, false},
		{"units that are not protected", func(t *testing.T, root string) {
			writeAt("/run/systemd/transient/cri-containerd-0123.scope", "[Scope]\n", 0o644)(t, root)
			writeAt("/etc/systemd/system/foo.service.d/x.conf", "[Service]\n", 0o644)(t, root)
			writeAt("/run/systemd/system.control/kubepods.slice.d/50-CPUWeight.conf", "[Slice]\n", 0o644)(t, root)
			linkAt("/etc/systemd/system/multi-user.target.wants/foo.service", "/etc/systemd/system/foo.service")(t, root)
		}, nil, false},
		{"an account file rewritten as it was", func(t *testing.T, root string) {
			p := root + "/etc/passwd"
			must(t, atomicfile.Write(p, []byte("root:x:0:0\n"), 0o644))
		}, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // each case has its own root
			if c.root && !asRoot {
				t.Skip("chown needs root (CI runs as root, so CI runs this)")
			}
			root := surfaceRoot(t)
			a := &Agent{env: Env{Root: root}}
			a.watch.baselineGuard(root)
			if d := a.checkAll(); len(d) != 0 {
				t.Fatalf("drift before any change: %v", d)
			}
			c.change(t, root)
			var got []string
			for _, d := range a.checkAll() {
				got = append(got, d.String())
			}
			for _, w := range c.want {
				if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, w) }) {
					t.Errorf("no drift %q in\n%s", w, strings.Join(got, "\n"))
				}
			}
			if len(got) != len(c.want) {
				t.Errorf("%d drift lines, want %d:\n%s", len(got), len(c.want), strings.Join(got, "\n"))
			}
		})
	}
}

func writeAt(p, data string, mode os.FileMode) func(*testing.T, string) {
	return func(t *testing.T, root string) {
		t.Helper()
		must(t, os.MkdirAll(filepath.Dir(root+p), 0o755))
		must(t, atomicfile.Write(root+p, []byte(data), mode))
		must(t, os.Chmod(root+p, mode))
	}
}

// placeAt writes a file beside the root and renames it into place, so that
// a guard running meanwhile sees it appear once, whole.
func placeAt(p, data string, mode os.FileMode) func(*testing.T, string) {
	return func(t *testing.T, root string) {
		t.Helper()
		staged := filepath.Join(filepath.Dir(root), filepath.Base(root)+".staged")
		must(t, os.WriteFile(staged, []byte(data), mode))
		must(t, os.Chmod(staged, mode))
		must(t, os.MkdirAll(filepath.Dir(root+p), 0o755))
		must(t, os.Rename(staged, root+p))
	}
}

func chmodAt(p string, mode os.FileMode) func(*testing.T, string) {
	return func(t *testing.T, root string) { t.Helper(); must(t, os.Chmod(root+p, mode)) }
}

func chownAt(p string, uid, gid int) func(*testing.T, string) {
	return func(t *testing.T, root string) { t.Helper(); must(t, os.Lchown(root+p, uid, gid)) }
}

func linkAt(p, target string) func(*testing.T, string) {
	return func(t *testing.T, root string) {
		t.Helper()
		must(t, os.MkdirAll(filepath.Dir(root+p), 0o755))
		must(t, os.Symlink(target, root+p))
	}
}

// relinkAt points the link p at target in one rename, as the kubelet does.
func relinkAt(p, target string) func(*testing.T, string) {
	return func(t *testing.T, root string) {
		t.Helper()
		must(t, os.Symlink(target, root+p+".new"))
		must(t, os.Rename(root+p+".new", root+p))
	}
}

// TestGuardConfigPathsInTheSurface: a path both the config wrote and the
// surface covers (a kubelet drop-in) is checked against the agent's record
// alone: a change is reported once, and a rewrite the agent records (the
// token's redaction) is not drift.
func TestGuardConfigPathsInTheSurface(t *testing.T) {
	root := surfaceRoot(t)
	const p = "/etc/systemd/system/containerd.service.d/10-image.conf"
	a := &Agent{env: Env{Root: root}}
	data, err := os.ReadFile(root + p)
	must(t, err)
	a.watch.add(root, ignition.Managed{Path: p, Kind: "file", SHA256: digest(data)}, "user-data")
	a.watch.baselineGuard(root)
	redacted := []byte("[Service]\nEnvironment=TOKEN=redacted\n")
	writeAt(p, string(redacted), 0o644)(t, root)
	a.watch.add(root, ignition.Managed{Path: p, Kind: "file", SHA256: digest(redacted)}, "user-data")
	if d := a.checkAll(); len(d) != 0 {
		t.Fatalf("drift after a rewrite the agent recorded: %v", d)
	}
	writeAt(p, "[Service]\nExecStart=\n", 0o644)(t, root)
	if d := fmt.Sprint(a.checkAll()); !strings.HasPrefix(d, "["+p+" contents (want "+digest(redacted)[:12]) || strings.Count(d, p) != 1 {
		t.Errorf("drift %s, want %s's contents once", d, p)
	}
}

// TestGuardHostnameIsTheAgents: /etc/hostname is the agent's (its
// hostname step writes it from the instance metadata). It is no extension
// point, so a config that gives it is refused before anything is applied;
// the guard's rewrote (the agent's own write is not drift) is left for a
// path that may be both.
func TestGuardHostnameIsTheAgents(t *testing.T) {
	var cfg map[string]any
	must(t, json.Unmarshal(userData(t, "hello"), &cfg))
	storage := cfg["storage"].(map[string]any)
	n := len(storage["files"].([]any))
	storage["files"] = append(storage["files"].([]any),
		map[string]any{"path": "/etc/hostname", "mode": 0o600, "contents": map[string]any{"source": "data:,from-user-data%0A"}})
	data, err := json.Marshal(cfg)
	must(t, err)
	ps := ignition.Validate(data, Options(nil))
	want := fmt.Sprintf("$.storage.files[%d].path: %q is not an extension point of the node", n, "/etc/hostname")
	if len(ps) != 1 || !strings.HasPrefix(ps[0].String(), want) {
		t.Fatalf("a config that writes /etc/hostname: got %v, want one problem %q…", ps, want)
	}
}

// TestGuardAfterFailedJoin: provisioning that failed before the node file
// was applied still leaves a guard: it reports on the console and in the
// status file, keeps the state failed, says once that it cannot report to
// the API server, and does not need the node's configuration.
func TestGuardAfterFailedJoin(t *testing.T) {
	r := newRig(t, userData(t, "hello"))
	r.prov.err = errors.New("metadata service unreachable")
	a := r.agent()
	a.dl.Config = 50 * time.Millisecond
	if err := a.Run(context.Background()); err == nil {
		t.Fatal("provisioning succeeded without user-data")
	}
	for _, p := range []string{"/etc/sudoers", "/etc/sudoers.d/README", "/etc/shadow"} {
		writeAt(p, "image\n", 0o440)(t, r.root)
	}
	failed := a.rec.Snapshot().Error
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Guard(ctx, 10*time.Millisecond); close(done) }()
	stop := sync.OnceFunc(func() { cancel(); <-done })
	t.Cleanup(stop)
	time.Sleep(50 * time.Millisecond) // the baselines are taken
	// The guard runs meanwhile: the file appears whole, under its name
	// (atomicfile's temporary name in the same directory would be seen).
	placeAt("/etc/sudoers.d/90-all", "ALL ALL=(ALL) NOPASSWD: ALL\n", 0o440)(t, r.root)
	for end := time.Now().Add(10 * time.Second); !strings.Contains(a.rec.Snapshot().Error, "drift"); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("no drift in the status: %+v\n%s", a.rec.Snapshot(), strings.Join(r.log, "\n"))
		}
	}
	stop()
	st := a.rec.Snapshot()
	if want := failed + "; drift: local change to what the node is meant to hold: /etc/sudoers.d/90-all presence (want absent, got file)"; st.State != "failed" || !strings.HasPrefix(st.Error, want) {
		t.Errorf("status %s %q, want failed %q", st.State, st.Error, want)
	}
	var noAPI, drift int
	for _, l := range r.log {
		if strings.Contains(l, "drift guard: not reporting to the API server (no node file was applied)") {
			noAPI++
		}
		if strings.Contains(l, "DRIFT: local change to what the node is meant to hold: /etc/sudoers.d/90-all presence") {
			drift++
		}
	}
	if noAPI != 1 || drift != 1 {
		t.Errorf("%d lines about the API server and %d about the drift, want 1 each:\n%s", noAPI, drift, strings.Join(r.log, "\n"))
	}
	if len(r.api.conds)+len(r.api.events) != 0 {
		t.Errorf("reported to the API server without credentials: %v %v", r.api.conds, r.api.events)
	}
}
