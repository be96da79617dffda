package kmod

import (
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/binary"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// fakeModule describes a synthetic kernel module: the smallest ELF
// relocatable object that has what depmod reads.
type fakeModule struct {
	modinfo  []string // key=value strings of .modinfo
	exports  []string // become __crc_<name> symbols (a modversions kernel)
	ksymtab  []string // __ksymtab_strings content (a kernel without modversions)
	needs    []string // undefined symbols, in symbol-table order
	versions []string // __versions entries
}

// elf builds the object: sections null, .modinfo, [__versions],
// [__ksymtab_strings], .symtab, .strtab, .shstrtab.
func (fm fakeModule) elf() []byte {
	type section struct {
		name       string
		typ        elf.SectionType
		data       []byte
		link, info uint32
		entsize    uint64
	}
	join := func(strs []string, pad bool) []byte {
		var b bytes.Buffer
		if pad {
			b.Write([]byte{0, 0}) // alignment padding, as real sections have
		}
		for _, s := range strs {
			b.WriteString(s)
			b.WriteByte(0)
			if pad {
				b.WriteByte(0)
			}
		}
		return b.Bytes()
	}
	secs := []section{{}, {name: ".modinfo", typ: elf.SHT_PROGBITS, data: join(fm.modinfo, true)}}
	if fm.versions != nil {
		var b []byte
		for _, v := range fm.versions {
			e := make([]byte, 64)
			binary.LittleEndian.PutUint64(e, 0x12345678)
			copy(e[8:], v)
			b = append(b, e...)
		}
		secs = append(secs, section{name: "__versions", typ: elf.SHT_PROGBITS, data: b})
	}
	if fm.ksymtab != nil {
		secs = append(secs, section{name: "__ksymtab_strings", typ: elf.SHT_PROGBITS, data: join(fm.ksymtab, false)})
	}

	strtab := []byte{0}
	addStr := func(s string) uint32 {
		off := uint32(len(strtab))
		strtab = append(append(strtab, s...), 0)
		return off
	}
	var symtab bytes.Buffer
	sym := func(name uint32, info byte, shndx uint16) {
		var e [24]byte
		binary.LittleEndian.PutUint32(e[0:], name)
		e[4] = info
		binary.LittleEndian.PutUint16(e[6:], shndx)
		symtab.Write(e[:])
	}
	sym(0, 0, 0)                     // index 0 is reserved
	sym(0, byte(elf.STT_SECTION), 1) // a nameless section symbol
	globalFrom := uint32(2)
	for _, e := range fm.exports {
		sym(addStr("__crc_"+e), byte(elf.STB_GLOBAL)<<4, uint16(elf.SHN_ABS))
	}
	for _, n := range fm.needs {
		sym(addStr(n), byte(elf.STB_GLOBAL)<<4, uint16(elf.SHN_UNDEF))
	}
	symIdx := uint32(len(secs))
	secs = append(secs,
		section{name: ".symtab", typ: elf.SHT_SYMTAB, data: symtab.Bytes(), link: symIdx + 1, info: globalFrom, entsize: 24},
		section{name: ".strtab", typ: elf.SHT_STRTAB, data: strtab},
		section{name: ".shstrtab", typ: elf.SHT_STRTAB},
	)
	shstr := []byte{0}
	names := make([]uint32, len(secs))
	for i := 1; i < len(secs); i++ {
		names[i] = uint32(len(shstr))
		shstr = append(append(shstr, secs[i].name...), 0)
	}
	secs[len(secs)-1].data = shstr

	var out bytes.Buffer
	out.Write(make([]byte, 64)) // ELF header, filled in below
	offs := make([]uint64, len(secs))
	for i := 1; i < len(secs); i++ {
		for out.Len()%8 != 0 {
			out.WriteByte(0)
		}
		offs[i] = uint64(out.Len())
		out.Write(secs[i].data)
	}
	for out.Len()%8 != 0 {
		out.WriteByte(0)
	}
	shoff := uint64(out.Len())
	for i, s := range secs {
		var h [64]byte
		binary.LittleEndian.PutUint32(h[0:], names[i])
		binary.LittleEndian.PutUint32(h[4:], uint32(s.typ))
		binary.LittleEndian.PutUint64(h[24:], offs[i])
		binary.LittleEndian.PutUint64(h[32:], uint64(len(s.data)))
		binary.LittleEndian.PutUint32(h[40:], s.link)
		binary.LittleEndian.PutUint32(h[44:], s.info)
		binary.LittleEndian.PutUint64(h[48:], 1)
		binary.LittleEndian.PutUint64(h[56:], s.entsize)
		out.Write(h[:])
	}
	b := out.Bytes()
	copy(b, []byte{0x7f, 'E', 'L', 'F', byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)})
	binary.LittleEndian.PutUint16(b[16:], uint16(elf.ET_REL))
	binary.LittleEndian.PutUint16(b[18:], uint16(elf.EM_X86_64))
	binary.LittleEndian.PutUint32(b[20:], uint32(elf.EV_CURRENT))
	binary.LittleEndian.PutUint64(b[40:], shoff)
	binary.LittleEndian.PutUint16(b[52:], 64) // e_ehsize
	binary.LittleEndian.PutUint16(b[58:], 64) // e_shentsize
	binary.LittleEndian.PutUint16(b[60:], uint16(len(secs)))
	binary.LittleEndian.PutUint16(b[62:], uint16(len(secs)-1)) // e_shstrndx
	return b
}

// compress returns data compressed as the extension of name says.
func compress(t *testing.T, name string, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch {
	case bytes.HasSuffix([]byte(name), []byte(".xz")):
		w, err := xz.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	case bytes.HasSuffix([]byte(name), []byte(".zst")):
		w, err := zstd.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	case bytes.HasSuffix([]byte(name), []byte(".gz")):
		w := gzip.NewWriter(&buf)
		w.Write(data)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	default:
		return data
	}
	return buf.Bytes()
}
