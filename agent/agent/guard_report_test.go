package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-os/drover/agent/ignition"
	"github.com/drover-os/drover/agent/kube"
	"github.com/drover-os/drover/agent/nodeconfig"
	"github.com/drover-os/drover/internal/atomicfile"
)

// scriptAPI is an API server that refuses the next calls of a kind on
// demand and records every call, refused ones marked "!", in order.
type scriptAPI struct {
	mu sync.Mutex
	// refuse: kind ("get", "cond", "event") → how many of the next such
	// calls fail.
	refuse map[string]int
	calls  []string
}

func (s *scriptAPI) call(kind, what string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refuse[kind] > 0 {
		s.refuse[kind]--
		s.calls = append(s.calls, "!"+what)
		return errors.New("503 Service Unavailable")
	}
	s.calls = append(s.calls, what)
	return nil
}

func (s *scriptAPI) refuseNext(kind string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refuse == nil {
		s.refuse = map[string]int{}
	}
	s.refuse[kind] += n
}

// log is every call but the reads of the Node, accepted or not ("!").
func (s *scriptAPI) log() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, c := range s.calls {
		if !strings.HasSuffix(c, "get") {
			out = append(out, c)
		}
	}
	return out
}

// accepted is what the API server holds, in the order it got it.
func (s *scriptAPI) accepted() []string {
	var out []string
	for _, c := range s.log() {
		if !strings.HasPrefix(c, "!") {
			out = append(out, c)
		}
	}
	return out
}

func (s *scriptAPI) GetNode(ctx context.Context, name string) (*kube.Node, error) {
	if err := s.call("get", "get"); err != nil {
		return nil, err
	}
	n := &kube.Node{}
	n.Metadata.Name, n.Metadata.UID = name, "uid-"+name
	return n, nil
}

func (s *scriptAPI) SetCondition(ctx context.Context, name string, c kube.Condition) error {
	return s.call("cond", c.Type+"="+c.Status)
}

func (s *scriptAPI) Cordon(ctx context.Context, name string) error { return s.call("cordon", "cordon") }

func (s *scriptAPI) Event(ctx context.Context, node, uid, reason, msg string) error {
	if uid != "uid-"+node {
		return fmt.Errorf("event for node %s with uid %q", node, uid)
	}
	return s.call("event", reason+": "+msg)
}

// TestCheckDriftSpecialBitsAndGroup: a change of setuid, setgid or sticky
// alone, of the group's bits alone, or of the group owner alone is drift.
func TestCheckDriftSpecialBitsAndGroup(t *testing.T) {
	cases := []struct {
		name       string
		was, now   os.FileMode
		dir        bool
		want, got  string
		uidD, gidD uint32 // the record's owner, off by this from the file's
		owner      string // want, got of an owner drift; "" none
	}{
		{name: "setuid added", was: 0o755, now: 0o755 | os.ModeSetuid, want: "0755", got: "4755"},
		{name: "setuid dropped", was: 0o755 | os.ModeSetuid, now: 0o755, want: "4755", got: "0755"},
		{name: "setgid added", was: 0o755, now: 0o755 | os.ModeSetgid, want: "0755", got: "2755"},
		{name: "sticky dropped from a directory", was: 0o777 | os.ModeSticky, now: 0o777, dir: true, want: "1777", got: "0777"},
		{name: "setgid for setuid", was: 0o755 | os.ModeSetuid, now: 0o755 | os.ModeSetgid, want: "4755", got: "2755"},
		{name: "group may write", was: 0o644, now: 0o664, want: "0644", got: "0664"},
		{name: "group may no longer read", was: 0o640, now: 0o600, want: "0640", got: "0600"},
		{name: "others may execute", was: 0o754, now: 0o755, want: "0754", got: "0755"},
		{name: "owner may write", was: 0o444, now: 0o644, want: "0444", got: "0644"},
		{name: "group owner alone", was: 0o644, now: 0o644, gidD: 1},
		{name: "user owner alone", was: 0o644, now: 0o644, uidD: 1},
		{name: "nothing", was: 0o4755, now: 0o4755},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			p := root + "/usr/local/bin/x"
			must(t, os.MkdirAll(filepath.Dir(p), 0o755))
			m := ignition.Managed{Path: "/usr/local/bin/x", Kind: "file", SHA256: digest([]byte("x"))}
			if c.dir {
				must(t, os.Mkdir(p, 0o755))
				m = ignition.Managed{Path: "/usr/local/bin/x", Kind: "directory"}
			} else {
				must(t, os.WriteFile(p, []byte("x"), 0o600))
			}
			must(t, os.Chmod(p, c.was))
			var w watchList
			w.add(root, m, "user-data")
			list := w.list()
			list[0].UID += c.uidD
			list[0].GID += c.gidD
			must(t, os.Chmod(p, c.now))
			var got []string
			for _, d := range CheckDrift(root, list) {
				got = append(got, d.String())
			}
			var want []string
			if c.want != "" {
				want = append(want, "/usr/local/bin/x mode (want "+c.want+", got "+c.got+")")
			}
			if c.uidD+c.gidD != 0 {
				uid, gid := list[0].UID-c.uidD, list[0].GID-c.gidD
				want = append(want, fmt.Sprintf("/usr/local/bin/x owner (want %d:%d, got %d:%d)", list[0].UID, list[0].GID, uid, gid))
			}
			if !slices.Equal(got, want) {
				t.Errorf("drift %q, want %q", got, want)
			}
		})
	}
}

// TestCheckAllKeepsEveryChangeOfAPath: two changes of one path (contents
// and mode) are two drifts, and the same change of two paths too; only
// the same change of the same path, seen twice, is one.
func TestCheckAllKeepsEveryChangeOfAPath(t *testing.T) {
	root := t.TempDir()
	a := &Agent{env: Env{Root: root}}
	for _, p := range []string{"/etc/a", "/etc/b"} {
		writeAt(p, "was", 0o644)(t, root)
		a.watch.add(root, ignition.Managed{Path: p, Kind: "file", SHA256: digest([]byte("was"))}, "user-data")
	}
	a.watch.baselineGuard(root)
	writeAt("/etc/a", "now", 0o600)(t, root)
	writeAt("/etc/b", "now", 0o644)(t, root)
	// The same change found twice (found once and also by a round).
	a.known.add(Drift{"/etc/b", "contents", digest([]byte("was")), digest([]byte("now"))})
	var got []string
	for _, d := range a.checkAll() {
		got = append(got, d.Path+" "+d.What)
	}
	if want := []string{"/etc/a contents", "/etc/a mode", "/etc/b contents"}; !slices.Equal(got, want) {
		t.Errorf("drift %q, want %q", got, want)
	}
}

// guardRig is an agent past its join whose guard reports to api, watching
// /etc/a (contents "a", 0644).
type guardRig struct {
	a    *Agent
	api  *scriptAPI
	root string
	mu   sync.Mutex
	log  []string
}

func newGuardRig(t *testing.T) *guardRig {
	g := &guardRig{api: &scriptAPI{}, root: t.TempDir()}
	writeAt("/etc/a", "a", 0o644)(t, g.root)
	g.a = New(Env{Root: g.root, Uptime: func() float64 { return 1 },
		Kube: func(string, []byte, string) (NodeAPI, error) { return g.api, nil },
		Console: func(s string) {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.log = append(g.log, s)
		}}, DefaultDeadlines)
	g.a.node, g.a.nodeName = &nodeconfig.Config{}, "n1"
	g.a.rec.SetState("joined", "") // the status file and its copy, before the baselines
	g.a.watch.add(g.root, ignition.Managed{Path: "/etc/a", Kind: "file", SHA256: digest([]byte("a"))}, "user-data")
	return g
}

// start runs the guard until the test ends.
func (g *guardRig) start(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { g.a.Guard(ctx, 5*time.Millisecond); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func (g *guardRig) notes() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.log...)
}

// waitLog waits until the API server's log (refused calls too) is want,
// then for a few more guard rounds, in which nothing more may come.
func (g *guardRig) waitLog(t *testing.T, want ...string) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); len(g.api.log()) < len(want); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(end) {
			break
		}
	}
	time.Sleep(50 * time.Millisecond) // ten rounds
	if got := g.api.log(); !slices.Equal(got, want) {
		t.Fatalf("API calls\n%s\nwant\n%s\nconsole:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), strings.Join(g.notes(), "\n"))
	}
}

func driftEvent(ds ...Drift) string { return "ConfigDrift: " + driftMessage(ds) }

// TestGuardReportsEveryChangeOfOnePath: a second change of a path already
// drifted (its mode, then its contents again) is a new drift state: a
// new condition message and a new Event, each once.
func TestGuardReportsEveryChangeOfOnePath(t *testing.T) {
	g := newGuardRig(t)
	g.start(t)
	g.waitLog(t, "DroverConfigDrift=False")
	sum := func(s string) string { return digest([]byte(s)) }
	contents := func(s string) Drift { return Drift{"/etc/a", "contents", sum("a"), sum(s)} }
	mode := Drift{"/etc/a", "mode", "0644", "0600"}

	must(t, atomicfile.Write(g.root+"/etc/a", []byte("b"), 0o644))
	g.waitLog(t, "DroverConfigDrift=False", "DroverConfigDrift=True", driftEvent(contents("b")))
	must(t, os.Chmod(g.root+"/etc/a", 0o600))
	g.waitLog(t, "DroverConfigDrift=False", "DroverConfigDrift=True", driftEvent(contents("b")),
		"DroverConfigDrift=True", driftEvent(contents("b"), mode))
	must(t, atomicfile.Write(g.root+"/etc/a", []byte("c"), 0o600))
	g.waitLog(t, "DroverConfigDrift=False", "DroverConfigDrift=True", driftEvent(contents("b")),
		"DroverConfigDrift=True", driftEvent(contents("b"), mode),
		"DroverConfigDrift=True", driftEvent(contents("c"), mode))
}

// TestGuardRetriesOnlyWhatWasRefused: the API server accepts the
// condition and refuses the first Event the guard ever sends (and the
// read of the Node for it): the Event alone is retried until accepted,
// the condition is not sent again. Each report backs off from the first
// attempt: the next one refused says attempt 1 again.
func TestGuardRetriesOnlyWhatWasRefused(t *testing.T) {
	g := newGuardRig(t)
	g.start(t)
	g.waitLog(t, "DroverConfigDrift=False")
	d := Drift{"/etc/a", "contents", digest([]byte("a")), digest([]byte("b"))}

	g.api.refuseNext("event", 2)
	g.api.refuseNext("get", 1)
	must(t, atomicfile.Write(g.root+"/etc/a", []byte("b"), 0o644))
	ev := driftEvent(d)
	g.waitLog(t, "DroverConfigDrift=False", "DroverConfigDrift=True", "!"+ev, "!"+ev, ev)
	g.api.mu.Lock()
	calls := append([]string(nil), g.api.calls...)
	g.api.mu.Unlock()
	if want := []string{"DroverConfigDrift=False", "DroverConfigDrift=True", "!get", "get", "!" + ev, "get", "!" + ev, "get", ev}; !slices.Equal(calls, want) {
		t.Errorf("calls\n%s\nwant\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"))
	}

	// Restored; the API server refuses the condition once.
	g.api.refuseNext("cond", 1)
	must(t, atomicfile.Write(g.root+"/etc/a", []byte("a"), 0o644))
	g.waitLog(t, "DroverConfigDrift=False", "DroverConfigDrift=True", "!"+ev, "!"+ev, ev, "!DroverConfigDrift=False", "DroverConfigDrift=False")

	var attempts []string
	for _, l := range g.notes() {
		if _, rest, ok := strings.Cut(l, "drift report to the API server failed (attempt "); ok {
			n, _, _ := strings.Cut(rest, ";")
			attempts = append(attempts, n)
		}
	}
	if want := []string{"1", "2", "3", "1"}; !slices.Equal(attempts, want) {
		t.Errorf("attempts %q, want %q (a new report starts again from 1):\n%s", attempts, want, strings.Join(g.notes(), "\n"))
	}
}
