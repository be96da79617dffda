package gpt

import "strings"

// Partition type GUIDs from the Discoverable Partitions Specification.
const (
	TypeESP              = "c12a7328-f81f-11d2-ba4b-00a0c93ec93b"
	TypeRootX86_64       = "4f68bce3-e8cd-4db1-96e7-fbcaf984b709"
	TypeRootVerityX86_64 = "2c7357ed-ebd2-46d9-aec1-23d437ec2bf5"
	TypeRootARM64        = "b921b045-1df0-41c3-af44-4c6f280d3fae"
	TypeRootVerityARM64  = "df3300ce-d69f-4c92-978c-9bfb0f38d820"
	TypeVar              = "4d21b016-b534-45c2-a9fb-5c16e091fd2d"
	TypeLinuxGeneric     = "0fc63daf-8483-4772-8e79-3d69d8477de4"
)

// GPT partition attribute bits. Bits 0-2 are defined by UEFI; 59-63 are the
// type-specific bits the DPS gives meaning to.
const (
	AttrRequired           uint64 = 1 << 0
	AttrNoBlockIOProtocol  uint64 = 1 << 1
	AttrLegacyBIOSBootable uint64 = 1 << 2
	AttrGrowFS             uint64 = 1 << 59
	// AttrReadOnly (bit 60) tells systemd and drover-init to mount the
	// partition read-only; the DPS sets it on root and verity partitions of
	// an immutable image.
	AttrReadOnly uint64 = 1 << 60
	AttrHidden   uint64 = 1 << 62
	AttrNoAuto   uint64 = 1 << 63
)

// Arch names a CPU architecture that has its own DPS root type GUIDs.
type Arch string

// Architectures drover builds for.
const (
	ArchX86_64 Arch = "x86-64"
	ArchARM64  Arch = "arm64"
)

// RootTypes returns the DPS root and root-verity type GUIDs of arch.
func RootTypes(arch Arch) (root, verity string, ok bool) {
	switch arch {
	case ArchX86_64:
		return TypeRootX86_64, TypeRootVerityX86_64, true
	case ArchARM64:
		return TypeRootARM64, TypeRootVerityARM64, true
	}
	return "", "", false
}

var typeNames = map[string]string{
	TypeESP:              "esp",
	TypeRootX86_64:       "root-x86-64",
	TypeRootVerityX86_64: "root-x86-64-verity",
	TypeRootARM64:        "root-arm64",
	TypeRootVerityARM64:  "root-arm64-verity",
	TypeVar:              "var",
	TypeLinuxGeneric:     "linux-generic",
}

// TypeName returns the DPS identifier of a type GUID ("root-x86-64"), or the
// GUID itself when it is not one drover knows.
func TypeName(typeGUID string) string {
	if n, ok := typeNames[strings.ToLower(typeGUID)]; ok {
		return n
	}
	return strings.ToLower(typeGUID)
}

// ESP returns the EFI System Partition entry.
func ESP(uuid string, size int64) Part {
	return Part{Name: "esp", Type: TypeESP, UUID: uuid, Size: size}
}

// Root returns the read-only root partition entry of arch; ok is false for an
// unknown arch.
func Root(arch Arch, uuid string, size int64) (p Part, ok bool) {
	root, _, ok := RootTypes(arch)
	return Part{Name: "root", Type: root, UUID: uuid, Size: size, Attributes: AttrReadOnly}, ok
}

// RootVerity returns the read-only root-verity (hash tree) partition entry of
// arch; ok is false for an unknown arch.
func RootVerity(arch Arch, uuid string, size int64) (p Part, ok bool) {
	_, verity, ok := RootTypes(arch)
	return Part{Name: "root-verity", Type: verity, UUID: uuid, Size: size, Attributes: AttrReadOnly}, ok
}

// Var returns the persistent /var partition entry.
func Var(uuid string, size int64) Part {
	return Part{Name: "var", Type: TypeVar, UUID: uuid, Size: size}
}
