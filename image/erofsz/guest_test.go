//go:build vmtest

package erofsz

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestGuestMount mounts each algorithm's image with the kernel of the
// image drover builds (6.12 for trixie's cloud kernel), not the build
// host's: it runs as root in the QEMU guest of e2e/guest_test.go (make
// e2e), which fails on any failure or skip here. Every byte of every file
// goes through that kernel's decompressor, zstd's too, which this
// project's erofs-utils (1.5) cannot read.
func TestGuestMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root for loop devices and mount: run in the QEMU guest (make e2e)")
	}
	losetup, err := exec.LookPath("losetup")
	if err != nil {
		t.Fatal("losetup not found: the guest's tools come from e2e/guest_test.go's guestTools")
	}
	tr := testTree(t)
	for _, a := range algorithms {
		t.Run(a.String(), func(t *testing.T) {
			img, _ := writeBytes(t, tr, Options{BuildTime: testTime, UUID: testUUID, Compression: a})
			p := filepath.Join(t.TempDir(), "root.erofs")
			if err := os.WriteFile(p, img, 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(losetup, "--find", "--show", "--read-only", p).CombinedOutput()
			if err != nil {
				t.Fatalf("losetup: %v: %s", err, out)
			}
			dev := strings.TrimSpace(string(out))
			defer exec.Command(losetup, "-d", dev).Run()
			mnt := t.TempDir()
			if err := unix.Mount(dev, mnt, "erofs", unix.MS_RDONLY, ""); err != nil {
				t.Fatalf("mount -t erofs %s: %v", dev, err)
			}
			defer func() {
				if err := unix.Unmount(mnt, 0); err != nil {
					t.Errorf("umount: %v", err)
				}
			}()
			checkDir(t, tr, mnt, true)
		})
	}
}
