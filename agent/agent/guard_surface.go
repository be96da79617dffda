package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/drover-os/drover/agent/status"
	"github.com/drover-os/drover/agent/units"
)

// The protected surface the guard checks beside the config's own paths
// (docs/agent.md, "Drift guard"): what the node's guarantees rest on, as
// the node held it when the agent took its baseline. Where it cannot be
// known as a list of paths (a directory gains an entry, a unit gains a
// drop-in in one of systemd's search directories) the guard compares
// snapshots: every entry of the baseline, and every entry the surface
// selects now that the baseline did not have.

// Surface says what one snapshot covers; paths are absolute under the
// agent's root.
type Surface struct {
	// Files are watched one by one.
	Files []string
	// Trees are directories watched with everything below them.
	Trees []string
	// Skip are paths inside Trees the node rewrites by design.
	Skip []string
	// UnitDirs are systemd's writable unit search directories; in each,
	// the files, aliases and drop-in directories of Units are watched.
	UnitDirs []string
	// AliasDirs are read-only unit directories read only for aliases of
	// Units (a name linked to one of them), whose drop-ins apply to it.
	AliasDirs []string
	Units     []string
}

// Accounts are the account files and their backups.
var Accounts = []string{"/etc/passwd", "/etc/shadow", "/etc/group", "/etc/gshadow",
	"/etc/passwd-", "/etc/shadow-", "/etc/group-", "/etc/gshadow-"}

// UnitSearchDirs are where systemd looks for units and drop-ins outside
// the read-only image: the admin's, systemctl set-property's and
// systemd-run's directories, their runtime twins and the generators'.
var UnitSearchDirs = []string{
	"/etc/systemd/system.control", "/run/systemd/system.control", "/run/systemd/transient",
	"/run/systemd/generator.early", "/etc/systemd/system", "/etc/systemd/system.attached",
	"/run/systemd/system", "/run/systemd/system.attached", "/run/systemd/generator",
	"/run/systemd/generator.late",
}

// GuardedUnits are the units whose files and drop-ins the guard watches:
// those the node's guarantees rest on (the agent's own, agent/units; the
// kubelet; containerd) and the two the agent starts itself for names and
// time (the API server's certificate is checked against the clock).
func GuardedUnits() []string {
	out := []string{"kubelet.service", "containerd.service", ResolvedUnit, TimesyncdUnit}
	ents, _ := units.FS.ReadDir(".")
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "drover-") {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// NodeSurface is the baseline taken once the config is applied (before
// systemd reloads and the boot services run again on its files): the
// accounts, sudo, PAM and the protected units.
var NodeSurface = Surface{
	Files:     append(append([]string(nil), Accounts...), "/etc/sudoers"),
	Trees:     []string{"/etc/sudoers.d", "/etc/pam.d", "/etc/security"},
	UnitDirs:  UnitSearchDirs,
	AliasDirs: []string{"/usr/lib/systemd/system"},
	Units:     GuardedUnits(),
}

// StateSurface is the agent's own state, as the agent left it when
// provisioning ended (the redaction of the token rewrites it during the
// join); the status copy is rewritten at every change of the status.
var StateSurface = Surface{Trees: []string{StateDir}, Skip: []string{status.LastBootPath}}

// Entry is one path of a snapshot.
type Entry struct {
	Mode     fs.FileMode
	UID, GID uint32
	// SHA256 is a regular file's contents or, for a symbolic link, those
	// of the regular file it resolves to (empty: none).
	SHA256 string
	Target string // a symbolic link's
}

func (e Entry) String() string {
	if e.Mode&fs.ModeSymlink != 0 {
		return "symlink -> " + e.Target
	}
	return typeName(e.Mode)
}

// Snapshot maps each path of a surface to its entry.
type Snapshot map[string]Entry

// hasher hashes files, again only when one's inode, size, mtime or ctime
// changed (ctime follows every write and cannot be set back): the guard
// stats its few dozen files every period and reads few.
type hasher struct {
	mu   sync.Mutex
	seen map[string]hashed
}

type hashed struct {
	dev, ino          uint64
	size              int64
	mtime, ctime, sum string
}

// sum returns the hex sha256 of the regular file at p (fi: its stat), ""
// if it cannot be read.
func (h *hasher) sum(p string, fi fs.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	var key hashed
	if ok {
		key = hashed{dev: uint64(st.Dev), ino: st.Ino, size: fi.Size(),
			mtime: fmt.Sprint(st.Mtim.Sec, st.Mtim.Nsec), ctime: fmt.Sprint(st.Ctim.Sec, st.Ctim.Nsec)}
		h.mu.Lock()
		old, hit := h.seen[p]
		h.mu.Unlock()
		if hit && old.dev == key.dev && old.ino == key.ino && old.size == key.size && old.mtime == key.mtime && old.ctime == key.ctime {
			return old.sum
		}
	}
	f, err := os.Open(p)
	if err != nil {
		return ""
	}
	defer f.Close()
	s := sha256.New()
	if _, err := io.Copy(s, f); err != nil {
		return ""
	}
	key.sum = hex.EncodeToString(s.Sum(nil))
	if ok {
		h.mu.Lock()
		if h.seen == nil {
			h.seen = map[string]hashed{}
		}
		h.seen[p] = key
		h.mu.Unlock()
	}
	return key.sum
}

// Take records the surface under root.
func (s Surface) Take(root string, h *hasher) Snapshot {
	snap := Snapshot{}
	for _, p := range s.Files {
		s.record(root, p, snap, h, false)
	}
	for _, p := range s.Trees {
		s.record(root, p, snap, h, true)
	}
	s.takeUnits(root, snap, h)
	return snap
}

// record adds p (and, in a tree, what is below it) to snap; a missing
// path is left out, so that it appearing later is new.
func (s Surface) record(root, p string, snap Snapshot, h *hasher, tree bool) {
	for _, skip := range s.Skip {
		if p == skip {
			return
		}
	}
	fi, err := os.Lstat(root + p)
	if err != nil {
		return
	}
	e := Entry{Mode: fi.Mode()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.UID, e.GID = st.Uid, st.Gid
	}
	switch {
	case fi.Mode().IsRegular():
		e.SHA256 = h.sum(root+p, fi)
	case fi.Mode()&fs.ModeSymlink != 0:
		e.Target, _ = os.Readlink(root + p)
		t := e.Target
		if !path.IsAbs(t) {
			t = path.Join(path.Dir(p), t)
		}
		if tfi, err := os.Stat(root + t); err == nil && tfi.Mode().IsRegular() {
			e.SHA256 = h.sum(root+t, tfi)
		}
	}
	snap[p] = e
	if !tree || !fi.IsDir() {
		return
	}
	ents, err := os.ReadDir(root + p)
	if err != nil {
		return
	}
	for _, d := range ents {
		s.record(root, path.Join(p, d.Name()), snap, h, true)
	}
}

// takeUnits records, in each unit directory, what applies to a protected
// unit: its file (or mask, or link), a link that makes another name an
// alias of it, and the drop-in directories of every such name: "<name>.d",
// the dash-prefix ones ("drover-.service.d" applies to every drover-*
// service) and "service.d" (every service).
func (s Surface) takeUnits(root string, snap Snapshot, h *hasher) {
	if len(s.Units) == 0 {
		return
	}
	names := map[string]bool{}
	for _, u := range s.Units {
		names[u] = true
	}
	listed := map[string][]os.DirEntry{}
	for _, d := range append(append([]string(nil), s.AliasDirs...), s.UnitDirs...) {
		ents, _ := os.ReadDir(root + d)
		listed[d] = ents
		for _, e := range ents {
			if e.Type()&fs.ModeSymlink == 0 || names[e.Name()] {
				continue
			}
			if t, err := os.Readlink(root + path.Join(d, e.Name())); err == nil && names[path.Base(t)] {
				names[e.Name()] = true // an alias: its drop-ins apply too
			}
		}
	}
	dropins := map[string]bool{"service.d": true}
	for n := range names {
		dropins[n+".d"] = true
		stem, suffix, _ := strings.Cut(n, ".")
		for i := range len(stem) {
			if stem[i] == '-' {
				dropins[stem[:i+1]+"."+suffix+".d"] = true
			}
		}
	}
	for _, d := range s.UnitDirs {
		for _, e := range listed[d] {
			if names[e.Name()] || dropins[e.Name()] {
				s.record(root, path.Join(d, e.Name()), snap, h, true)
			}
		}
	}
}

// Compare returns what changed from base to now: each path missing,
// changed (type, link target, contents, mode, owner) or new. Paths in
// skip are left out (the config's own paths: CheckDrift checks them
// against the agent's record).
func Compare(base, now Snapshot, skip map[string]bool) []Drift {
	var out []Drift
	for p, b := range base {
		if skip[p] {
			continue
		}
		n, ok := now[p]
		if !ok {
			out = append(out, Drift{p, "presence", "present", "missing"})
			continue
		}
		if b.Mode.Type() != n.Mode.Type() {
			out = append(out, Drift{p, "type", b.String(), n.String()})
			continue
		}
		if b.Target != n.Target {
			out = append(out, Drift{p, "link", "-> " + b.Target, "-> " + n.Target})
		}
		if b.SHA256 != n.SHA256 {
			out = append(out, Drift{p, "contents", orNone(b.SHA256), orNone(n.SHA256)})
		}
		if b.Mode.Type() != fs.ModeSymlink && permBits(b.Mode) != permBits(n.Mode) {
			out = append(out, Drift{p, "mode", modeString(b.Mode), modeString(n.Mode)})
		}
		if b.UID != n.UID || b.GID != n.GID {
			out = append(out, Drift{p, "owner", fmt.Sprintf("%d:%d", b.UID, b.GID), fmt.Sprintf("%d:%d", n.UID, n.GID)})
		}
	}
	for p, n := range now {
		if _, ok := base[p]; !ok && !skip[p] {
			out = append(out, Drift{p, "presence", "absent", n.String()})
		}
	}
	return out
}

func orNone(sum string) string {
	if sum == "" {
		return "unreadable"
	}
	return sum
}

func permBits(m fs.FileMode) fs.FileMode {
	return m.Perm() | m&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)
}
