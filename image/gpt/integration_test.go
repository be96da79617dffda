//go:build integration

package gpt

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/image/esp"
)

func needTool(t *testing.T, tool, pkg string) {
	t.Helper()
	if _, err := exec.LookPath(tool); err != nil {
		t.Fatalf("%s not found: install the Debian package %s", tool, pkg)
	}
}

// TestDiskWithSfdiskAndFsck builds a disk image file the way the builder
// does (ESP + root + root-verity with dummy contents) and checks it with
// sfdisk and fsck.fat.
func TestDiskWithSfdiskAndFsck(t *testing.T) {
	needTool(t, "sfdisk", "fdisk")
	needTool(t, "fsck.fat", "dosfstools")

	files := esp.LoaderFiles("EFI/BOOT/BOOTX64.EFI", []byte("MZ uki"), []byte("MZ"), nil)
	espSize := esp.MinSize(files)
	parts := dpsParts(t)
	parts[0].Size, parts[1].Size, parts[2].Size = espSize, 5<<20, 1<<20
	l, err := Plan(parts, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("plan:\n%s", l)

	path := filepath.Join(t.TempDir(), "disk.raw")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(l.DiskSize); err != nil {
		t.Fatal(err)
	}
	if err := Write(f, l, diskGUID); err != nil {
		t.Fatal(err)
	}
	mtime := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := esp.Write(f, l.Parts[0].Offset, l.Parts[0].Length, files, "ESP", 0x0DDBA11, mtime); err != nil {
		t.Fatal(err)
	}
	for _, p := range l.Parts[1:] {
		if _, err := f.WriteAt(bytes.Repeat([]byte(p.Name), 1000), p.Offset); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	out, err := exec.Command("sfdisk", "--json", path).CombinedOutput()
	if err != nil {
		t.Fatalf("sfdisk --json: %v\n%s", err, out)
	}
	t.Logf("sfdisk --json:\n%s", out)
	var dump struct {
		PartitionTable struct {
			Label      string `json:"label"`
			ID         string `json:"id"`
			Partitions []struct {
				Start int64  `json:"start"`
				Size  int64  `json:"size"`
				Type  string `json:"type"`
				UUID  string `json:"uuid"`
				Name  string `json:"name"`
				Attrs string `json:"attrs"`
			} `json:"partitions"`
		} `json:"partitiontable"`
	}
	if err := json.Unmarshal(out, &dump); err != nil {
		t.Fatal(err)
	}
	pt := dump.PartitionTable
	if pt.Label != "gpt" || !strings.EqualFold(pt.ID, diskGUID) || len(pt.Partitions) != 3 {
		t.Fatalf("sfdisk sees label %q id %q and %d partitions", pt.Label, pt.ID, len(pt.Partitions))
	}
	wantAttrs := []string{"", "GUID:60", "GUID:60"}
	for i, got := range pt.Partitions {
		want := l.Parts[i]
		if got.Start != int64(want.FirstLBA) || got.Size != want.Length/512 || !strings.EqualFold(got.Type, want.Type) ||
			!strings.EqualFold(got.UUID, want.UUID) || got.Name != want.Name || got.Attrs != wantAttrs[i] {
			t.Errorf("sfdisk partition %d = %+v; want start %d size %d type %s uuid %s name %s attrs %q",
				i+1, got, want.FirstLBA, want.Length/512, want.Type, want.UUID, want.Name, wantAttrs[i])
		}
	}
	if out, err := exec.Command("sfdisk", "--verify", path).CombinedOutput(); err != nil || !strings.Contains(string(out), "No errors detected") {
		t.Errorf("sfdisk --verify: %v\n%s", err, out)
	}

	disk, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, guid, err := ReadLayout(bytes.NewReader(disk), int64(len(disk))); err != nil || guid != diskGUID {
		t.Errorf("ReadLayout: %v, GUID %s", err, guid)
	}
	espPath := filepath.Join(t.TempDir(), "esp.img")
	espBytes := disk[l.Parts[0].Offset : l.Parts[0].Offset+l.Parts[0].Length]
	if err := os.WriteFile(espPath, espBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command("fsck.fat", "-n", "-l", espPath).CombinedOutput()
	t.Logf("fsck.fat -n -l:\n%s", out)
	if err != nil {
		t.Fatalf("fsck.fat on the ESP: %v", err)
	}
	for _, f := range files {
		if !strings.Contains(string(out), "/"+f.Path) {
			t.Errorf("fsck.fat did not list /%s", f.Path)
		}
	}
}
