package verify

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/fat32"

	"github.com/drover-os/drover/image/esp"
	"github.com/drover-os/drover/image/uki"
)

// checkESP reads the FAT32 file system in the ESP and compares every file
// with the manifest, and the UKI's command line with the root hash.
func (v *verifier) checkESP() {
	if v.section("esp") == nil {
		return
	}
	p, _ := v.partition("esp")
	// go-diskfs trusts the on-disk structures it walks; a damaged FAT must
	// become a problem report, not a crash of the whole verification.
	defer func() {
		if r := recover(); r != nil {
			v.add(p.Name, "reading the FAT32 file system failed (%v): it is damaged; firmware may not find the boot loader; %s", r, rebuildHint)
		}
	}()
	fs, err := fat32.Read(file.New(v.file, true), p.Size, p.Offset, 512)
	if err != nil {
		v.add(p.Name, "reading the FAT32 file system: %v: it is damaged, firmware may not find the boot loader; %s", err, rebuildHint)
		return
	}
	listed := map[string]bool{}
	var ukiImage []byte
	for _, f := range v.m.ESP {
		listed[strings.ToLower(f.Path)] = true
		if f.Size == 0 {
			// An empty file has no cluster, and go-diskfs cannot open it
			// for reading; its name is checked below with the others.
			continue
		}
		data, err := fs.ReadFile("/" + f.Path)
		if err != nil {
			v.add(p.Name, "%s: %v: the file the manifest lists is missing or unreadable; %s", f.Path, err, rebuildHint)
			continue
		}
		sum := sha256.Sum256(data)
		if got := hex.EncodeToString(sum[:]); got != f.SHA256 || len(data) != f.Size {
			v.add(p.Name, "%s: %d bytes with sha256 %s, the manifest says %d bytes with sha256 %s: the file was modified; %s",
				f.Path, len(data), got, f.Size, f.SHA256, rebuildHint)
		}
		if f.Path == esp.UKIPath {
			ukiImage = data
		}
	}
	found, err := espFiles(fs, ".")
	if err != nil {
		v.add(p.Name, "listing the ESP: %v; %s", err, rebuildHint)
	}
	for _, f := range found {
		if !listed[strings.ToLower(f)] {
			v.add(p.Name, "%s is on the ESP but not in the manifest: something added it after the build; %s", f, rebuildHint)
		} else {
			delete(listed, strings.ToLower(f))
		}
	}
	if err == nil {
		var missing []string
		for f := range listed {
			missing = append(missing, f)
		}
		sort.Strings(missing)
		for _, f := range missing {
			v.add(p.Name, "%s is in the manifest but not on the ESP; %s", f, rebuildHint)
		}
	}
	if ukiImage != nil {
		v.checkCmdline(p.Name, ukiImage)
	}
}

// checkCmdline checks the UKI's .cmdline section: it carries the root hash
// drover-init sets up dm-verity with, so a different one boots (or fails
// to boot) a different root.
func (v *verifier) checkCmdline(part string, image []byte) {
	secs, err := uki.Sections(image)
	if err != nil {
		v.add(part, "%s: %v: firmware cannot load it; %s", esp.UKIPath, err, rebuildHint)
		return
	}
	var options string
	found := false
	for _, s := range secs {
		if s.Name == ".cmdline" {
			options, found = strings.TrimSpace(string(uki.SectionData(image, s))), true
		}
	}
	if !found {
		v.add(part, "%s has no .cmdline section: the kernel would boot without drover.roothash= and drover-init cannot set up the verity root; %s", esp.UKIPath, rebuildHint)
		return
	}
	want := "drover.roothash=" + v.m.RootHash
	has := false
	for _, f := range strings.Fields(options) {
		if f == want {
			has = true
		}
	}
	if !has {
		v.add(part, "%s .cmdline %q lacks %s: drover-init would refuse the root filesystem or mount another one; %s", esp.UKIPath, options, want, rebuildHint)
	} else if options != v.m.Cmdline {
		v.add(part, "%s .cmdline %q differs from the manifest's command line %q; %s", esp.UKIPath, options, v.m.Cmdline, rebuildHint)
	}
}

// espFiles lists every regular file under dir, slash-separated, relative to
// the ESP root.
func espFiles(fs *fat32.FileSystem, dir string) ([]string, error) {
	ents, err := fs.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading directory %s: %w", dir, err)
	}
	var out []string
	for _, e := range ents {
		p := path.Join(dir, e.Name())
		if e.IsDir() {
			sub, err := espFiles(fs, p)
			if err != nil {
				return out, err
			}
			out = append(out, sub...)
			continue
		}
		out = append(out, p)
	}
	return out, nil
}
