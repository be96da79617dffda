package esp

// Paths of the systemd-boot layout LoaderFiles produces (systemd-boot
// itself goes to the architecture's removable-media path, see image/arch).
const (
	LoaderConfPath = "loader/loader.conf"
	// UKIPath is where systemd-boot finds the Unified Kernel Image: a Boot
	// Loader Specification type #2 entry, which carries its own command
	// line, so no loader entry file does.
	UKIPath = "EFI/Linux/" + ukiName
	ukiName = "drover.efi"
	// KeysDir holds Secure Boot keys for systemd-boot to enrol (PK.auth,
	// KEK.auth, db.auth). systemd-boot enrols the set named "auto" by
	// itself; sets under other names only appear as menu entries.
	KeysDir = "loader/keys/auto"
)

// LoaderFiles returns the ESP files that boot uki (a Unified Kernel Image)
// through systemd-boot (systemdBoot is systemd-bootx64.efi or
// systemd-bootaa64.efi), installed as loaderPath, the architecture's
// removable-media path (EFI/BOOT/BOOTX64.EFI, EFI/BOOT/BOOTAA64.EFI) so
// firmware finds it with no NVRAM boot entry, as on a freshly imported ECS
// image.
//
// loader.conf holds only what differs from systemd-boot's defaults:
//   - timeout 0: boot the entry at once (a key held at boot still shows the menu);
//   - default drover.efi: the UKI (type #2 entries are named by file name);
//   - editor no: nobody at the console can edit the command line, which
//     carries the verity root hash (with Secure Boot on, the stub also
//     ignores any command line but its own .cmdline).
//
// keys, when given (name → content, e.g. "db.auth"), go to KeysDir, and
// loader.conf says secure-boot-enroll if-safe: firmware in setup mode on a
// virtual machine gets them enrolled by systemd-boot at first boot, which
// then resets into Secure Boot.
func LoaderFiles(loaderPath string, uki, systemdBoot []byte, keys map[string][]byte) []File {
	conf := "timeout 0\ndefault " + ukiName + "\neditor no\n"
	if len(keys) > 0 {
		conf += "secure-boot-enroll if-safe\n"
	}
	files := []File{
		{Path: loaderPath, Data: systemdBoot},
		{Path: LoaderConfPath, Data: []byte(conf)},
		{Path: UKIPath, Data: uki},
	}
	for name, data := range keys {
		files = append(files, File{Path: KeysDir + "/" + name, Data: data})
	}
	return files // Build sorts them
}
