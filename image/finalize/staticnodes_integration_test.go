//go:build integration

package finalize

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestStaticNodesMatchesKmod runs the host's `kmod static-nodes
// --format=tmpfiles` on the sample and requires StaticNodes' exact bytes.
// kmod reads only /usr/lib/modules/$(uname -r)/modules.devname, so the
// sample is put there through an overlay on /usr/lib in a private mount
// namespace (root: unshare -m and mount), leaving the host untouched.
func TestStaticNodesMatchesKmod(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a private mount namespace with an overlay on /usr/lib: needs root")
	}
	if _, err := exec.LookPath("kmod"); err != nil {
		t.Fatal("kmod not found: install kmod (scripts/host-setup.sh)")
	}
	rel, err := exec.Command("uname", "-r").Output()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mods := filepath.Join(dir, "upper", "modules", strings.TrimSpace(string(rel)))
	if err := os.MkdirAll(mods, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "work"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mods, "modules.devname"), []byte(devnameSample), 0o644); err != nil {
		t.Fatal(err)
	}
	script := "mount -t overlay overlay -o lowerdir=/usr/lib,upperdir=" + filepath.Join(dir, "upper") + ",workdir=" + filepath.Join(dir, "work") + " /usr/lib && exec kmod static-nodes --format=tmpfiles"
	var stderr bytes.Buffer
	cmd := exec.Command("unshare", "-m", "sh", "-c", script)
	cmd.Stderr = &stderr
	want, err := cmd.Output()
	if err != nil {
		t.Fatalf("kmod static-nodes: %v: %s", err, stderr.String())
	}
	got, err := StaticNodes([]byte(devnameSample), "modules.devname")
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("StaticNodes:\n%s\nkmod static-nodes --format=tmpfiles:\n%s", got, want)
	}
	if !strings.Contains(string(want), "b! /dev/fd0") {
		t.Errorf("kmod's output lacks the block device line: %s", want)
	}
}
