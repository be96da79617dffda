package storage

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestHostFormat formats a file with the real mkfs.ext4 and reads it back
// with blkid and debugfs (e2fsprogs, util-linux); no root needed.
func TestHostFormat(t *testing.T) {
	for _, tool := range []string{"mkfs.ext4", "blkid", "debugfs"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	root := t.TempDir()
	img := filepath.Join(root, "disk")
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 64<<20); err != nil {
		t.Fatal(err)
	}
	if p := blkid(img); p.Found || p.Err != "" {
		t.Fatalf("blkid of an empty file = %+v, want nothing found", p)
	}
	if err := (Host{Root: root}).Format("/disk", ours); err != nil {
		t.Fatal(err)
	}
	if p := blkid(img); p.Type != "ext4" || p.UUID != ours {
		t.Errorf("blkid after Format = %+v, want ext4 %s", p, ours)
	}
	out, err := exec.Command("debugfs", "-R", "ls -l /", img).CombinedOutput()
	if err != nil {
		t.Fatalf("debugfs: %v: %s", err, out)
	}
	for _, b := range Binds {
		if !strings.Contains(string(out), " "+b.Dir+"\n") || !strings.Contains(string(out), "40711") {
			t.Errorf("the new filesystem lacks %s (mode 0711):\n%s", b.Dir, out)
		}
	}
	label, _ := exec.Command("blkid", "-p", "-s", "LABEL", "-o", "value", img).Output()
	if strings.TrimSpace(string(label)) != Label {
		t.Errorf("label %q, want %s", label, Label)
	}
}
