package qemu

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-os/drover/image/gpt"
)

// disk writes a small GPT disk with an ESP and the root partitions of a.
func disk(t *testing.T, a gpt.Arch) string {
	t.Helper()
	root, ok := gpt.Root(a, "11111111-2222-4333-8444-555555555555", 1<<20)
	verity, ok2 := gpt.RootVerity(a, "11111111-2222-4333-8444-666666666666", 1<<20)
	if !ok || !ok2 {
		t.Fatalf("no DPS types for %s", a)
	}
	l, err := gpt.Plan([]gpt.Part{gpt.ESP("11111111-2222-4333-8444-777777777777", 1<<20), root, verity}, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "disk.raw")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(l.DiskSize); err != nil {
		t.Fatal(err)
	}
	if err := gpt.Write(f, l, "11111111-2222-4333-8444-888888888888"); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestImageArch: the architecture comes from the disk's DPS root type.
func TestImageArch(t *testing.T) {
	for a, want := range map[gpt.Arch]string{gpt.ArchX86_64: "amd64", gpt.ArchARM64: "arm64"} {
		got, err := ImageArch(disk(t, a))
		if err != nil || got != want {
			t.Errorf("%s disk: %q, %v; want %s", a, got, err, want)
		}
	}
	blank := filepath.Join(t.TempDir(), "blank.raw")
	os.WriteFile(blank, make([]byte, 1<<16), 0o644)
	if _, err := ImageArch(blank); err == nil || !strings.Contains(err.Error(), "blank.raw") {
		t.Errorf("a disk with no GPT: %v, want an error naming it", err)
	}
}

// TestArgsArm64: an arm64 image boots QEMU's virt machine, emulated,
// with the same PCI disk and NIC as q35 and no KVM on an amd64 host.
func TestArgsArm64(t *testing.T) {
	c := testConfig()
	c.Arch = "arm64"
	a := c.Args(false)
	if one(t, a, "-machine") != "virt" || one(t, a, "-accel") != "tcg,thread=multi" || one(t, a, "-cpu") != "max,pauth-impdef=on" {
		t.Errorf("arm64: machine/accel/cpu %q", a)
	}
	if !strings.Contains(strings.Join(a, " "), "virtio-blk-pci,drive=disk0") {
		t.Errorf("arm64: no virtio-blk-pci disk: %q", a)
	}
	if hostArch == "amd64" {
		if kvm, why := c.KVM(); kvm || !strings.Contains(why, "arm64 image on this amd64 host") {
			t.Errorf("arm64 image on amd64: KVM %v (%s)", kvm, why)
		}
	}
	c.SecureBoot = true
	if err := c.defaultsNoDir(); err == nil {
		t.Error("arm64 with Secure Boot: no error")
	}
}
