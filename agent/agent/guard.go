package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/drover-os/drover/agent/ignition"
	"github.com/drover-os/drover/agent/kube"
	"github.com/drover-os/drover/agent/provider"
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

// Guard re-checks the watched paths every period and reports each change
// once: on the console (and so the journal), in the status file, and on the
// Node as the DroverConfigDrift condition plus a Warning Event; the
// condition goes back to False when the contents are restored. A report the
// API server did not accept is retried with provider.Backoff until it is,
// or until a newer change replaces it. It never repairs: a drifted node is
// replaced.
func (a *Agent) Guard(ctx context.Context, period time.Duration) {
	var cur *report
	accepted := "" // the last drift state the API server holds
	noted := fmt.Sprint([]Drift(nil))
	// What the status said when the guard took over (e.g. a refused
	// user-data): drift adds to it, a restore brings it back.
	base := a.rec.Snapshot().Error
	for {
		drift := CheckDrift(a.env.Root, a.watch.list())
		key := fmt.Sprint(drift)
		if key != noted {
			a.noteDrift(drift, base)
			noted = key
		}
		if key != accepted && (cur == nil || cur.key != key) {
			cur = &report{key: key, drift: drift}
		}
		wait := period
		if cur != nil {
			if err := a.send(ctx, cur); err != nil {
				cur.attempt++
				wait = min(provider.Backoff(cur.attempt, rand.Float64()), period)
				a.rec.Note(fmt.Sprintf("drift report to the API server failed (attempt %d; retrying in %s): %v", cur.attempt, wait.Round(time.Millisecond), err))
			} else {
				accepted, cur = cur.key, nil
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

func driftMessage(drift []Drift) string {
	parts := make([]string, len(drift))
	for i, d := range drift {
		parts[i] = d.String()
	}
	return "local change to what the node is meant to hold: " + strings.Join(parts, "; ") + " — the node is immutable; replace the instance"
}

// noteDrift records a changed drift state on the console and in the status
// file, on top of base (the status error before the guard started).
func (a *Agent) noteDrift(drift []Drift, base string) {
	if len(drift) == 0 {
		a.rec.Note("DRIFT cleared: everything watched matches the applied configuration again")
		a.rec.SetState("joined", base)
		return
	}
	msg := "drift: " + driftMessage(drift)
	a.rec.Note("DRIFT: " + driftMessage(drift))
	if base != "" {
		msg = base + "; " + msg
	}
	a.rec.SetState("joined", msg)
}

// send delivers what of r the API server has not accepted yet.
func (a *Agent) send(ctx context.Context, r *report) error {
	api, node, err := a.API()
	if err != nil {
		return err
	}
	if !r.condSent {
		cond := kube.Condition{Type: "DroverConfigDrift", Status: "False", Reason: "NoDrift", Message: "everything watched matches the applied configuration"}
		if len(r.drift) > 0 {
			cond = kube.Condition{Type: "DroverConfigDrift", Status: "True", Reason: "LocalChange", Message: driftMessage(r.drift)}
		}
		if err := api.SetCondition(ctx, node, cond); err != nil {
			return fmt.Errorf("setting condition DroverConfigDrift=%s: %w", cond.Status, err)
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
