package boot

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/drover-os/drover/agent/dm"
	"github.com/drover-os/drover/image/verity"
	"golang.org/x/sys/unix"
)

// verityName is the device-mapper name of the root, /dev/mapper/root in
// the booted system's terms.
const verityName = "root"

// corruptionPolicy is what dm-verity does on a block that fails its hash.
// restart_on_corruption, not panic_on_corruption: a panic reboots only if
// the command line sets panic=N and otherwise hangs the node forever, while
// a restart always brings it back (the kernel log line naming the bad block
// is on the serial console first). A node that keeps failing then shows a
// boot loop the scaling group's health check replaces.
const corruptionPolicy = "restart_on_corruption"

// VerityTarget returns the device-mapper target of the root: the table
// line comes from verity.Table with devices given as major:minor, which
// the kernel resolves without needing a /dev node. opts are the optional
// verity parameters (the boot passes corruptionPolicy).
func VerityTarget(c *Config, data, hash BlockDevice, opts ...string) (dm.Target, error) {
	r, err := c.VerityResult()
	if err != nil {
		return dm.Target{}, err
	}
	return dm.Target{
		Start:  0,
		Length: r.DataSectors(),
		Type:   "verity",
		Params: verity.Table(devNumber(data), devNumber(hash), r, opts...),
	}, nil
}

func devNumber(d BlockDevice) string { return fmt.Sprintf("%d:%d", d.Major, d.Minor) }

// setupVerity creates the dm-verity device over the root and root-verity
// partitions and makes sure its node exists.
func (m *Machine) setupVerity() error {
	t, err := VerityTarget(m.Config, m.parts.Root, m.parts.Verity, corruptionPolicy)
	if err != nil {
		return err
	}
	m.Log.Debugf("dm table: %s", t)
	ctl, err := openControl(m.Paths)
	if err != nil {
		return err
	}
	defer ctl.Close()
	h, err := ctl.CreateTable(verityName, "", []dm.Target{t}, true)
	if err != nil {
		return fmt.Errorf("creating dm-verity device %s over %s and %s: %w (is dm-verity in the initrd's modules? the kernel log says more)",
			verityName, m.parts.Root.Name, m.parts.Verity.Name, err)
	}
	dev := BlockDevice{Name: fmt.Sprintf("dm-%d", h.Minor()), DevName: fmt.Sprintf("dm-%d", h.Minor()), Major: h.Major(), Minor: h.Minor()}
	node, err := ensureNode(m.Paths.Dev, dev)
	if err != nil {
		return err
	}
	m.rootDev = node
	m.Log.Debugf("verity device %s is %s (%d:%d)", verityName, node, h.Major(), h.Minor())
	return nil
}

// openControl opens /dev/mapper/control, creating the node from sysfs
// (/sys/class/misc/device-mapper/dev) when devtmpfs has not.
func openControl(p Paths) (*dm.Control, error) {
	path := filepath.Join(p.Dev, "mapper", "control")
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		b, rerr := os.ReadFile(filepath.Join(p.Sys, "class", "misc", "device-mapper", "dev"))
		if rerr != nil {
			return nil, fmt.Errorf("the kernel has no device-mapper (%w): add dm_mod and dm_verity to the initrd's modules", rerr)
		}
		major, minor, ok := strings.Cut(strings.TrimSpace(string(b)), ":")
		ma, err1 := strconv.ParseUint(major, 10, 32)
		mi, err2 := strconv.ParseUint(minor, 10, 32)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("device-mapper's sysfs dev %q is not major:minor", b)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
		}
		if err := unix.Mknod(path, unix.S_IFCHR|0o600, int(unix.Mkdev(uint32(ma), uint32(mi)))); err != nil && !errors.Is(err, unix.EEXIST) {
			return nil, fmt.Errorf("creating %s: %w", path, err)
		}
	}
	return dm.Open(path)
}
