package esp

import (
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/diskfs/go-diskfs/filesystem/fat32"
)

// File is one regular file of the ESP.
type File struct {
	Path string // slash-separated, relative to the ESP root: "EFI/BOOT/BOOTX64.EFI"
	Data []byte
}

const (
	sectorSize = 512
	// maxSize bounds the in-memory build; an ESP holds a boot loader, a
	// kernel and an initrd, a few hundred MiB at most.
	maxSize = 4 << 30
)

// Write builds the ESP (see Build) and writes all size bytes of it to dst
// at offset, zeros included, so the region's previous contents never leak
// into the image.
func Write(dst io.WriterAt, offset, size int64, files []File, label string, volumeID uint32, mtime time.Time) error {
	img, err := Build(size, files, label, volumeID, mtime)
	if err != nil {
		return err
	}
	const chunk = 1 << 20
	for off := int64(0); off < size; off += chunk {
		end := min(off+chunk, size)
		if _, err := dst.WriteAt(img[off:end], offset+off); err != nil {
			return fmt.Errorf("writing ESP at byte %d of the image: %w", offset+off, err)
		}
	}
	return nil
}

// Build returns a size-byte FAT32 filesystem holding files. Directories are
// created as the sorted paths need them; every timestamp is mtime (clamped
// to FAT's 1980-2107 range, 2-second resolution); the serial number is
// volumeID; label is at most 11 characters of A-Z, 0-9, space and
// !#$%&'()-@^_`{}~ ("" stores "NO NAME").
func Build(size int64, files []File, label string, volumeID uint32, mtime time.Time) ([]byte, error) {
	if size%sectorSize != 0 || size <= 0 || size > maxSize {
		return nil, fmt.Errorf("building ESP: size %d is not a positive multiple of %d up to %d bytes", size, sectorSize, int64(maxSize))
	}
	if err := checkLabel(label); err != nil {
		return nil, fmt.Errorf("building ESP: %w", err)
	}
	sorted, err := sortFiles(files)
	if err != nil {
		return nil, fmt.Errorf("building ESP: %w", err)
	}
	g := geometryFor(size)
	if g.clusters < minFAT32Clusters {
		return nil, fmt.Errorf("building ESP: %d bytes give %d clusters, FAT32 needs %d; make the ESP at least %d bytes (esp.MinSize)",
			size, g.clusters, minFAT32Clusters, MinSize(files))
	}
	if need := clustersNeeded(sorted, g.clusterBytes); need > g.clusters {
		return nil, fmt.Errorf("building ESP: the files need %d clusters of %d bytes, a %d-byte ESP has %d; make it at least %d bytes (esp.MinSize)",
			need, g.clusterBytes, size, g.clusters, MinSize(files))
	}

	// go-diskfs sizes the FAT with a formula that, when it divides
	// exactly (64 MiB is such a size), leaves the FAT a few entries short of
	// the cluster count: the file system then claims clusters its FAT
	// cannot describe. Give the file system a few sectors less in that case;
	// the partition keeps its size.
	fsSize := size
	for !g.fatCovers() {
		fsSize -= sectorSize
		g = geometryFor(fsSize)
	}
	mem := newMemBackend(size)
	fs, err := fat32.Create(mem, fsSize, 0, sectorSize, label, true)
	if err != nil {
		return nil, fmt.Errorf("building ESP: creating FAT32: %w", err)
	}
	made := map[string]bool{}
	for _, f := range sorted {
		for _, dir := range parents(f.Path) {
			if made[dir] {
				continue
			}
			if err := fs.Mkdir("/" + dir); err != nil {
				return nil, fmt.Errorf("building ESP: creating directory %s: %w", dir, err)
			}
			made[dir] = true
		}
		if err := writeFile(fs, f); err != nil {
			return nil, fmt.Errorf("building ESP: %w", err)
		}
	}
	if err := finish(mem.b, g, volumeID, mtime); err != nil {
		return nil, fmt.Errorf("building ESP: %w", err)
	}
	return mem.b, nil
}

func writeFile(fs *fat32.FileSystem, f File) error {
	fh, err := fs.OpenFile("/"+f.Path, os.O_CREATE|os.O_RDWR)
	if err != nil {
		return fmt.Errorf("creating %s: %w", f.Path, err)
	}
	if len(f.Data) > 0 {
		if _, err := fh.Write(f.Data); err != nil {
			return fmt.Errorf("writing %s (%d bytes): %w", f.Path, len(f.Data), err)
		}
	}
	return nil
}

// MinSize returns the smallest ESP size, a whole number of MiB, that holds
// files as FAT32: at least the 65525 clusters that make a FAT32 (about
// 33 MiB with go-diskfs's 512-byte clusters below 260 MiB), more if the
// files and directories need it.
func MinSize(files []File) int64 {
	sorted, err := sortFiles(files)
	if err != nil {
		sorted = files // Build reports the error; the size is only an estimate then
	}
	for size := int64(32 << 20); ; size += 1 << 20 {
		g := geometryFor(size)
		if g.clusters >= minFAT32Clusters && g.clusters >= clustersNeeded(sorted, g.clusterBytes) {
			return size
		}
	}
}

// clustersNeeded counts the clusters go-diskfs allocates: one per started
// cluster of each file (one even when empty), and each directory's entries,
// counting a long-name entry for every name.
func clustersNeeded(files []File, clusterBytes int64) int64 {
	slots := map[string]int64{"": 1} // the root holds the volume label entry
	var n int64
	for _, f := range files {
		n += max(1, (int64(len(f.Data))+clusterBytes-1)/clusterBytes)
		parent := ""
		for _, dir := range parents(f.Path) {
			if _, ok := slots[dir]; !ok {
				slots[dir] = 2 // "." and ".."
				slots[parent] += nameSlots(path.Base(dir))
			}
			parent = dir
		}
		slots[parent] += nameSlots(path.Base(f.Path))
	}
	for _, s := range slots {
		n += max(1, (s*32+clusterBytes-1)/clusterBytes)
	}
	return n
}

func nameSlots(name string) int64 {
	return 1 + int64(len(utf16.Encode([]rune(name)))+12)/13
}

// parents returns the directories above p, outermost first.
func parents(p string) []string {
	var out []string
	for i := range len(p) {
		if p[i] == '/' {
			out = append(out, p[:i])
		}
	}
	return out
}

// sortFiles validates the paths and returns the files sorted by path, the
// creation order that makes the layout independent of the caller's order.
func sortFiles(files []File) ([]File, error) {
	sorted := append([]File(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	kind := map[string]string{} // upper-cased path → "file" or "directory"; FAT names are case-insensitive
	for _, f := range sorted {
		if err := checkPath(f.Path); err != nil {
			return nil, err
		}
		if int64(len(f.Data)) > 0xFFFFFFFF {
			return nil, fmt.Errorf("file %s is %d bytes, FAT32 holds at most 4 GiB - 1", f.Path, len(f.Data))
		}
		for _, dir := range parents(f.Path) {
			key := strings.ToUpper(dir)
			if kind[key] == "file" {
				return nil, fmt.Errorf("%s is both a file and a directory", dir)
			}
			kind[key] = "directory"
		}
		key := strings.ToUpper(f.Path)
		if kind[key] != "" {
			return nil, fmt.Errorf("%s is given twice (FAT names ignore case) or is also a directory", f.Path)
		}
		kind[key] = "file"
	}
	return sorted, nil
}

func checkPath(p string) error {
	if p == "" || strings.HasPrefix(p, "/") || path.Clean(p) != p {
		return fmt.Errorf("file path %q must be relative and clean, like EFI/BOOT/BOOTX64.EFI", p)
	}
	for _, name := range strings.Split(p, "/") {
		if name == "." || name == ".." {
			return fmt.Errorf("file path %q must not contain . or ..", p)
		}
		if strings.HasSuffix(name, ".") || strings.HasSuffix(name, " ") || strings.HasPrefix(name, " ") {
			return fmt.Errorf("file path %q: FAT drops leading spaces and trailing dots or spaces of %q", p, name)
		}
		if len(utf16.Encode([]rune(name))) > 255 {
			return fmt.Errorf("file path %q: name %q is longer than FAT's 255 characters", p, name)
		}
		for _, r := range name {
			if r < 0x20 || r > 0xFFFF || strings.ContainsRune(`"*:<>?\|`, r) {
				return fmt.Errorf("file path %q: FAT does not allow the character %q", p, r)
			}
		}
	}
	return nil
}

func checkLabel(label string) error {
	if len(label) > 11 {
		return fmt.Errorf("volume label %q is longer than 11 characters", label)
	}
	const punctuation = " !#$%&'()-@^_`{}~"
	for _, r := range label {
		if !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(punctuation, r)) {
			return fmt.Errorf("volume label %q may hold only A-Z, 0-9 and %q", label, punctuation)
		}
	}
	return nil
}
