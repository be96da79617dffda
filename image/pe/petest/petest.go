// Package petest makes small, valid PE32+ EFI applications for tests of
// the packages that edit PE images, so unit tests need no systemd stub
// from the Debian archive.
package petest

import "encoding/binary"

// Stub returns an unsigned x86-64 EFI application shaped like systemd's
// linuxx64.efi.stub: 0x200 file alignment, 0x1000 section alignment,
// headers with room for more section headers, a .text and a .sbat section
// of the given sizes filled with a pattern, nothing after the last section.
func Stub(textSize, sbatSize int) []byte {
	const (
		lfanew     = 0x80
		optSize    = 240
		headerSize = 0x400
		fileAlign  = 0x200
		secAlign   = 0x1000
	)
	align := func(n, a int) int { return (n + a - 1) / a * a }
	textRaw, sbatRaw := align(textSize, fileAlign), align(sbatSize, fileAlign)
	b := make([]byte, headerSize+textRaw+sbatRaw)
	le := binary.LittleEndian
	b[0], b[1] = 'M', 'Z'
	le.PutUint32(b[0x3c:], lfanew)
	copy(b[lfanew:], "PE\x00\x00")
	coff := lfanew + 4
	le.PutUint16(b[coff:], 0x8664) // Machine: AMD64
	le.PutUint16(b[coff+2:], 2)    // NumberOfSections
	le.PutUint16(b[coff+16:], optSize)
	le.PutUint16(b[coff+18:], 0x22e) // executable, large address aware, stripped
	opt := coff + 20
	le.PutUint16(b[opt:], 0x20b) // PE32+
	le.PutUint32(b[opt+4:], uint32(textRaw))
	le.PutUint32(b[opt+8:], uint32(sbatSize))
	le.PutUint32(b[opt+16:], secAlign) // AddressOfEntryPoint
	le.PutUint32(b[opt+20:], secAlign) // BaseOfCode
	le.PutUint64(b[opt+24:], 0x140000000)
	le.PutUint32(b[opt+32:], secAlign)
	le.PutUint32(b[opt+36:], fileAlign)
	le.PutUint16(b[opt+48:], 1) // subsystem version
	virtEnd := secAlign + align(textSize, secAlign) + align(sbatSize, secAlign)
	le.PutUint32(b[opt+56:], uint32(virtEnd))
	le.PutUint32(b[opt+60:], headerSize)
	le.PutUint16(b[opt+68:], 10) // EFI application
	le.PutUint16(b[opt+70:], 0x160)
	le.PutUint64(b[opt+72:], 1<<20)
	le.PutUint64(b[opt+80:], 1<<12)
	le.PutUint64(b[opt+88:], 1<<20)
	le.PutUint64(b[opt+96:], 1<<12)
	le.PutUint32(b[opt+108:], 16) // NumberOfRvaAndSizes
	table := opt + optSize
	put := func(i int, name string, vsize, va, rawSize, raw int, flags uint32) {
		h := b[table+40*i:]
		copy(h[:8], name)
		le.PutUint32(h[8:], uint32(vsize))
		le.PutUint32(h[12:], uint32(va))
		le.PutUint32(h[16:], uint32(rawSize))
		le.PutUint32(h[20:], uint32(raw))
		le.PutUint32(h[36:], flags)
	}
	put(0, ".text", textSize, secAlign, textRaw, headerSize, 0x60000020)
	put(1, ".sbat", sbatSize, secAlign+align(textSize, secAlign), sbatRaw, headerSize+textRaw, 0x40000040)
	for i := 0; i < textSize; i++ {
		b[headerSize+i] = byte(i*7 + 3)
	}
	sbat := "sbat,1,SBAT Version,sbat,1,https://github.com/rhboot/shim/blob/main/SBAT.md\n"
	copy(b[headerSize+textRaw:headerSize+textRaw+sbatSize], sbat)
	return b
}
