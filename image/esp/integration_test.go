//go:build integration

package esp

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// needTool fails (never skips) when a checker is missing: CI installs it.
func needTool(t *testing.T, tool, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		t.Fatalf("%s not found: install the Debian package %s", tool, pkg)
	}
	return p
}

// TestFsckFat checks the ESP with dosfstools' fsck.fat: no repairs proposed
// (-n exits 0 only when the filesystem is clean) and every file listed.
func TestFsckFat(t *testing.T) {
	fsck := needTool(t, "fsck.fat", "dosfstools")
	files := testFiles()
	size := MinSize(files)
	img := filepath.Join(t.TempDir(), "esp.img")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	if err := Write(f, 0, size, files, "DROVER-ESP", 0xC0FFEE, testMtime); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(fsck, "-n", "-v", "-l", img).CombinedOutput()
	t.Logf("fsck.fat -n -v -l:\n%s", out)
	if err != nil {
		t.Fatalf("fsck.fat reports problems: %v", err)
	}
	for _, f := range files {
		if !strings.Contains(string(out), "Checking file /"+f.Path) {
			t.Errorf("fsck.fat did not list /%s", f.Path)
		}
	}
	if !strings.Contains(string(out), "32 bit entries") {
		t.Error("fsck.fat does not see a FAT32")
	}
}
