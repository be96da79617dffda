package ldcache

import (
	"debug/elf"
	"encoding/binary"
)

// FakeLibrary returns a minimal little-endian ELF64 object of type typ for
// machine with the given DT_SONAME ("" for none): enough for debug/elf and
// for ldconfig's checks. Tests of this and other packages use it in place
// of real libraries.
func FakeLibrary(machine elf.Machine, typ elf.Type, soname string) []byte {
	le := binary.LittleEndian
	dynstr := append([]byte{0}, append([]byte(soname), 0)...)
	shstr := []byte("\x00.dynstr\x00.dynamic\x00.shstrtab\x00")
	const ehdr, phdr, shdr = 64, 56, 64
	dynstrOff := uint64(ehdr + 2*phdr)
	dynOff := (dynstrOff + uint64(len(dynstr)) + 7) &^ 7
	var dyn []byte
	if soname != "" {
		dyn = le.AppendUint64(le.AppendUint64(dyn, uint64(elf.DT_SONAME)), 1)
	}
	dyn = le.AppendUint64(le.AppendUint64(dyn, uint64(elf.DT_STRTAB)), dynstrOff)
	dyn = le.AppendUint64(le.AppendUint64(dyn, uint64(elf.DT_NULL)), 0)
	shstrOff := dynOff + uint64(len(dyn))
	shOff := (shstrOff + uint64(len(shstr)) + 7) &^ 7
	size := shOff + 4*shdr
	b := make([]byte, 0, size)
	b = append(b, 0x7f, 'E', 'L', 'F', byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), 1, 0)
	b = append(b, make([]byte, 8)...)
	b = le.AppendUint16(b, uint16(typ))
	b = le.AppendUint16(b, uint16(machine))
	b = le.AppendUint32(b, 1)
	b = le.AppendUint64(b, 0)     // entry
	b = le.AppendUint64(b, ehdr)  // phoff
	b = le.AppendUint64(b, shOff) // shoff
	b = le.AppendUint32(b, 0)
	for _, v := range []uint16{ehdr, phdr, 2, shdr, 4, 3} {
		b = le.AppendUint16(b, v)
	}
	ph := func(typ elf.ProgType, off, sz uint64) {
		b = le.AppendUint32(b, uint32(typ))
		b = le.AppendUint32(b, uint32(elf.PF_R))
		for _, v := range []uint64{off, off, off, sz, sz, 8} {
			b = le.AppendUint64(b, v)
		}
	}
	ph(elf.PT_LOAD, 0, size)
	ph(elf.PT_DYNAMIC, dynOff, uint64(len(dyn)))
	b = append(b, dynstr...)
	b = append(b, make([]byte, int(dynOff)-len(b))...)
	b = append(b, dyn...)
	b = append(b, shstr...)
	b = append(b, make([]byte, int(shOff)-len(b))...)
	sh := func(name uint32, typ elf.SectionType, off, sz uint64, link uint32, entsize uint64) {
		b = le.AppendUint32(b, name)
		b = le.AppendUint32(b, uint32(typ))
		b = le.AppendUint64(b, 0)
		b = le.AppendUint64(b, off) // addr == offset
		b = le.AppendUint64(b, off)
		b = le.AppendUint64(b, sz)
		b = le.AppendUint32(b, link)
		b = le.AppendUint32(b, 0)
		b = le.AppendUint64(b, 1)
		b = le.AppendUint64(b, entsize)
	}
	sh(0, elf.SHT_NULL, 0, 0, 0, 0)
	sh(1, elf.SHT_STRTAB, dynstrOff, uint64(len(dynstr)), 0, 0)
	sh(9, elf.SHT_DYNAMIC, dynOff, uint64(len(dyn)), 1, 16)
	sh(18, elf.SHT_STRTAB, shstrOff, uint64(len(shstr)), 0, 0)
	return b
}
