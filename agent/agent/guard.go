package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/drover-os/drover/agent/ignition"
	"github.com/drover-os/drover/agent/kube"
	"github.com/drover-os/drover/agent/provider"
	"github.com/drover-os/drover/nodecontract"
)

// Watched is one path the node is meant to hold, as the agent left it: a
// user-data file, directory, link or unit (ignition.Managed), or a file the
// agent rendered; with the mode, owner and group it had right after the
// agent wrote it.
type Watched struct {
	ignition.Managed
	Mode     fs.FileMode // permission bits and type
	UID, GID uint32
	// Origin says who wrote it: "user-data" or "agent".
	Origin string
}

// watchList is what the guard checks: filled by apply and by every
// rendered write (the containerd and runtime phases run side by side).
type watchList struct {
	mu    sync.Mutex
	paths []Watched
	// node and state are the protected surface's baselines (NodeSurface,
	// StateSurface); nil until taken.
	node, state *baseline
	hash        hasher
	// owner is who must own the kubelet's PKI: the owner of the root
	// directory (root on a node), read with the node's baseline.
	owner Owner
}

// baseline is a surface and what it held when the agent took it.
type baseline struct {
	s    Surface
	snap Snapshot
}

// baselineNode records NodeSurface under root: the image's accounts, sudo
// and PAM, and the protected units as the image and the applied config
// left them. apply calls it once the config is written, before systemd
// re-runs its generators and the boot services re-read their directories
// on the config's files (a generator or a tmpfiles.d line from the
// user-data that changes them is drift); the guard, at its start, if
// provisioning ended before.
func (w *watchList) baselineNode(root string) {
	b := &baseline{NodeSurface, NodeSurface.Take(root, &w.hash)}
	var own Owner
	if fi, err := os.Stat(root + "/"); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			own = Owner{st.Uid, st.Gid}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.node, w.owner = b, own
}

// baselineGuard takes, when the guard starts, the baselines still
// missing: NodeSurface if provisioning ended before apply took it, and
// StateSurface, the agent's state as provisioning left it (the token's
// redaction rewrites it late in the join).
func (w *watchList) baselineGuard(root string) {
	w.mu.Lock()
	noNode := w.node == nil
	w.mu.Unlock()
	if noNode {
		w.baselineNode(root)
	}
	st := &baseline{StateSurface, StateSurface.Take(root, &w.hash)}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.state = st
}

// rewrote re-records a watched path the agent itself wrote over after
// apply (the hostname step writes /etc/hostname, which the config could
// give before it was judged by extension points and cannot now); a path
// the config does not manage stays unwatched.
func (w *watchList) rewrote(root, p string) {
	w.mu.Lock()
	i := slices.IndexFunc(w.paths, func(x Watched) bool { return x.Path == p })
	w.mu.Unlock()
	if i < 0 {
		return
	}
	m := ignition.Managed{Path: p, Kind: "file"}
	if fi, err := os.Lstat(root + p); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		// A link that cannot be read (gone since the Lstat) stays
		// recorded as a file with no digest: the next round reports
		// whatever is there.
		if t, err := os.Readlink(root + p); err == nil {
			m.Kind, m.Target = "symlink", t
		}
	} else if data, err := os.ReadFile(root + p); err == nil {
		m.SHA256 = digest(data)
	}
	w.add(root, m, "agent")
}

// checkSurface compares the protected surface with its baselines; the
// config's own paths (watched) are left to CheckDrift.
func (w *watchList) checkSurface(root string, watched []Watched) []Drift {
	w.mu.Lock()
	bases := []*baseline{w.node, w.state}
	w.mu.Unlock()
	skip := map[string]bool{}
	for _, x := range watched {
		skip[x.Path] = true
	}
	var out []Drift
	for _, b := range bases {
		if b != nil {
			out = append(out, Compare(b.snap, b.s.Take(root, &w.hash), skip)...)
		}
	}
	return out
}

// add records m as the agent just wrote it under root.
func (w *watchList) add(root string, m ignition.Managed, origin string) {
	wt := Watched{Managed: m, Origin: origin}
	if fi, err := os.Lstat(root + m.Path); err == nil {
		wt.Mode = fi.Mode()
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			wt.UID, wt.GID = st.Uid, st.Gid
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range w.paths {
		if w.paths[i].Path == m.Path {
			w.paths[i] = wt // written again (a later phase): the latest write counts
			return
		}
	}
	w.paths = append(w.paths, wt)
}

// remove forgets a path the agent deleted on purpose (the bootstrap
// kubeconfig after the join).
func (w *watchList) remove(path string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range w.paths {
		if w.paths[i].Path == path {
			w.paths = append(w.paths[:i], w.paths[i+1:]...)
			return
		}
	}
}

func (w *watchList) list() []Watched {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Watched(nil), w.paths...)
}

// Drift is one watched path that no longer matches what the agent left.
type Drift struct {
	Path string
	What string // contents, link, type, mode, owner, presence
	Want string // digest, link target, mode, uid:gid or "present"
	Got  string
}

func (d Drift) String() string {
	return fmt.Sprintf("%s %s (want %s, got %s)", d.Path, d.What, short(d.Want), short(d.Got))
}

func short(s string) string {
	if len(s) == 64 {
		return s[:12]
	}
	return s
}

// checkAll is one guard round: the config's and rendered paths against
// the agent's record, the protected surface against its baselines and
// the kubelet's PKI against its rules; by path, each change once.
func (a *Agent) checkAll() []Drift {
	watched := a.watch.list()
	out := CheckDrift(a.env.Root, watched)
	out = append(out, a.watch.checkSurface(a.env.Root, watched)...)
	a.watch.mu.Lock()
	own := a.watch.owner
	a.watch.mu.Unlock()
	out = append(out, CheckPKI(a.env.Root, own)...)
	// Found once (an edited stored config), and the node's guarantees
	// observed by their effect (guarantees.go).
	out = append(out, a.known.list()...)
	out = append(out, a.guaranteeDrift()...)
	// Compare's order is a map's: the drift state must read the same
	// from round to round.
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return out[i].What < out[j].What
	})
	return slices.CompactFunc(out, func(x, y Drift) bool { return x.Path == y.Path && x.What == y.What })
}

// CheckDrift compares the watched paths under root with what the agent
// left: presence, type, contents (files), target (symbolic links), the
// same inode as the target (hard links), mode, owner and group.
func CheckDrift(root string, watched []Watched) []Drift {
	var out []Drift
	for _, w := range watched {
		p := root + w.Path
		fi, err := os.Lstat(p)
		if err != nil {
			out = append(out, Drift{w.Path, "presence", "present", "missing"})
			continue
		}
		if w.Mode != 0 && fi.Mode().Type() != w.Mode.Type() {
			out = append(out, Drift{w.Path, "type", typeName(w.Mode), typeName(fi.Mode())})
			continue
		}
		switch w.Kind {
		case "file":
			if w.SHA256 == "" {
				break // contents depend on the node (kept, appended to)
			}
			data, err := os.ReadFile(p)
			if err != nil {
				out = append(out, Drift{w.Path, "contents", w.SHA256, "unreadable: " + err.Error()})
				break
			}
			sum := sha256.Sum256(data)
			if got := hex.EncodeToString(sum[:]); got != w.SHA256 {
				out = append(out, Drift{w.Path, "contents", w.SHA256, got})
			}
		case "symlink":
			if t, err := os.Readlink(p); err != nil || t != w.Target {
				out = append(out, Drift{w.Path, "link", "-> " + w.Target, "-> " + t})
			}
		case "hardlink":
			tfi, err := os.Stat(root + w.Target)
			if err != nil || !os.SameFile(fi, tfi) {
				out = append(out, Drift{w.Path, "link", "same file as " + w.Target, "a different file"})
			}
		case "directory":
			if !fi.IsDir() {
				out = append(out, Drift{w.Path, "type", "directory", typeName(fi.Mode())})
			}
		}
		if w.Mode == 0 || fi.Mode().Type() == fs.ModeSymlink {
			continue // not recorded; a symlink's own mode means nothing
		}
		if got := fi.Mode().Perm() | (fi.Mode() & (fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)); got != w.Mode.Perm()|(w.Mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)) {
			out = append(out, Drift{w.Path, "mode", fmt.Sprintf("%04o", ignition.ModeBits(w.Mode)), fmt.Sprintf("%04o", ignition.ModeBits(fi.Mode()))})
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && (st.Uid != w.UID || st.Gid != w.GID) {
			out = append(out, Drift{w.Path, "owner", fmt.Sprintf("%d:%d", w.UID, w.GID), fmt.Sprintf("%d:%d", st.Uid, st.Gid)})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func typeName(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	}
	return m.Type().String()
}

// GuardPeriod is how often the guard re-checks: a few dozen small files,
// hashed, so cheap; a change reaches the Node within one period.
const GuardPeriod = 15 * time.Second

// report is one drift state on its way to the API server: the condition
// and (for drift) the Event are each sent until accepted, once.
type report struct {
	key              string
	drift            []Drift
	condSent, evSent bool
	attempt          int
}

// Guard re-checks the watched paths and the protected surface every period
// and reports each change once: on the console (and so the journal), in
// the status file, and on the Node as the DroverConfigDrift condition plus
// a Warning Event; the condition goes back to False when the contents are
// restored. A report the API server did not accept is retried with
// provider.RetryPolicy until it is, or until a newer change replaces it. It
// runs whether or not the join succeeded: without an API client (no node
// file applied, no kubelet credentials yet) it says so once and reports on
// the console and in the status file only, until it has one. It never
// repairs: a drifted node is replaced.
func (a *Agent) Guard(ctx context.Context, period time.Duration) {
	a.watch.baselineGuard(a.env.Root)
	var cur *report
	accepted := "" // the last drift state the API server holds
	noted := fmt.Sprint([]Drift(nil))
	// What the status said when the guard took over (e.g. a refused
	// user-data, a failed join): drift adds to it, a restore brings it
	// back.
	snap := a.rec.Snapshot()
	state, base := snap.State, snap.Error
	noAPI := "" // why there is no API client, once said
	for {
		drift := a.checkAll()
		key := fmt.Sprint(drift)
		if key != noted {
			a.noteDrift(drift, state, base)
			noted = key
		}
		if key != accepted && (cur == nil || cur.key != key) {
			cur = &report{key: key, drift: drift}
		}
		wait := period
		if cur != nil {
			api, node, err := a.guardAPI()
			switch {
			case err != nil:
				if noAPI == "" {
					a.rec.Note("drift guard: not reporting to the API server (" + err.Error() + "): drift goes to the console and the status file only")
				}
				noAPI = err.Error()
			default:
				if noAPI != "" {
					a.rec.Note("drift guard: reporting to the API server from now on")
					noAPI = ""
				}
				if err := a.send(ctx, api, node, cur); err != nil {
					cur.attempt++
					wait = min(provider.RetryPolicy().Wait(cur.attempt-1, 0, rand.Float64()), period)
					a.rec.Note(fmt.Sprintf("drift report to the API server failed (attempt %d; retrying in %s): %v", cur.attempt, wait.Round(time.Millisecond), err))
				} else {
					accepted, cur = cur.key, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// guardAPI is the API client with the kubelet's credentials, or why there
// is none: provisioning may have ended before the node file was applied,
// the node named or the kubelet's certificate issued.
func (a *Agent) guardAPI() (NodeAPI, string, error) {
	switch {
	case a.node == nil:
		return nil, "", errors.New("no node file was applied")
	case a.nodeName == "":
		return nil, "", errors.New("the node has no name yet")
	case a.env.Kube == nil:
		return nil, "", errors.New("no API client")
	}
	return a.API()
}

func driftMessage(drift []Drift) string {
	parts := make([]string, len(drift))
	for i, d := range drift {
		parts[i] = d.String()
	}
	return "local change to what the node is meant to hold: " + strings.Join(parts, "; ") + " — the node is immutable; replace the instance"
}

// noteDrift records a changed drift state on the console and in the status
// file, on top of state and base (the status before the guard started).
func (a *Agent) noteDrift(drift []Drift, state, base string) {
	if len(drift) == 0 {
		a.rec.Note("DRIFT cleared: everything watched matches the applied configuration again")
		a.rec.SetState(state, base)
		return
	}
	msg := "drift: " + driftMessage(drift)
	a.rec.Note("DRIFT: " + driftMessage(drift))
	if base != "" {
		msg = base + "; " + msg
	}
	a.rec.SetState(state, msg)
}

// send delivers what of r the API server has not accepted yet.
func (a *Agent) send(ctx context.Context, api NodeAPI, node string, r *report) error {
	if !r.condSent {
		cond := kube.Condition{Type: nodecontract.ConditionConfigDrift, Status: "False", Reason: "NoDrift", Message: "everything watched matches the applied configuration"}
		if len(r.drift) > 0 {
			cond = kube.Condition{Type: nodecontract.ConditionConfigDrift, Status: "True", Reason: "LocalChange", Message: driftMessage(r.drift)}
		}
		if err := api.SetCondition(ctx, node, cond); err != nil {
			return fmt.Errorf("setting condition %s=%s: %w", nodecontract.ConditionConfigDrift, cond.Status, err)
		}
		r.condSent = true
	}
	if len(r.drift) > 0 && !r.evSent {
		n, err := api.GetNode(ctx, node)
		if err != nil {
			return fmt.Errorf("reading node %s for the event: %w", node, err)
		}
		if err := api.Event(ctx, node, n.Metadata.UID, "ConfigDrift", driftMessage(r.drift)); err != nil {
			return fmt.Errorf("posting event ConfigDrift: %w", err)
		}
		r.evSent = true
	}
	return nil
}
