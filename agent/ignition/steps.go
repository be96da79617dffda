package ignition

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// The apply half of each step; the checks are in apply.go.

func (s *MkdirStep) apply(t *txn) error {
	abs := t.abs(s.Path)
	fi, kind, err := t.nodeKind(s.Path)
	if err != nil {
		return err
	}
	if err := t.mkdirParents(s.Path); err != nil {
		return err
	}
	if kind != "" && kind != "directory" {
		if err := t.moveAside(abs); err != nil {
			return err
		}
		kind, fi = "", nil
	}
	curUID, curGID := 0, 0
	if kind == "" {
		mode := 0o755
		if s.Mode != nil {
			mode = *s.Mode
		}
		if err := t.mkdir(s.Path, mode); err != nil {
			return err
		}
	} else {
		curUID, curGID = ownerOf(fi)
		oldMode := fi.Mode()
		if s.Mode != nil {
			t.onUndo(func() error { return os.Chmod(abs, oldMode&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)) })
			if err := os.Chmod(abs, toFileMode(*s.Mode)); err != nil {
				return fmt.Errorf("setting the mode of %s: %w", s.Path, err)
			}
		}
	}
	if err := t.setOwner(abs, s.User, s.Group, curUID, curGID, kind != ""); err != nil {
		return err
	}
	t.managed = append(t.managed, Managed{Path: s.Path, Kind: "directory"})
	return nil
}

func (s *FileStep) apply(t *txn) error {
	abs := t.abs(s.Path)
	if err := t.mkdirParents(s.Path); err != nil {
		return err
	}
	fi, kind, err := t.nodeKind(s.Path)
	if err != nil {
		return err
	}
	if s.Keep && kind == "regular file" && len(s.Append) == 0 {
		return s.keepInPlace(t, abs, fi)
	}
	data, mode, uid, gid := s.Contents, 0o644, 0, 0
	if s.Keep {
		data = s.Append
		if kind == "regular file" {
			old, err := os.ReadFile(abs)
			if err != nil {
				return fmt.Errorf("reading %s to append to it: %w", s.Path, err)
			}
			data = append(old, s.Append...)
			mode = ModeBits(fi.Mode())
			uid, gid = ownerOf(fi)
		}
	}
	if s.Mode != nil {
		mode = *s.Mode
	}
	uid, gid, set, err := t.owner(s.User, s.Group, uid, gid)
	if err != nil {
		return err
	}
	tmp := t.sideName(abs, "new")
	if err := writeSynced(tmp, data, mode, uid, gid, set && t.chown); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", s.Path, err)
	}
	if err := t.replace(abs, tmp, kind != ""); err != nil {
		return err
	}
	t.managed = append(t.managed, Managed{Path: s.Path, Kind: "file", SHA256: digest(data)})
	return nil
}

// keepInPlace handles a file the config only asks to exist: its contents
// stay, its mode and owner are set if given.
func (s *FileStep) keepInPlace(t *txn, abs string, fi fs.FileInfo) error {
	if s.Mode != nil {
		old := fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
		t.onUndo(func() error { return os.Chmod(abs, old) })
		if err := os.Chmod(abs, toFileMode(*s.Mode)); err != nil {
			return fmt.Errorf("setting the mode of %s: %w", s.Path, err)
		}
	}
	uid, gid := ownerOf(fi)
	if err := t.setOwner(abs, s.User, s.Group, uid, gid, true); err != nil {
		return err
	}
	sum, err := digestFile(abs)
	if err != nil {
		return fmt.Errorf("hashing %s: %w", s.Path, err)
	}
	t.managed = append(t.managed, Managed{Path: s.Path, Kind: "file", SHA256: sum})
	return nil
}

func (s *LinkStep) apply(t *txn) error {
	abs := t.abs(s.Path)
	if err := t.mkdirParents(s.Path); err != nil {
		return err
	}
	fi, kind, err := t.nodeKind(s.Path)
	if err != nil {
		return err
	}
	kindName := "symlink"
	if s.Hard {
		kindName = "hardlink"
	}
	m := Managed{Path: s.Path, Kind: kindName, Target: s.Target}
	if s.unchanged(t, abs, fi, kind) {
		t.managed = append(t.managed, m)
		return nil
	}
	tmp := t.sideName(abs, "new")
	if s.Hard {
		err = os.Link(t.abs(s.Target), tmp)
	} else {
		err = os.Symlink(s.Target, tmp)
	}
	if err != nil {
		return fmt.Errorf("creating %s %s -> %s: %w", kindName, s.Path, s.Target, err)
	}
	// Ignition ignores the owner of a hard link (it is the target's).
	if !s.Hard {
		if err := t.setOwner(tmp, s.User, s.Group, 0, 0, false); err != nil {
			os.Remove(tmp)
			return err
		}
	}
	if err := t.replace(abs, tmp, kind != ""); err != nil {
		return err
	}
	t.managed = append(t.managed, m)
	return nil
}

// unchanged reports whether the link is already what the plan wants,
// which is the usual case for /var on every boot after the first.
func (s *LinkStep) unchanged(t *txn, abs string, fi fs.FileInfo, kind string) bool {
	if s.Hard {
		return s.sameFile(t.env, fi, kind)
	}
	if kind != "symbolic link" {
		return false
	}
	cur, err := os.Readlink(abs)
	return err == nil && path.Clean(cur) == path.Clean(s.Target)
}

func (s *DisableStep) apply(t *txn) error {
	dir := t.abs(systemdDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("listing %s to disable %s: %w", systemdDir, s.Unit, err)
	}
	for _, e := range entries {
		if !e.IsDir() || !(strings.HasSuffix(e.Name(), ".wants") || strings.HasSuffix(e.Name(), ".requires")) {
			continue
		}
		link := filepath.Join(dir, e.Name(), s.Unit)
		if fi, err := os.Lstat(link); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			if err := t.moveAside(link); err != nil {
				return fmt.Errorf("disabling %s: %w", s.Unit, err)
			}
		}
	}
	return nil
}
