package boot

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/drover-os/drover/internal/readahead"
	"golang.org/x/sys/unix"
)

// apiMount is one of the kernel's API filesystems an initrd mounts.
type apiMount struct {
	source, fstype, opts string
	flags                uintptr
	target               func(Paths) string
}

var apiMounts = []apiMount{
	{"proc", "proc", "", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, func(p Paths) string { return p.Proc }},
	{"sysfs", "sysfs", "", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, func(p Paths) string { return p.Sys }},
	{"devtmpfs", "devtmpfs", "mode=0755", unix.MS_NOSUID, func(p Paths) string { return p.Dev }},
	{"tmpfs", "tmpfs", "mode=0755", unix.MS_NOSUID | unix.MS_NODEV, func(p Paths) string { return p.Run }},
}

// mountAPI mounts /proc, /sys, /dev and /run, then opens the console and
// kernel log: until /dev exists there is nowhere to print.
func (m *Machine) mountAPI() error {
	for _, a := range apiMounts {
		if err := mountDir(a.source, a.target(m.Paths), a.fstype, a.flags, a.opts); err != nil {
			return err
		}
	}
	return m.Log.Attach(m.Paths.Dev, filepath.Join(m.Paths.Proc, "sys/kernel/printk"))
}

// mountDir creates target and mounts there. EBUSY means the kernel already
// mounted it (CONFIG_DEVTMPFS_MOUNT, or a rerun), which is what we want.
func mountDir(source, target, fstype string, flags uintptr, opts string) error {
	if err := os.MkdirAll(target, 0o755); err != nil {
		return fmt.Errorf("creating mount point %s: %w", target, err)
	}
	if err := unix.Mount(source, target, fstype, flags, opts); err != nil && !errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("mounting %s (%s) at %s: %w", source, fstype, target, err)
	}
	return nil
}

// mountRoot mounts the verity device read-only at the sysroot.
func (m *Machine) mountRoot() error {
	if err := os.MkdirAll(m.Paths.Sysroot, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", m.Paths.Sysroot, err)
	}
	if err := unix.Mount(m.rootDev, m.Paths.Sysroot, "erofs", unix.MS_RDONLY, ""); err != nil {
		return fmt.Errorf("mounting %s (erofs, read-only) at %s: %w (is the erofs module in the initrd? the kernel log says more)", m.rootDev, m.Paths.Sysroot, err)
	}
	return nil
}

// readAhead queues the reads of the config's files (readahead.Queue):
// they continue after the exec of systemd. A file that cannot be read
// ahead costs time, not correctness, so it is logged and skipped.
func (m *Machine) readAhead() error {
	var n int64
	var queued []string
	for _, p := range m.Config.ReadAhead {
		size, err := readahead.Queue(filepath.Join(m.Paths.Sysroot, p))
		if err != nil {
			m.Log.Printf("read-ahead: %s skipped: %v", p, err)
			continue
		}
		n += size
		queued = append(queued, p)
	}
	if len(queued) > 0 {
		m.Log.Printf("read-ahead: queued %s (%.1f MiB)", strings.Join(queued, " "), float64(n)/(1<<20))
	}
	return nil
}

// mountVar mounts the var partition on the image's /var.
func (m *Machine) mountVar() error {
	target := filepath.Join(m.Paths.Sysroot, "var")
	if err := isDir(target); err != nil {
		return fmt.Errorf("the image has no /var directory to mount the var partition on: %w (the recipe's finalize step must keep /var)", err)
	}
	if err := unix.Mount(m.varDev, target, "ext4", 0, ""); err != nil {
		return fmt.Errorf("mounting %s (ext4) at %s: %w (is the ext4 module in the initrd? the kernel log says more)", m.varDev, target, err)
	}
	return nil
}

// etcOverlay puts a tmpfs overlay on the image's /etc so it is writable but
// starts from the image's content at every boot.
func (m *Machine) etcOverlay() error {
	dir := filepath.Join(m.Paths.Run, "drover-etc")
	if err := mountDir("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
		return err
	}
	upper, work := filepath.Join(dir, "upper"), filepath.Join(dir, "work")
	for _, d := range []string{upper, work} {
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("creating %s: %w", d, err)
		}
	}
	etc := filepath.Join(m.Paths.Sysroot, "etc")
	if err := isDir(etc); err != nil {
		return fmt.Errorf("the image has no /etc: %w", err)
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", etc, upper, work)
	if err := unix.Mount("overlay", etc, "overlay", 0, opts); err != nil {
		return fmt.Errorf("mounting the /etc overlay (%s) at %s: %w (is the overlay module in the initrd?)", opts, etc, err)
	}
	return nil
}

// machineID keeps one identity across boots; see KeepMachineID.
func (m *Machine) machineID() error {
	id, generated, err := KeepMachineID(m.Paths.Sysroot, func() (string, error) {
		b, err := readFile(filepath.Join(m.Paths.Proc, "sys/kernel/random/uuid"))
		return string(b), err
	})
	if err != nil {
		return err
	}
	if generated {
		m.Log.Printf("machine-id: new identity %s", id)
	} else {
		m.Log.Debugf("machine-id %s", id)
	}
	return nil
}

// moveMounts moves the API filesystems into the new root, where systemd
// expects them already mounted.
func (m *Machine) moveMounts() error {
	for _, a := range apiMounts {
		src := a.target(m.Paths)
		dst := filepath.Join(m.Paths.Sysroot, src)
		if err := isDir(dst); err != nil {
			return fmt.Errorf("the image has no %s directory to move %s to: %w", src, src, err)
		}
		if err := unix.Mount(src, dst, "", unix.MS_MOVE, ""); err != nil {
			return fmt.Errorf("moving the %s mount to %s: %w", src, dst, err)
		}
	}
	return nil
}

func isDir(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", path)
	}
	return nil
}

func readFile(path string) ([]byte, error) { return os.ReadFile(path) }
