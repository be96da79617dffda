// Package initrd writes the initial ramdisk: a deterministic newc cpio,
// gzip-compressed, holding drover-init as /init, its configuration and
// exactly the kernel modules it loads. gzip rather than zstd because every
// kernel config decompresses it and the archive is small; what matters is
// that the bytes are the same on every build.
package initrd

import (
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/cavaliergopher/cpio"
	"github.com/klauspost/compress/gzip"
)

// File is one entry. Parent directories are created implicitly.
type File struct {
	Path   string // absolute, e.g. /init
	Mode   uint32 // permission bits
	Data   []byte
	Target string // non-empty: a symlink to Target
	Dir    bool
}

// Write writes files as a gzip-compressed newc cpio to w. Every entry gets
// uid/gid 0, mtime, and an inode number by sorted position. The order of
// files does not matter: a directory given explicitly is that entry whether
// it comes before or after the files below it, and a path given twice or a
// parent that is not a directory is an error in any order.
func Write(w io.Writer, files []File, mtime time.Time) error {
	sorted := make([]File, len(files))
	for i, f := range files {
		f.Path = path.Clean("/" + f.Path)
		sorted[i] = f
	}
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	entries := map[string]File{}
	for i, f := range sorted {
		if i > 0 && sorted[i-1].Path == f.Path {
			return fmt.Errorf("initrd: %s added twice", f.Path)
		}
		entries[f.Path] = f
	}
	for _, f := range sorted {
		for d := path.Dir(f.Path); d != "/"; d = path.Dir(d) {
			parent, ok := entries[d]
			if !ok {
				entries[d] = File{Path: d, Mode: 0o755, Dir: true}
			} else if !parent.Dir {
				return fmt.Errorf("initrd: %s: its parent %s is given as a file or symlink, not a directory", f.Path, d)
			}
		}
	}
	paths := make([]string, 0, len(entries))
	for p := range entries {
		paths = append(paths, p)
	}
	sort.Strings(paths)

	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	cw := cpio.NewWriter(zw)
	for i, p := range paths {
		f := entries[p]
		h := &cpio.Header{
			Name:    strings.TrimPrefix(p, "/"),
			ModTime: mtime,
			Inode:   int64(i + 1),
			Links:   1,
		}
		switch {
		case f.Dir:
			h.Mode = cpio.TypeDir | cpio.FileMode(f.Mode&0o7777)
			h.Links = 2
		case f.Target != "":
			h.Mode = cpio.TypeSymlink | 0o777
			h.Linkname = f.Target
			h.Size = int64(len(f.Target))
		default:
			h.Mode = cpio.TypeReg | cpio.FileMode(f.Mode&0o7777)
			h.Size = int64(len(f.Data))
		}
		if err := cw.WriteHeader(h); err != nil {
			return fmt.Errorf("initrd: %s: %w", p, err)
		}
		data := f.Data
		if f.Target != "" {
			data = []byte(f.Target)
		}
		if _, err := cw.Write(data); err != nil {
			return fmt.Errorf("initrd: %s: %w", p, err)
		}
	}
	if err := cw.Close(); err != nil {
		return fmt.Errorf("initrd: %w", err)
	}
	return zw.Close()
}
