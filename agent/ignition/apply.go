package ignition

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// Applied is what an apply left on the node.
type Applied struct {
	// Managed lists every managed path as written, each file with the
	// sha256 of its contents: what the guard checks for drift.
	Managed []Managed
	// Warnings are leftovers that did not fail the apply, such as a backup
	// copy that could not be removed.
	Warnings []string
}

// Apply carries out plan under root (the node's "/"; tests pass a temp
// dir). It first checks the whole plan against the node (owners exist,
// no parent is a symlink, nothing would replace a directory) and writes
// nothing if any check fails; the error is then Problems. Each file is
// written atomically; if a step fails, everything this apply created or
// replaced is put back, so the node never holds half a config.
func Apply(plan *NodePlan, root string) (*Applied, error) {
	return apply(plan, root, applyHooks{failAt: -1, chown: os.Geteuid() == 0})
}

var errInjected = errors.New("injected failure")

// applyHooks let tests reach the paths a real node takes: failAt >= 0
// fails before that step (or after the last one when it equals the number
// of steps); chown is whether owners are set (only root can).
type applyHooks struct {
	failAt int
	chown  bool
}

func apply(plan *NodePlan, root string, h applyHooks) (*Applied, error) {
	if plan == nil {
		return nil, errors.New("applying the ignition plan: no plan")
	}
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("applying the ignition plan under %q: not a directory (%v)", root, err)
	}
	e := &env{root: root, users: &idTable{file: "/etc/passwd"}, groups: &idTable{file: "/etc/group"}, files: map[string]bool{}}
	var ps []Problem
	for _, s := range plan.Steps {
		ps = append(ps, s.check(e)...)
		if f, ok := s.(*FileStep); ok {
			e.files[f.Path] = true
		}
	}
	if len(ps) > 0 {
		return nil, Problems(ps)
	}
	t := &txn{env: e, chown: h.chown}
	for i := 0; i <= len(plan.Steps); i++ {
		var err error
		var desc, from string
		if i < len(plan.Steps) {
			desc, from = plan.Steps[i].String(), plan.Steps[i].Origin()
		}
		switch {
		case i == h.failAt:
			err = errInjected
		case i < len(plan.Steps):
			err = plan.Steps[i].apply(t)
		}
		if err == nil {
			continue
		}
		err = fmt.Errorf("applying step %d of %d (%s, from %s): %w", i+1, len(plan.Steps), desc, from, err)
		if rerr := t.rollback(); rerr != nil {
			err = errors.Join(err, fmt.Errorf("undoing the apply: %w — the node may hold part of the config; replace the instance", rerr))
		}
		return nil, err
	}
	return &Applied{Managed: t.managed, Warnings: t.commit()}, nil
}

// env is what the checks and steps know about the node.
type env struct {
	root          string
	users, groups *idTable
	files         map[string]bool // regular files the plan writes, for hard link targets
}

func (e *env) abs(p string) string { return filepath.Join(e.root, filepath.FromSlash(p)) }

// nodeKind names what is at p on the node, "" when nothing is.
func (e *env) nodeKind(p string) (fs.FileInfo, string, error) {
	fi, err := os.Lstat(e.abs(p))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, "", nil
	case err != nil:
		return nil, "", err
	case fi.Mode()&fs.ModeSymlink != 0:
		return fi, "symbolic link", nil
	case fi.IsDir():
		return fi, "directory", nil
	case fi.Mode().IsRegular():
		return fi, "regular file", nil
	}
	return fi, "special file", nil
}

// parentProblem refuses a path whose existing parent is a symlink or not a
// directory: following a link such as /var/run -> /run would write outside
// the trees the policy allows.
func (e *env) parentProblem(p string) string {
	cur := ""
	for _, part := range strings.Split(strings.Trim(path.Dir(p), "/"), "/") {
		if part == "" {
			continue
		}
		cur += "/" + part
		fi, kind, err := e.nodeKind(cur)
		switch {
		case err != nil:
			return fmt.Sprintf("cannot inspect parent %q on the node: %v", cur, err)
		case fi == nil:
			return ""
		case kind == "symbolic link":
			target, _ := os.Readlink(e.abs(cur))
			return fmt.Sprintf("parent %q is a symbolic link to %q on the node; drover writes only through real directories — use the path under the link's target instead", cur, target)
		case kind != "directory":
			return fmt.Sprintf("parent %q is a %s on the node, not a directory — choose another path", cur, kind)
		}
	}
	return ""
}

// common checks the parents and the owners of a step's path.
func (e *env) common(p, from string, u, g Owner) []Problem {
	var ps []Problem
	if msg := e.parentProblem(p); msg != "" {
		ps = append(ps, problemAt(from+".path", msg))
	}
	if _, _, err := e.users.resolve(e.root, u); err != nil {
		ps = append(ps, problemAt(from+".user.name", "user "+err.Error()))
	}
	if _, _, err := e.groups.resolve(e.root, g); err != nil {
		ps = append(ps, problemAt(from+".group.name", "group "+err.Error()))
	}
	return ps
}

func problemAt(p, msg string) Problem { return Problem{Path: p, Message: msg, offset: -1} }

func (s *MkdirStep) check(e *env) []Problem {
	ps := e.common(s.Path, s.From, s.User, s.Group)
	_, kind, err := e.nodeKind(s.Path)
	switch {
	case err != nil:
		ps = append(ps, problemAt(s.From+".path", fmt.Sprintf("cannot inspect %q on the node: %v", s.Path, err)))
	case kind == "", kind == "directory":
	case !s.Overwrite:
		ps = append(ps, problemAt(s.From+".path", fmt.Sprintf("%q exists on the node as a %s, not a directory; set overwrite: true to replace it", s.Path, kind)))
	}
	return ps
}

func (s *FileStep) check(e *env) []Problem {
	ps := e.common(s.Path, s.From, s.User, s.Group)
	_, kind, err := e.nodeKind(s.Path)
	switch {
	case err != nil:
		ps = append(ps, problemAt(s.From+".path", fmt.Sprintf("cannot inspect %q on the node: %v", s.Path, err)))
	case kind == "directory":
		ps = append(ps, problemAt(s.From+".path", fmt.Sprintf("%q is a directory on the node; a file cannot replace it — choose another path", s.Path)))
	case kind != "" && kind != "regular file" && (!s.Overwrite || s.Keep):
		ps = append(ps, problemAt(s.From+".path", fmt.Sprintf("%q exists on the node as a %s; give contents and set overwrite: true to replace it", s.Path, kind)))
	}
	return ps
}

func (s *LinkStep) check(e *env) []Problem {
	ps := e.common(s.Path, s.From, s.User, s.Group)
	fi, kind, err := e.nodeKind(s.Path)
	switch {
	case err == nil && s.sameFile(e, fi, kind):
		// already the hard link it should be (a re-apply on /var)
	case err != nil:
		ps = append(ps, problemAt(s.From+".path", fmt.Sprintf("cannot inspect %q on the node: %v", s.Path, err)))
	case kind == "directory":
		ps = append(ps, problemAt(s.From+".path", fmt.Sprintf("%q is a directory on the node; a link cannot replace it — choose another path", s.Path)))
	case kind != "" && kind != "symbolic link" && !s.Overwrite:
		ps = append(ps, problemAt(s.From+".path", fmt.Sprintf("%q exists on the node as a %s; set overwrite: true to replace it", s.Path, kind)))
	}
	if s.Hard && !e.files[s.Target] {
		if _, tk, _ := e.nodeKind(s.Target); tk != "regular file" || e.parentProblem(s.Target) != "" {
			ps = append(ps, problemAt(s.From+".target", fmt.Sprintf("hard link target %q is not a regular file on the node or in the config — write it in storage.files first or fix the target", s.Target)))
		}
	}
	return ps
}

// sameFile reports whether the node at the path is already the hard link
// to the target.
func (s *LinkStep) sameFile(e *env, fi fs.FileInfo, kind string) bool {
	if !s.Hard || kind != "regular file" {
		return false
	}
	tfi, err := os.Lstat(e.abs(s.Target))
	return err == nil && os.SameFile(fi, tfi)
}

func (s *DisableStep) check(*env) []Problem { return nil }

// toFileMode converts POSIX mode bits to Go's, whose setuid, setgid and
// sticky flags are not the POSIX bits.
func toFileMode(m int) fs.FileMode {
	res := fs.FileMode(m & 0o777)
	if m&0o4000 != 0 {
		res |= fs.ModeSetuid
	}
	if m&0o2000 != 0 {
		res |= fs.ModeSetgid
	}
	if m&0o1000 != 0 {
		res |= fs.ModeSticky
	}
	return res
}

// ModeBits is the octal mode chmod(1) would show for m (the permission
// bits with setuid, setgid and sticky), as Ignition's mode fields hold it.
func ModeBits(m fs.FileMode) int {
	res := int(m.Perm())
	if m&fs.ModeSetuid != 0 {
		res |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		res |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		res |= 0o1000
	}
	return res
}

func ownerOf(fi fs.FileInfo) (int, int) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid), int(st.Gid)
	}
	return 0, 0
}

// digestFile hashes a file without holding it in memory.
func digestFile(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := newSHA256()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return fmt.Sprintf("%x", h.Sum(nil)), nil
}
