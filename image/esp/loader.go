package esp

// Paths of the systemd-boot layout LoaderFiles produces.
const (
	LoaderPath     = "EFI/BOOT/BOOTX64.EFI"
	LoaderConfPath = "loader/loader.conf"
	// UKIPath is where systemd-boot finds the Unified Kernel Image: a Boot
	// Loader Specification type #2 entry, which carries its own command
	// line, so no loader entry file does.
	UKIPath = "EFI/Linux/" + ukiName
	ukiName = "drover.efi"
)

// LoaderFiles returns the ESP files that boot uki (a Unified Kernel Image)
// through systemd-boot (systemdBoot is systemd-bootx64.efi), installed as
// the removable-media path EFI/BOOT/BOOTX64.EFI so firmware finds it with
// no NVRAM boot entry, as on a freshly imported ECS image.
//
// loader.conf holds only what differs from systemd-boot's defaults:
//   - timeout 0: boot the entry at once (a key held at boot still shows the menu);
//   - default drover.efi: the UKI (type #2 entries are named by file name);
//   - editor no: nobody at the console can edit the command line, which
//     carries the verity root hash (with Secure Boot on, the stub also
//     ignores any command line but its own .cmdline).
func LoaderFiles(uki, systemdBoot []byte) []File {
	conf := "timeout 0\ndefault " + ukiName + "\neditor no\n"
	return []File{
		{Path: LoaderPath, Data: systemdBoot},
		{Path: LoaderConfPath, Data: []byte(conf)},
		{Path: UKIPath, Data: uki},
	}
}
