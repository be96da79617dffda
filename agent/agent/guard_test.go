package agent

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/agent/ignition"
	"github.com/drover-os/drover/agent/nodeconfig"
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
