// Package boot is drover-init, the initrd's PID 1, as a list of printable
// steps: mount the API filesystems, load the listed kernel modules, find the
// root and root-verity partitions by the partition UUIDs the root hash
// gives, set up the dm-verity device, mount the erofs root read-only, create
// (first boot) and mount the persistent /var, put a tmpfs overlay on /etc,
// keep the machine-id in /var and switch_root into systemd.
//
// Pure parts (the config file, the kernel command line, sysfs uevent
// matching, the GPT edit that adds /var, the machine-id decision) are plain
// functions over values and byte slices; the steps that make syscalls are
// thin and run only as PID 1 (or in the root-only integration tests).
// The builder imports Config to write the file this package reads.
package boot
