package boot

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// initCandidates are the programs switch-root starts, first found wins.
var initCandidates = []string{"/usr/lib/systemd/systemd", "/lib/systemd/systemd", "/sbin/init"}

// Filesystem magics of an initramfs root (linux/magic.h).
const (
	ramfsMagic = 0x858458f6
	tmpfsMagic = 0x01021994
)

// switchRoot does what busybox switch_root does: free the initrd's memory
// by deleting its files (never crossing into a mount), make the sysroot
// the root, and exec the init system as PID 1. It returns only on failure.
func (m *Machine) switchRoot() error {
	initPath, err := findInit(m.Paths.Sysroot)
	if err != nil {
		return err
	}
	var st unix.Statfs_t
	if err := unix.Statfs("/", &st); err != nil {
		return fmt.Errorf("statfs /: %w", err)
	}
	if st.Type != ramfsMagic && st.Type != tmpfsMagic {
		return fmt.Errorf("/ is not an initramfs (filesystem magic %#x): refusing to delete its files", st.Type)
	}
	if err := DeleteTree("/"); err != nil {
		// Memory stays in use, nothing worse: note it and go on.
		m.Log.Printf("switch-root: cleaning the initrd: %v", err)
	}
	if err := os.Chdir(m.Paths.Sysroot); err != nil {
		return fmt.Errorf("chdir %s: %w", m.Paths.Sysroot, err)
	}
	if err := unix.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("moving %s to /: %w", m.Paths.Sysroot, err)
	}
	if err := unix.Chroot("."); err != nil {
		return fmt.Errorf("chroot into the new root: %w", err)
	}
	if err := os.Chdir("/"); err != nil {
		return fmt.Errorf("chdir / in the new root: %w", err)
	}
	m.Log.Printf("exec %s (+%.3fs)", initPath, m.Log.Elapsed().Seconds())
	// systemd decides it is the system manager from getpid() == 1, not from
	// argv[0]; it gets its own path, as the kernel would pass it, and the
	// kernel's environment, and no extra arguments.
	err = unix.Exec(initPath, []string{initPath}, os.Environ())
	return fmt.Errorf("exec %s: %w", initPath, err)
}

// findInit returns the first init candidate the new root has, as a path
// inside it.
func findInit(root string) (string, error) {
	for _, c := range initCandidates {
		fi, err := os.Stat(filepath.Join(root, c))
		if err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return c, nil
		}
	}
	return "", fmt.Errorf("the image has none of %v: add systemd to the recipe", initCandidates)
}

// DeleteTree removes everything under dir that is on dir's filesystem,
// leaving mount points and whatever is mounted on them alone, and keeps dir
// itself.
func DeleteTree(dir string) error {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("lstat %s: %w", dir, err)
	}
	return deleteBelow(dir, st.Dev)
}

func deleteBelow(dir string, dev uint64) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("listing %s: %w", dir, err)
	}
	var first error
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			continue
		}
		if st.Dev != dev {
			continue // a mount point: not ours to delete
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			if err := deleteBelow(p, dev); err != nil && first == nil {
				first = err
			}
			if err := unix.Rmdir(p); err != nil && first == nil && !isMountBusy(err) {
				first = fmt.Errorf("removing %s: %w", p, err)
			}
			continue
		}
		if err := unix.Unlink(p); err != nil && first == nil {
			first = fmt.Errorf("removing %s: %w", p, err)
		}
	}
	return first
}

// isMountBusy reports the error of removing a directory that still holds
// a mount somewhere below it, which is expected and harmless.
func isMountBusy(err error) bool { return err == unix.EBUSY || err == unix.ENOTEMPTY }
