package ignition

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

func newSHA256() hash.Hash { return sha256.New() }

// txn is one apply: every change registers how to undo it, and replaced
// nodes are kept under a hidden backup name until the apply commits.
type txn struct {
	*env
	chown   bool // only root can give files away; tests run unprivileged
	undo    []func() error
	backups []string
	managed []Managed
	seq     int
}

func (t *txn) onUndo(f func() error) { t.undo = append(t.undo, f) }

// rollback undoes every change, newest first.
func (t *txn) rollback() error {
	var errs []error
	for i := len(t.undo) - 1; i >= 0; i-- {
		if err := t.undo[i](); err != nil {
			errs = append(errs, err)
		}
	}
	t.undo = nil
	return errors.Join(errs...)
}

// commit drops the backups; a backup that will not go away is reported,
// not fatal, since the config itself is in place.
func (t *txn) commit() []string {
	var warnings []string
	for _, b := range t.backups {
		if err := os.Remove(b); err != nil && !errors.Is(err, fs.ErrNotExist) {
			warnings = append(warnings, fmt.Sprintf("removing backup %s: %v", b, err))
		}
	}
	t.undo, t.backups = nil, nil
	return warnings
}

// sideName is a fresh hidden name next to abs, for temp files and backups.
func (t *txn) sideName(abs, what string) string {
	for {
		t.seq++
		p := filepath.Join(filepath.Dir(abs), fmt.Sprintf(".%s.drover-%s-%d-%d", filepath.Base(abs), what, os.Getpid(), t.seq))
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			return p
		}
	}
}

// keepOld hard-links the node at abs to a backup name before abs is
// replaced by a rename, so abs never disappears and the undo is a rename.
func (t *txn) keepOld(abs string) error {
	b := t.sideName(abs, "backup")
	if err := os.Link(abs, b); err != nil {
		return fmt.Errorf("keeping a backup of %s: %w", abs, err)
	}
	t.backups = append(t.backups, b)
	t.onUndo(func() error { return os.Rename(b, abs) })
	return nil
}

// moveAside renames the node at abs to a backup name, for a node replaced
// by one of another kind (a link replaced by a directory) or removed.
func (t *txn) moveAside(abs string) error {
	b := t.sideName(abs, "backup")
	if err := os.Rename(abs, b); err != nil {
		return fmt.Errorf("moving %s aside: %w", abs, err)
	}
	t.backups = append(t.backups, b)
	t.onUndo(func() error { return os.Rename(b, abs) })
	return nil
}

// mkdirParents creates the missing directories above p (root-owned 0755,
// as Ignition does) and remembers them for the undo.
func (t *txn) mkdirParents(p string) error {
	cur := ""
	for _, part := range strings.Split(strings.Trim(path.Dir(p), "/"), "/") {
		if part == "" {
			continue
		}
		cur += "/" + part
		if err := t.mkdir(cur, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	return nil
}

// mkdir creates one directory with an exact mode (not masked by umask).
func (t *txn) mkdir(p string, mode int) error {
	abs := t.abs(p)
	if err := os.Mkdir(abs, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return err
		}
		return fmt.Errorf("creating directory %s: %w", p, err)
	}
	t.onUndo(func() error { return os.Remove(abs) })
	if err := os.Chmod(abs, toFileMode(mode)); err != nil {
		return fmt.Errorf("setting the mode of %s: %w", p, err)
	}
	return nil
}

// owner resolves the uid and gid to set; set is false when neither is
// given and the current owner (root for a new node) stays.
func (t *txn) owner(u, g Owner, curUID, curGID int) (uid, gid int, set bool, err error) {
	uid, gid = curUID, curGID
	if id, ok, err := t.users.resolve(t.root, u); err != nil {
		return 0, 0, false, err
	} else if ok {
		uid, set = id, true
	}
	if id, ok, err := t.groups.resolve(t.root, g); err != nil {
		return 0, 0, false, err
	} else if ok {
		gid, set = id, true
	}
	return uid, gid, set, nil
}

// setOwner applies an explicit owner; undo restores the old one when the
// node existed before (a new node is removed by its own undo).
func (t *txn) setOwner(abs string, u, g Owner, curUID, curGID int, existed bool) error {
	uid, gid, set, err := t.owner(u, g, curUID, curGID)
	if err != nil {
		return err
	}
	if !set || !t.chown {
		return nil
	}
	if existed {
		t.onUndo(func() error { return os.Lchown(abs, curUID, curGID) })
	}
	if err := os.Lchown(abs, uid, gid); err != nil {
		return fmt.Errorf("changing the owner of %s to %d:%d: %w", abs, uid, gid, err)
	}
	return nil
}

// writeSynced writes a complete temp file: data, mode, owner, fsync.
func writeSynced(p string, data []byte, mode, uid, gid int, chown bool) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil && chown {
		err = f.Chown(uid, gid)
	}
	if err == nil {
		// after chown, which clears setuid/setgid bits
		err = f.Chmod(toFileMode(mode))
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// replace renames the finished temp node over abs, keeping the old node
// for the undo, then syncs the directory so the rename is durable.
func (t *txn) replace(abs, tmp string, existed bool) error {
	if existed {
		if err := t.keepOld(abs); err != nil {
			os.Remove(tmp)
			return err
		}
	}
	if err := os.Rename(tmp, abs); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("renaming %s into place: %w", abs, err)
	}
	if !existed {
		t.onUndo(func() error { return os.Remove(abs) })
	}
	return syncDir(filepath.Dir(abs))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}
