package kmod

import (
	"bytes"
	"compress/gzip"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// Info is what one kernel module says about itself: its .modinfo strings and
// the symbols it exports and needs.
type Info struct {
	Name        string   // modinfo name= (KBUILD_MODNAME, '_' not '-')
	Depends     []string // modinfo depends=, as the kernel build recorded them
	Aliases     []string // modinfo alias=, in file order
	SoftdepPre  []string // names after "pre:" in every softdep=
	SoftdepPost []string // names after "post:" in every softdep=
	Weakdeps    []string // modinfo weakdep= (kernel ≥ 6.11)
	Firmware    []string // modinfo firmware=
	Builtin     bool     // from modules.builtin.modinfo, not a module file

	// Exports are the symbols the module exports, found the way libkmod
	// finds them: the __crc_<sym> symbols of a modversions kernel, else the
	// __ksymtab_strings section. Empty for built-in modules.
	Exports []string
	// Needs are the undefined symbols in symbol-table order, followed by the
	// __versions entries no undefined symbol matched; depmod resolves
	// dependencies from exactly this list and in this order.
	Needs []string

	// modinfo keeps every key=value pair in file order: depmod writes
	// aliases, softdeps and weakdeps in that order.
	modinfo []keyValue
}

type keyValue struct{ key, value string }

// ModInfo reads a kernel module (.ko, or .ko.xz/.ko.zst/.ko.gz, recognised by
// their magic numbers) and returns its Info.
func ModInfo(data []byte) (*Info, error) {
	raw, err := decompress(data)
	if err != nil {
		return nil, err
	}
	f, err := elf.NewFile(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parsing module ELF: %w", err)
	}
	defer f.Close()

	info := &Info{}
	if s := f.Section(".modinfo"); s != nil {
		b, err := s.Data()
		if err != nil {
			return nil, fmt.Errorf("reading .modinfo: %w", err)
		}
		info.setModinfo(splitStrings(b))
	}
	if err := info.readSymbols(f); err != nil {
		return nil, err
	}
	return info, nil
}

const (
	magicXZ   = "\xfd7zXZ\x00"
	magicZstd = "\x28\xb5\x2f\xfd"
	magicGzip = "\x1f\x8b"
	magicELF  = "\x7fELF"
)

// decompress goes by magic rather than file name, as libkmod does, so a
// mislabelled module still reads.
func decompress(data []byte) ([]byte, error) {
	switch {
	case bytes.HasPrefix(data, []byte(magicELF)):
		return data, nil
	case bytes.HasPrefix(data, []byte(magicXZ)):
		r, err := xz.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("decompressing xz module: %w", err)
		}
		return readAllHint(r, len(data), "xz")
	case bytes.HasPrefix(data, []byte(magicZstd)):
		d, err := zstdDecoder()
		if err != nil {
			return nil, err
		}
		out, err := d.DecodeAll(data, make([]byte, 0, 4*len(data)))
		if err != nil {
			return nil, fmt.Errorf("decompressing zstd module: %w", err)
		}
		return out, nil
	case bytes.HasPrefix(data, []byte(magicGzip)):
		r, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("decompressing gzip module: %w", err)
		}
		return readAllHint(r, len(data), "gzip")
	}
	return nil, errors.New("not a kernel module: neither ELF nor xz, zstd or gzip data")
}

// readAllHint sizes the buffer for the usual 3–4x ratio of compressed
// modules, which saves most of io.ReadAll's regrowing.
func readAllHint(r io.Reader, n int, format string) ([]byte, error) {
	buf := bytes.NewBuffer(make([]byte, 0, 4*n))
	if _, err := buf.ReadFrom(r); err != nil {
		return nil, fmt.Errorf("decompressing %s module: %w", format, err)
	}
	return buf.Bytes(), nil
}

// zstdDecoder is shared: DecodeAll is safe for concurrent use, and a decoder
// is expensive to set up per module.
var zstdDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
	d, err := zstd.NewReader(nil)
	if err != nil {
		return nil, fmt.Errorf("setting up zstd decoder: %w", err)
	}
	return d, nil
})

// splitStrings splits a NUL-separated string table, dropping empty strings
// as libkmod does (sections are padded with NULs for alignment).
func splitStrings(b []byte) []string {
	var out []string
	for len(b) > 0 {
		i := bytes.IndexByte(b, 0)
		if i < 0 {
			i = len(b)
		}
		if i > 0 {
			out = append(out, string(b[:i]))
		}
		if i == len(b) {
			break
		}
		b = b[i+1:]
	}
	return out
}

// setModinfo records key=value strings; a string without '=' is a key with
// an empty value, as libkmod reads it.
func (info *Info) setModinfo(strs []string) {
	for _, s := range strs {
		k, v, _ := strings.Cut(s, "=")
		info.modinfo = append(info.modinfo, keyValue{k, v})
		switch k {
		case "name":
			info.Name = v
		case "depends":
			for d := range strings.SplitSeq(v, ",") {
				if d != "" {
					info.Depends = append(info.Depends, d)
				}
			}
		case "alias":
			info.Aliases = append(info.Aliases, v)
		case "softdep":
			pre, post := parseSoftdep(v)
			info.SoftdepPre = append(info.SoftdepPre, pre...)
			info.SoftdepPost = append(info.SoftdepPost, post...)
		case "weakdep":
			info.Weakdeps = append(info.Weakdeps, v)
		case "firmware":
			info.Firmware = append(info.Firmware, v)
		}
	}
}

// parseSoftdep reads "pre: a b post: c" the way libkmod reads a softdep
// configuration line: names before the first "pre:" or "post:" are ignored.
func parseSoftdep(v string) (pre, post []string) {
	var mode *[]string
	for _, f := range strings.Fields(v) {
		switch f {
		case "pre:":
			mode = &pre
		case "post:":
			mode = &post
		default:
			if mode != nil {
				*mode = append(*mode, f)
			}
		}
	}
	return pre, post
}

// readSymbols fills Exports and Needs from the ELF symbol table.
func (info *Info) readSymbols(f *elf.File) error {
	syms, err := f.Symbols()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return fmt.Errorf("reading module symbol table: %w", err)
	}
	needed := map[string]bool{}
	for _, s := range syms {
		if name, ok := strings.CutPrefix(s.Name, "__crc_"); ok {
			info.Exports = append(info.Exports, name)
		}
		if s.Section == elf.SHN_UNDEF && s.Name != "" {
			info.Needs = append(info.Needs, s.Name)
			needed[s.Name] = true
		}
	}
	if len(info.Exports) == 0 {
		// Without modversions there are no __crc_ symbols; libkmod then
		// takes the names from __ksymtab_strings.
		if s := f.Section("__ksymtab_strings"); s != nil {
			b, err := s.Data()
			if err != nil {
				return fmt.Errorf("reading __ksymtab_strings: %w", err)
			}
			info.Exports = splitStrings(b)
		}
	}
	// __versions entries without an undefined symbol (module_layout on
	// older kernels) are dependencies too as far as depmod is concerned.
	if s := f.Section("__versions"); s != nil {
		b, err := s.Data()
		if err != nil {
			return fmt.Errorf("reading __versions: %w", err)
		}
		entry, crc := 64, 8
		if f.Class == elf.ELFCLASS32 {
			crc = 4
		}
		if len(b)%entry != 0 {
			return nil // libkmod ignores a malformed __versions too
		}
		// An undefined symbol claims the first entry of its name, so a
		// repeated entry is left over, as in libkmod.
		for off := 0; off < len(b); off += entry {
			name := b[off+crc : off+entry]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if n := string(name); needed[n] {
				needed[n] = false
			} else {
				info.Needs = append(info.Needs, n)
			}
		}
	}
	return nil
}
