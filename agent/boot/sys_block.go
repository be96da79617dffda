package boot

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ScanBlockDevices reads every entry of sysBlock (/sys/class/block).
// Entries that vanish or do not parse while being read are skipped: the
// caller polls, and a half-registered device is complete on the next scan.
func ScanBlockDevices(sysBlock string) ([]BlockDevice, error) {
	entries, err := os.ReadDir(sysBlock)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", sysBlock, err)
	}
	var devs []BlockDevice
	for _, e := range entries {
		ue, err := os.ReadFile(filepath.Join(sysBlock, e.Name(), "uevent"))
		if err != nil {
			continue
		}
		link, err := os.Readlink(filepath.Join(sysBlock, e.Name()))
		if err != nil {
			continue
		}
		d, err := NewBlockDevice(e.Name(), ue, link)
		if err != nil {
			continue
		}
		devs = append(devs, d)
	}
	return devs, nil
}

// waitPartitions polls sysfs until the root and root-verity partitions are
// there, bounded by PartitionWait: the disk driver probes asynchronously
// after its module loads.
func (m *Machine) waitPartitions() error {
	deadline := time.Now().Add(PartitionWait)
	var devs []BlockDevice
	for {
		var err error
		devs, err = ScanBlockDevices(m.Paths.sysBlock())
		if err != nil {
			return err
		}
		m.fillPartUUIDs(devs)
		p, done, err := MatchBootPartitions(devs, m.Config.RootPartUUID, m.Config.VerityPartUUID)
		if err != nil {
			return err
		}
		if done {
			m.parts = p
			m.Log.Debugf("root %s, root-verity %s on disk %s", p.Root, p.Verity, p.Root.Disk)
			return nil
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(pollInterval)
	}
	return fmt.Errorf("no partitions with PARTUUID %s (root) and %s (root-verity) after %s; block devices: %s: check that the disk driver (virtio_blk, nvme) is in the initrd's modules and that the boot disk is this image",
		m.Config.RootPartUUID, m.Config.VerityPartUUID, PartitionWait, DescribeDevices(devs))
}

// fillPartUUIDs reads the GPT of every disk whose partitions' uevents lack
// PARTUUID. A disk that cannot be read is left as it is: it may be
// another disk, and a boot disk that stays unreadable ends in the
// partitions step's timeout, which lists what was seen.
func (m *Machine) fillPartUUIDs(devs []BlockDevice) {
	for _, name := range NeedsGPT(devs) {
		for _, d := range devs {
			if d.Name != name || d.DevType != "disk" {
				continue
			}
			parts, err := readDiskPartitions(m.Paths.Dev, d)
			if err != nil {
				m.Log.Debugf("reading the GPT of %s: %v", name, err)
				continue
			}
			FillFromGPT(devs, name, parts)
		}
	}
}

func readDiskPartitions(devDir string, disk BlockDevice) ([]GPTPartition, error) {
	node, err := ensureNode(devDir, disk)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(node)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, ss, err := DiskGeometry(f)
	if err != nil {
		return nil, err
	}
	return ReadPartitions(f, size, ss)
}

// ensureNode returns the /dev node of d, creating it when devtmpfs has not.
func ensureNode(dev string, d BlockDevice) (string, error) {
	path := filepath.Join(dev, d.DevName)
	fi, err := os.Stat(path)
	if err == nil {
		if fi.Mode()&fs.ModeDevice == 0 {
			return "", fmt.Errorf("%s exists but is not a device node", path)
		}
		return path, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("checking %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
	}
	if err := unix.Mknod(path, unix.S_IFBLK|0o600, int(unix.Mkdev(d.Major, d.Minor))); err != nil && !errors.Is(err, unix.EEXIST) {
		return "", fmt.Errorf("creating device node %s (%d:%d): %w", path, d.Major, d.Minor, err)
	}
	return path, nil
}

// partitionGeometry reads a partition's start and size in bytes from sysfs,
// which counts in 512-byte sectors whatever the disk's sector size.
func partitionGeometry(sysBlock, name string) (start, size int64, err error) {
	read := func(f string) (int64, error) {
		b, err := os.ReadFile(filepath.Join(sysBlock, name, f))
		if err != nil {
			return 0, err
		}
		return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	}
	if start, err = read("start"); err != nil {
		return 0, 0, fmt.Errorf("reading the start of %s: %w", name, err)
	}
	if size, err = read("size"); err != nil {
		return 0, 0, fmt.Errorf("reading the size of %s: %w", name, err)
	}
	return start * 512, size * 512, nil
}

// DiskGeometry returns the size in bytes and the logical sector size of an
// open whole-disk device, or of a regular file standing in for one (512).
func DiskGeometry(f *os.File) (size int64, sectorSize int, err error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, 0, fmt.Errorf("stat %s: %w", f.Name(), err)
	}
	if fi.Mode().IsRegular() {
		return fi.Size(), 512, nil
	}
	var n uint64
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.BLKGETSIZE64, uintptr(unsafe.Pointer(&n))); errno != 0 {
		return 0, 0, fmt.Errorf("BLKGETSIZE64 on %s: %w", f.Name(), errno)
	}
	ss, err := unix.IoctlGetInt(int(f.Fd()), unix.BLKSSZGET)
	if err != nil {
		return 0, 0, fmt.Errorf("BLKSSZGET on %s: %w", f.Name(), err)
	}
	return int64(n), ss, nil
}

// RereadPartitions asks the kernel to re-read the whole disk's table
// (BLKRRPART). It fails with EBUSY while any partition is in use.
func RereadPartitions(disk *os.File) error {
	if err := unix.IoctlSetInt(int(disk.Fd()), unix.BLKRRPART, 0); err != nil {
		return fmt.Errorf("BLKRRPART on %s: %w", disk.Name(), err)
	}
	return nil
}

// AddPartition tells the kernel about one partition (BLKPG_ADD_PARTITION),
// which works while other partitions of the disk are busy.
func AddPartition(disk *os.File, number int, start, size int64) error {
	p := unix.BlkpgPartition{Start: start, Length: size, Pno: int32(number)}
	arg := unix.BlkpgIoctlArg{
		Op:      unix.BLKPG_ADD_PARTITION,
		Datalen: int32(unsafe.Sizeof(p)),
		Data:    (*byte)(unsafe.Pointer(&p)),
	}
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, disk.Fd(), unix.BLKPG, uintptr(unsafe.Pointer(&arg))); errno != 0 {
		return fmt.Errorf("BLKPG_ADD_PARTITION %d (%d bytes at %d) on %s: %w", number, size, start, disk.Name(), errno)
	}
	return nil
}

// KernelPartition makes sure the kernel has partition number of disk with
// the given geometry and returns it: already there, after BLKRRPART, or,
// when re-reading is refused (the verity device holds root) or does not
// produce it, after BLKPG_ADD_PARTITION. wait bounds each wait for sysfs.
func KernelPartition(disk *os.File, sysBlock, diskName string, number int, start, size int64, wait time.Duration) (BlockDevice, string, error) {
	find := func(d time.Duration) (BlockDevice, bool, error) {
		deadline := time.Now().Add(d)
		for {
			devs, err := ScanBlockDevices(sysBlock)
			if err != nil {
				return BlockDevice{}, false, err
			}
			if p, ok := FindPartition(devs, diskName, number); ok {
				s, n, err := partitionGeometry(sysBlock, p.Name)
				if err != nil {
					return p, false, err
				}
				if s != start || n != size {
					return p, false, fmt.Errorf("the kernel has partition %s at byte %d, %d bytes, but the GPT says %d, %d bytes: reboot so the kernel reads the new table",
						p.Name, s, n, start, size)
				}
				return p, true, nil
			}
			if time.Now().After(deadline) {
				return BlockDevice{}, false, nil
			}
			time.Sleep(pollInterval)
		}
	}
	if p, ok, err := find(0); err != nil || ok {
		return p, "already known to the kernel", err
	}
	how := "BLKRRPART"
	if err := RereadPartitions(disk); err == nil {
		// A kernel without a GPT parser re-reads nothing; give it a
		// moment before adding the partition by hand.
		if p, ok, err := find(2 * time.Second); err != nil || ok {
			return p, how, err
		}
		how = "BLKPG after BLKRRPART found nothing"
	} else {
		how = fmt.Sprintf("BLKPG (%v)", err)
	}
	if err := AddPartition(disk, number, start, size); err != nil {
		return BlockDevice{}, "", err
	}
	p, ok, err := find(wait)
	if err != nil {
		return p, how, err
	}
	if !ok {
		return p, how, fmt.Errorf("partition %d of %s did not appear in %s within %s after %s", number, diskName, sysBlock, wait, how)
	}
	return p, how, nil
}
