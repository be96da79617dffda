// Package arch is the one table of what differs between the CPU
// architectures drover builds images for: the Debian architecture name
// recipes use, GOARCH for the Go components, the ELF and PE machine types
// the build checks its binaries against, the suffix of the EFI file names
// (systemd-boot, the UKI stub and the removable-media boot path), the
// Discoverable Partitions Specification's name for the root partition
// types, and the default kernel package. Everything else in a build is the
// same for every architecture.
package arch

import (
	"debug/elf"
	"fmt"
	"sort"
	"strings"
)

// Arch describes one target architecture.
type Arch struct {
	Debian string // Debian architecture and recipe `arch`: amd64, arm64
	GOARCH string
	// Multiarch is the Debian multiarch tuple (library directories).
	Multiarch string
	// ELF is the machine of the architecture's executables.
	ELF elf.Machine
	// PE is the COFF machine type of its EFI binaries (PE/COFF §3.3.1).
	PE uint16
	// EFI is the architecture's suffix in UEFI's removable-media path
	// (EFI/BOOT/BOOT<EFI>.EFI, UEFI §3.5.1.1) and, lower-case, in
	// systemd-boot-efi's file names (systemd-boot<efi>.efi, linux<efi>.efi.stub).
	EFI string
	// DPS is the Discoverable Partitions Specification's architecture
	// name in partition type identifiers (root-<DPS>, root-<DPS>-verity).
	DPS string
	// Kernel is the default kernel package: Debian's cloud flavour, the
	// one with the virtio and NVMe drivers ECS needs and little else.
	Kernel string
	// ECS is the Architecture ImportImage takes.
	ECS string
}

// The supported architectures.
var (
	AMD64 = Arch{Debian: "amd64", GOARCH: "amd64", Multiarch: "x86_64-linux-gnu", ELF: elf.EM_X86_64, PE: 0x8664, EFI: "X64",
		DPS: "x86-64", Kernel: "linux-image-cloud-amd64", ECS: "x86_64"}
	ARM64 = Arch{Debian: "arm64", GOARCH: "arm64", Multiarch: "aarch64-linux-gnu", ELF: elf.EM_AARCH64, PE: 0xaa64, EFI: "AA64",
		DPS: "arm64", Kernel: "linux-image-cloud-arm64", ECS: "arm64"}
)

var all = map[string]Arch{AMD64.Debian: AMD64, ARM64.Debian: ARM64}

// Lookup returns the architecture of a Debian architecture name.
func Lookup(debian string) (Arch, error) {
	a, ok := all[debian]
	if !ok {
		return Arch{}, fmt.Errorf("architecture %q is not supported: use one of %s", debian, strings.Join(Names(), ", "))
	}
	return a, nil
}

// Names lists the supported Debian architecture names, sorted.
func Names() []string {
	var n []string
	for k := range all {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// RemovableMediaPath is where UEFI firmware looks for a boot loader on a
// disk with no boot entry: EFI/BOOT/BOOTX64.EFI, EFI/BOOT/BOOTAA64.EFI.
func (a Arch) RemovableMediaPath() string { return "EFI/BOOT/BOOT" + a.EFI + ".EFI" }

// SystemdBoot is systemd-boot's EFI binary in systemd-boot-efi.
func (a Arch) SystemdBoot() string {
	return "/usr/lib/systemd/boot/efi/systemd-boot" + strings.ToLower(a.EFI) + ".efi"
}

// Stub is systemd-stub, the UKI's base, in systemd-boot-efi.
func (a Arch) Stub() string {
	return "/usr/lib/systemd/boot/efi/linux" + strings.ToLower(a.EFI) + ".efi.stub"
}
