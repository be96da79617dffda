// Package dmtest holds what the device-mapper tests that run in the QEMU
// guest (agent/dm, agent/boot, -tags vmtest) share.
package dmtest

import "golang.org/x/sys/unix"

// ReadDirect reads n bytes of dev at off with O_DIRECT, so neither the page
// cache of the dm device nor an earlier read can answer it: the read reaches
// dm-verity, which checks the block against its hash tree.
func ReadDirect(dev string, off int64, n int) ([]byte, error) {
	fd, err := unix.Open(dev, unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	// O_DIRECT wants an aligned buffer: an anonymous mapping is page aligned.
	buf, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, err
	}
	defer unix.Munmap(buf)
	if _, err := unix.Pread(fd, buf, off); err != nil {
		return nil, err
	}
	return append([]byte(nil), buf...), nil
}
