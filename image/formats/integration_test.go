//go:build integration

package formats

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

func qemuImg(t *testing.T, args ...string) []byte {
	t.Helper()
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Fatal("qemu-img not found: install the Debian package qemu-utils")
	}
	out, err := exec.Command("qemu-img", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("qemu-img %v: %v\n%s", args, err, out)
	}
	return out
}

// writeRaw writes a 64 MiB image with random, patterned and zero regions.
func writeRaw(t *testing.T, dir string) (string, []byte) {
	t.Helper()
	raw := testRaw(64 << 20)
	path := filepath.Join(dir, "disk.raw")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, raw
}

func TestQCOW2WithQemuImg(t *testing.T) {
	dir := t.TempDir()
	rawPath, raw := writeRaw(t, dir)
	for _, compress := range []bool{true, false} {
		path := filepath.Join(dir, map[bool]string{true: "c.qcow2", false: "u.qcow2"}[compress])
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := WriteQCOW2(f, readerAt(raw), int64(len(raw)), compress); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}

		// qemu-img check exits non-zero on corruption or leaks.
		var check struct {
			CheckErrors        int `json:"check-errors"`
			Corruptions        int `json:"corruptions"`
			Leaks              int `json:"leaks"`
			CompressedClusters int `json:"compressed-clusters"`
			AllocatedClusters  int `json:"allocated-clusters"`
		}
		out := qemuImg(t, "check", "--output=json", path)
		if err := json.Unmarshal(out, &check); err != nil {
			t.Fatalf("parsing qemu-img check: %v\n%s", err, out)
		}
		t.Logf("compress=%v: qemu-img check: %s", compress, out)
		if check.CheckErrors+check.Corruptions+check.Leaks != 0 {
			t.Errorf("compress=%v: qemu-img check found problems: %+v", compress, check)
		}
		if compress && check.CompressedClusters == 0 || !compress && check.CompressedClusters != 0 {
			t.Errorf("compress=%v: %d compressed clusters", compress, check.CompressedClusters)
		}

		var info struct {
			Format      string `json:"format"`
			VirtualSize int64  `json:"virtual-size"`
			Specific    struct {
				Data struct {
					Compat string `json:"compat"`
				} `json:"data"`
			} `json:"format-specific"`
		}
		out = qemuImg(t, "info", "--output=json", path)
		if err := json.Unmarshal(out, &info); err != nil {
			t.Fatalf("parsing qemu-img info: %v\n%s", err, out)
		}
		if info.Format != "qcow2" || info.VirtualSize != int64(len(raw)) || info.Specific.Data.Compat != "1.1" {
			t.Errorf("qemu-img info: %s", out)
		}
		// Not strict (-s would also compare allocation, and zero clusters
		// are unallocated on purpose); the sizes are checked above.
		qemuImg(t, "compare", "-f", "raw", "-F", "qcow2", rawPath, path)
	}
}

func TestVHDWithQemuImg(t *testing.T) {
	dir := t.TempDir()
	rawPath, raw := writeRaw(t, dir)
	path := filepath.Join(dir, "disk.vhd")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(rawPath)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if err := WriteVHD(f, src, int64(len(raw)), time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), testID); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	var info struct {
		Format      string `json:"format"`
		VirtualSize int64  `json:"virtual-size"`
	}
	out := qemuImg(t, "info", "--output=json", "-f", "vpc", path)
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatalf("parsing qemu-img info: %v\n%s", err, out)
	}
	t.Logf("qemu-img info: %s", out)
	// qemu sizes a VHD from a creator it does not know by its CHS geometry.
	c, h, s := chsGeometry(VHDSize(int64(len(raw))) / 512)
	if want := int64(c) * int64(h) * int64(s) * 512; info.Format != "vpc" || info.VirtualSize != want || want < int64(len(raw)) {
		t.Errorf("qemu-img info: format %s, virtual size %d; want vpc, %d (>= %d)", info.Format, info.VirtualSize, want, len(raw))
	}
	// Not strict: the VHD is larger, and compare checks the excess is zeros.
	out = qemuImg(t, "compare", "-f", "raw", "-F", "vpc", rawPath, path)
	t.Logf("qemu-img compare: %s", out)
}

type readerAt []byte

func (b readerAt) ReadAt(p []byte, off int64) (int, error) { return copy(p, b[off:]), nil }
