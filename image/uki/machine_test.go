package uki

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/drover-os/drover/image/arch"
	"github.com/drover-os/drover/image/pe/petest"
)

// withMachine returns a copy of a petest stub with its COFF machine type
// set, as systemd's linuxaa64.efi.stub has 0xaa64.
func withMachine(b []byte, machine uint16) []byte {
	c := append([]byte(nil), b...)
	lfanew := binary.LittleEndian.Uint32(c[0x3c:])
	binary.LittleEndian.PutUint16(c[lfanew+4:], machine)
	return c
}

func TestCheckMachine(t *testing.T) {
	amd := petest.Stub(100, 10)
	arm := withMachine(amd, arch.ARM64.PE)
	if err := CheckMachine(amd, arch.AMD64.PE); err != nil {
		t.Errorf("x86-64 stub refused for amd64: %v", err)
	}
	if err := CheckMachine(arm, arch.ARM64.PE); err != nil {
		t.Errorf("arm64 stub refused for arm64: %v", err)
	}
	if err := CheckMachine(amd, arch.ARM64.PE); err == nil || !strings.Contains(err.Error(), "0x8664, want 0xaa64") {
		t.Errorf("x86-64 stub for arm64: %v, want a machine type error", err)
	}
	if err := CheckMachine([]byte("not a PE at all, not even close to it; padding padding padding"), arch.ARM64.PE); err == nil {
		t.Error("a non-PE file passes")
	}
	// The UKI keeps the stub's machine type: an arm64 stub gives an arm64 UKI.
	out, err := Build(arm, Parts{OSRelease: []byte("ID=x\n"), Cmdline: "c", Uname: "u", Initrd: []byte("i"), Linux: withMachine(petest.Stub(300, 10), arch.ARM64.PE)})
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckMachine(out, arch.ARM64.PE); err != nil {
		t.Errorf("UKI from an arm64 stub: %v", err)
	}
}
