package esp

import "strings"

// Paths of the systemd-boot layout LoaderFiles produces.
const (
	LoaderPath     = "EFI/BOOT/BOOTX64.EFI"
	LoaderConfPath = "loader/loader.conf"
	EntryPath      = "loader/entries/drover.conf"
	KernelPath     = "drover/vmlinuz"
	InitrdPath     = "drover/initrd"
	entryName      = "drover.conf"
)

// LoaderFiles returns the ESP files that boot kernel and initrd with cmdline
// through systemd-boot (systemdBoot is systemd-bootx64.efi), installed as
// the removable-media path EFI/BOOT/BOOTX64.EFI so firmware finds it with
// no NVRAM boot entry, as on a freshly imported ECS image.
//
// loader.conf holds only what differs from systemd-boot's defaults:
//   - timeout 0: boot the entry at once (a key held at boot still shows the menu);
//   - default drover.conf: the one entry;
//   - editor no: nobody at the console can edit the command line, which
//     carries the verity root hash.
//
// Whitespace runs in title and cmdline, newlines included, become single
// spaces: each is one line of the entry file.
func LoaderFiles(kernel, initrd, systemdBoot []byte, cmdline, title string) []File {
	conf := "timeout 0\ndefault " + entryName + "\neditor no\n"
	entry := "title " + oneLine(title) + "\n" +
		"linux /" + KernelPath + "\n" +
		"initrd /" + InitrdPath + "\n" +
		"options " + oneLine(cmdline) + "\n"
	return []File{
		{Path: LoaderPath, Data: systemdBoot},
		{Path: LoaderConfPath, Data: []byte(conf)},
		{Path: EntryPath, Data: []byte(entry)},
		{Path: KernelPath, Data: kernel},
		{Path: InitrdPath, Data: initrd},
	}
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
