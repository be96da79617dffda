package arch

import "testing"

func TestPaths(t *testing.T) {
	for _, c := range []struct{ debian, goarch, loader, boot, stub, kernel string }{
		{"amd64", "amd64", "EFI/BOOT/BOOTX64.EFI", "/usr/lib/systemd/boot/efi/systemd-bootx64.efi", "/usr/lib/systemd/boot/efi/linuxx64.efi.stub", "linux-image-cloud-amd64"},
		{"arm64", "arm64", "EFI/BOOT/BOOTAA64.EFI", "/usr/lib/systemd/boot/efi/systemd-bootaa64.efi", "/usr/lib/systemd/boot/efi/linuxaa64.efi.stub", "linux-image-cloud-arm64"},
	} {
		a, err := Lookup(c.debian)
		if err != nil {
			t.Fatal(err)
		}
		if a.GOARCH != c.goarch || a.RemovableMediaPath() != c.loader || a.SystemdBoot() != c.boot || a.Stub() != c.stub || a.Kernel != c.kernel {
			t.Errorf("%s: %s %s %s %s %s", c.debian, a.GOARCH, a.RemovableMediaPath(), a.SystemdBoot(), a.Stub(), a.Kernel)
		}
	}
	if _, err := Lookup("riscv64"); err == nil {
		t.Error("riscv64 is not supported but Lookup accepts it")
	}
}
