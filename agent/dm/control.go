package dm

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ControlPath is where devtmpfs puts the device-mapper control node.
const ControlPath = "/dev/mapper/control"

// Control is an open device-mapper control node.
type Control struct {
	f *os.File
}

// Open opens the control node at path (normally ControlPath).
func Open(path string) (*Control, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		if errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENXIO) {
			return nil, fmt.Errorf("opening device-mapper control %s: %w (the kernel has no device-mapper: load dm_mod, or use a kernel with CONFIG_BLK_DEV_DM)", path, err)
		}
		return nil, fmt.Errorf("opening device-mapper control %s: %w", path, err)
	}
	return &Control{f: f}, nil
}

// Close closes the control node.
func (c *Control) Close() error { return c.f.Close() }

// Version returns the kernel's device-mapper interface version.
func (c *Control) Version() ([3]uint32, error) {
	h, err := c.call(unix.DM_VERSION, "DM_VERSION", Request{})
	return h.Version, err
}

// Create creates an empty device named name (with an optional uuid) and
// returns its header, whose Major/Minor give the /dev/dm-N node.
func (c *Control) Create(name, uuid string) (Header, error) {
	if err := checkName(name); err != nil {
		return Header{}, err
	}
	return c.call(unix.DM_DEV_CREATE, "DM_DEV_CREATE", Request{Name: name, UUID: uuid})
}

// Load loads targets as the inactive table of device name; readOnly makes
// the device refuse writes, which dm-verity requires anyway.
func (c *Control) Load(name string, targets []Target, readOnly bool) error {
	if err := checkName(name); err != nil {
		return err
	}
	if len(targets) == 0 {
		return fmt.Errorf("loading a table into device-mapper device %s: no targets given", name)
	}
	var flags uint32
	if readOnly {
		flags |= FlagReadOnly
	}
	_, err := c.call(unix.DM_TABLE_LOAD, "DM_TABLE_LOAD", Request{Name: name, Flags: flags, Targets: targets})
	return err
}

// Resume makes the loaded table of device name live (DM_DEV_SUSPEND without
// DM_SUSPEND_FLAG).
func (c *Control) Resume(name string) (Header, error) {
	if err := checkName(name); err != nil {
		return Header{}, err
	}
	return c.call(unix.DM_DEV_SUSPEND, "DM_DEV_SUSPEND (resume)", Request{Name: name})
}

// Remove removes device name. The kernel answers EBUSY while it is open.
func (c *Control) Remove(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	_, err := c.call(unix.DM_DEV_REMOVE, "DM_DEV_REMOVE", Request{Name: name})
	return err
}

// Status returns the header of device name (DM_DEV_STATUS); it fails with
// ENXIO when there is no such device.
func (c *Control) Status(name string) (Header, error) {
	if err := checkName(name); err != nil {
		return Header{}, err
	}
	return c.call(unix.DM_DEV_STATUS, "DM_DEV_STATUS", Request{Name: name})
}

// CreateTable creates device name, loads targets and resumes it: the three
// calls `dmsetup create --readonly` makes. If a later call fails the device
// is removed again, so a failed attempt leaves nothing behind.
func (c *Control) CreateTable(name, uuid string, targets []Target, readOnly bool) (Header, error) {
	if _, err := c.Create(name, uuid); err != nil {
		return Header{}, err
	}
	if err := c.Load(name, targets, readOnly); err != nil {
		return Header{}, errors.Join(err, c.Remove(name))
	}
	h, err := c.Resume(name)
	if err != nil {
		return Header{}, errors.Join(err, c.Remove(name))
	}
	return h, nil
}

func (c *Control) call(req uintptr, op string, r Request) (Header, error) {
	buf, err := Pack(r)
	if err != nil {
		return Header{}, fmt.Errorf("%s %s: %w", op, r.Name, err)
	}
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, c.f.Fd(), req, uintptr(unsafe.Pointer(&buf[0])))
	runtime.KeepAlive(buf)
	if errno != 0 {
		what := op
		if r.Name != "" {
			what += " " + r.Name
		}
		return Header{}, fmt.Errorf("%s: %w (see the kernel log for the device-mapper's reason)", what, errno)
	}
	h, err := Unpack(buf)
	if err != nil {
		return Header{}, fmt.Errorf("%s %s: %w", op, r.Name, err)
	}
	return h, nil
}
