package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-os/drover/agent/health"
	"github.com/drover-os/drover/agent/ignition"
	"github.com/drover-os/drover/internal/atomicfile"
)

// TestWatchListRecords: the agent's own rewrite of a watched path
// (a file, a link, the first path recorded) replaces its record; a path
// the config does not manage stays unwatched; a removed path is
// forgotten, the others kept in order.
func TestWatchListRecords(t *testing.T) {
	root := t.TempDir()
	var w watchList
	for _, p := range []string{"/etc/a", "/etc/b", "/etc/c"} {
		writeAt(p, "was", 0o644)(t, root)
		w.add(root, ignition.Managed{Path: p, Kind: "file", SHA256: digest([]byte("was"))}, "user-data")
	}
	writeAt("/etc/a", "now", 0o600)(t, root)
	w.rewrote(root, "/etc/a")
	must(t, os.Remove(root+"/etc/b"))
	must(t, os.Symlink("/etc/c", root+"/etc/b"))
	w.rewrote(root, "/etc/b")
	writeAt("/etc/hostname", "n1\n", 0o644)(t, root)
	w.rewrote(root, "/etc/hostname")
	if d := CheckDrift(root, w.list()); len(d) != 0 {
		t.Errorf("drift after the agent's own rewrites: %v", d)
	}
	var got []string
	for _, x := range w.list() {
		got = append(got, fmt.Sprintf("%s %s %s %s %04o", x.Path, x.Kind, x.Origin, short(x.SHA256)+x.Target, ignition.ModeBits(x.Mode)))
	}
	want := []string{
		"/etc/a file agent " + digest([]byte("now"))[:12] + " 0600",
		"/etc/b symlink agent /etc/c 0777",
		"/etc/c file user-data " + digest([]byte("was"))[:12] + " 0644",
	}
	if !slices.Equal(got, want) {
		t.Errorf("records\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	w.remove("/etc/b")
	w.remove("/etc/none")
	got = nil
	for _, x := range w.list() {
		got = append(got, x.Path)
	}
	if want := []string{"/etc/a", "/etc/c"}; !slices.Equal(got, want) {
		t.Errorf("after remove: %q, want %q", got, want)
	}
}

// TestBaselinesTakenOnce: the node's baseline apply took is the one the
// guard compares with (a change between the two is drift), and the owner
// the kubelet's PKI must have is the root directory's.
func TestBaselinesTakenOnce(t *testing.T) {
	root := surfaceRoot(t)
	a := &Agent{env: Env{Root: root}}
	a.watch.baselineNode(root)
	writeAt("/etc/sudoers.d/90-all", "ALL ALL=(ALL) NOPASSWD: ALL\n", 0o440)(t, root)
	a.watch.baselineGuard(root)
	if d := fmt.Sprint(a.checkAll()); !strings.Contains(d, "/etc/sudoers.d/90-all presence") {
		t.Errorf("a change between apply and the guard's start: drift %s", d)
	}
	if os.Geteuid() != 0 {
		t.Skip("chown needs root (CI runs as root, so CI runs this)")
	}
	must(t, os.Chown(root, 4242, 4343))
	var w watchList
	w.baselineNode(root)
	if w.owner != (Owner{4242, 4343}) {
		t.Errorf("owner %+v, want the root directory's 4242:4343", w.owner)
	}
}

// TestCheckDriftOrderAndFirstFinder: one path's drifts come in a fixed
// order (contents, mode, owner), and of one change found twice the guard
// keeps what its round saw, not what was found before.
func TestCheckDriftOrderAndFirstFinder(t *testing.T) {
	root := t.TempDir()
	writeAt("/etc/a", "was", 0o644)(t, root)
	a := &Agent{env: Env{Root: root}}
	a.watch.add(root, ignition.Managed{Path: "/etc/a", Kind: "file", SHA256: digest([]byte("was"))}, "user-data")
	a.watch.baselineGuard(root)
	list := a.watch.list()
	list[0].GID++
	writeAt("/etc/a", "now", 0o600)(t, root)
	var got []string
	for _, d := range CheckDrift(root, list) {
		got = append(got, d.What)
	}
	if want := []string{"contents", "mode", "owner"}; !slices.Equal(got, want) {
		t.Errorf("drift of one path %q, want %q", got, want)
	}
	a.known.add(Drift{"/etc/a", "contents", digest([]byte("was")), "earlier"})
	d := a.checkAll()
	if len(d) != 2 || d[0].Got != digest([]byte("now")) {
		t.Errorf("drift %v, want the round's contents and the mode", d)
	}
}

// TestGuardSaysOnceWhenItCanReport: a guard without an API client says so
// once, and once that it reports from when it has one.
func TestGuardSaysOnceWhenItCanReport(t *testing.T) {
	g := newGuardRig(t)
	var ready atomic.Bool
	g.a.env.Kube = func(string, []byte, string) (NodeAPI, error) {
		if !ready.Load() {
			return nil, errors.New("the kubelet has no certificate yet")
		}
		return g.api, nil
	}
	g.start(t)
	time.Sleep(20 * time.Millisecond)
	// Drifted before the client is there: the drift is what goes first.
	must(t, atomicfile.Write(g.root+"/etc/a", []byte("b"), 0o644))
	for end := time.Now().Add(10 * time.Second); !slices.ContainsFunc(g.notes(), func(l string) bool { return strings.Contains(l, "DRIFT: ") }); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("no drift noted:\n%s", strings.Join(g.notes(), "\n"))
		}
	}
	ready.Store(true)
	g.waitLog(t, "DroverConfigDrift=True", driftEvent(Drift{"/etc/a", "contents", digest([]byte("a")), digest([]byte("b"))}))
	var no, now int
	for _, l := range g.notes() {
		if strings.Contains(l, "drift guard: not reporting to the API server (the kubelet has no certificate yet)") {
			no++
		}
		if strings.Contains(l, "drift guard: reporting to the API server from now on") {
			now++
		}
	}
	if no != 1 || now != 1 {
		t.Errorf("%d lines without the API server, %d once it is there; want 1 each:\n%s", no, now, strings.Join(g.notes(), "\n"))
	}
}

// TestWatchersSayOnceWhyTheyStop: a link watch that fails says so (and
// not when the agent stops it); a restart count that cannot be read is
// said once per unit, however many polls fail.
func TestWatchersSayOnceWhyTheyStop(t *testing.T) {
	var mu sync.Mutex
	var notes []string
	note := func(s string) { mu.Lock(); defer mu.Unlock(); notes = append(notes, s) }
	found := make(chan health.Finding, 16)
	ctx, cancel := context.WithCancel(context.Background())
	watchLinks(ctx, func(context.Context, func(health.Link)) error { return errors.New("netlink: permission denied") }, &health.Links{}, found, note)
	cancel()
	watchLinks(ctx, func(ctx context.Context, _ func(health.Link)) error { return ctx.Err() }, &health.Links{}, found, note)
	if want := []string{"link watch: netlink: permission denied; NIC link loss is not reported from now on"}; !slices.Equal(notes, want) {
		t.Errorf("notes %q, want %q", notes, want)
	}

	notes = nil
	ctx, cancel = context.WithCancel(context.Background())
	var reads atomic.Int32
	read := func(_ context.Context, unit string) (uint32, error) {
		if unit == "kubelet.service" {
			return 0, nil
		}
		if reads.Add(1) == 5 {
			cancel()
		}
		return 0, errors.New("no such unit")
	}
	done := make(chan struct{})
	go func() {
		watchRestarts(ctx, read, []*health.Restarts{{Unit: "containerd.service"}, {Unit: "kubelet.service"}}, time.Millisecond, found, note)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the restart watch did not end with its context")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(notes) != 1 || !strings.HasPrefix(notes[0], "restart watch: reading containerd.service: no such unit (noted once") {
		t.Errorf("notes %q, want one for containerd.service", notes)
	}
}

// TestHealthNotesTrueConditions: a condition turning True is on the
// console with its evidence (False ones, the usual state, are not), and
// so is each Event queued.
func TestHealthNotesTrueConditions(t *testing.T) {
	clock := time.Now()
	var notes []string
	r := reporter(&scriptAPI{}, &clock, &notes)
	r.add(health.Finding{Condition: health.NICLinkDown, Status: "False", Reason: "NICLinksUp", Evidence: "eth0 has its carrier back"})
	r.add(health.Finding{Condition: health.ReadonlyFilesystem, Reason: "FilesystemIsReadOnly", Evidence: "EXT4-fs (vda1): Remounting filesystem read-only"})
	r.add(health.Finding{Event: "OOMKilling", Evidence: "Killed process 1", Kernel: true})
	want := []string{"health: ReadonlyFilesystem=True: EXT4-fs (vda1): Remounting filesystem read-only", "health: OOMKilling: Killed process 1"}
	if !slices.Equal(notes, want) {
		t.Errorf("notes %q, want %q", notes, want)
	}
	var got []string
	for _, p := range r.pending {
		if p.cond != nil {
			got = append(got, p.cond.Type+"="+p.cond.Status+" "+p.cond.Reason)
		}
	}
	if want := []string{"NICLinkDown=False NICLinksUp", "ReadonlyFilesystem=True FilesystemIsReadOnly"}; !slices.Equal(got, want) {
		t.Errorf("conditions %q, want %q", got, want)
	}
}
