// Package esp writes the FAT32 EFI System Partition of a drover image:
// systemd-boot as the removable-media loader, its loader.conf, one boot
// entry, the kernel and the initrd.
//
// The filesystem is made with go-diskfs in memory and then made
// reproducible: go-diskfs stamps the wall clock (or $SOURCE_DATE_EPOCH)
// into every directory entry and a zero serial number into the boot
// sector, so Build rewrites every directory entry's times to the caller's
// mtime and stores the caller's volume ID. The same files, label, volume ID
// and mtime give the same bytes on any day, on any machine. Nothing here
// reads the clock or the environment.
package esp
