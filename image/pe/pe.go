// Package pe locates and edits the few PE/COFF header fields that drover's
// UKI assembler (image/uki) and Authenticode signer (image/authenticode)
// both touch, following the Microsoft PE/COFF specification: the optional
// header's CheckSum, SizeOfImage and SizeOfInitializedData, the Certificate
// Table data directory, the section table, and the image checksum. Parsing
// is done by debug/pe; this package adds the file offsets debug/pe does not
// expose. Only PE32+ images (x86-64 and arm64 EFI binaries) are accepted.
package pe

import (
	"bytes"
	"debug/pe"
	"encoding/binary"
	"errors"
	"fmt"
)

// Offsets inside the PE32+ optional header (PE/COFF specification §3.4).
const (
	optSizeOfInitializedData = 8
	optSizeOfImage           = 56
	optSizeOfHeaders         = 60
	optCheckSum              = 64
	optDataDirectories       = 112
	// CertTableIndex is the Certificate Table's index among the data
	// directories ("Attribute Certificate Table", §4.7).
	CertTableIndex = 4
	// SectionHeaderSize is the size of one section table entry (§4).
	SectionHeaderSize = 40
)

// Image is a parsed PE32+ image and the file offsets of the fields drover
// edits.
type Image struct {
	Data     []byte
	File     *pe.File
	Opt      *pe.OptionalHeader64
	coffAt   int // file offset of the COFF file header
	optAt    int // file offset of the optional header
	tableAt  int // file offset of the section table
	sections []*pe.Section
}

// Parse reads b as a PE32+ image. b is kept, not copied.
func Parse(b []byte) (*Image, error) {
	if len(b) < 0x40 || b[0] != 'M' || b[1] != 'Z' {
		return nil, errors.New("not a PE image: no MZ header")
	}
	f, err := pe.NewFile(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("not a PE image: %w", err)
	}
	opt, ok := f.OptionalHeader.(*pe.OptionalHeader64)
	if !ok {
		return nil, errors.New("not a PE32+ image (only 64-bit EFI binaries are supported)")
	}
	lfanew := int(binary.LittleEndian.Uint32(b[0x3c:]))
	im := &Image{Data: b, File: f, Opt: opt, coffAt: lfanew + 4, optAt: lfanew + 4 + 20, sections: f.Sections}
	im.tableAt = im.optAt + int(f.FileHeader.SizeOfOptionalHeader)
	if opt.NumberOfRvaAndSizes <= CertTableIndex {
		return nil, fmt.Errorf("PE image has %d data directories, no Certificate Table entry", opt.NumberOfRvaAndSizes)
	}
	if int(opt.SizeOfHeaders) > len(b) || im.tableAt+SectionHeaderSize*len(f.Sections) > int(opt.SizeOfHeaders) {
		return nil, fmt.Errorf("PE image headers (SizeOfHeaders %d) do not hold its section table", opt.SizeOfHeaders)
	}
	for _, s := range f.Sections {
		if int64(s.Offset)+int64(s.Size) > int64(len(b)) {
			return nil, fmt.Errorf("PE section %s (%d bytes at %d) runs past the end of the %d-byte file", s.Name, s.Size, s.Offset, len(b))
		}
	}
	return im, nil
}

// Sections returns the section headers in table order.
func (im *Image) Sections() []*pe.Section { return im.sections }

// CheckSumOffset is the file offset of the optional header's CheckSum.
func (im *Image) CheckSumOffset() int { return im.optAt + optCheckSum }

// CertDirOffset is the file offset of the Certificate Table data
// directory entry (8 bytes: file offset and size of the table).
func (im *Image) CertDirOffset() int { return im.optAt + optDataDirectories + 8*CertTableIndex }

// CertTable returns the file offset and size of the attribute certificate
// table; both are zero in an unsigned image.
func (im *Image) CertTable() (offset, size uint32) {
	d := im.Opt.DataDirectory[CertTableIndex]
	return d.VirtualAddress, d.Size
}

// SectionTableOffset is the file offset of the first section header.
func (im *Image) SectionTableOffset() int { return im.tableAt }

// COFFOffset is the file offset of the COFF file header.
func (im *Image) COFFOffset() int { return im.coffAt }

// OptionalHeaderOffset is the file offset of the optional header.
func (im *Image) OptionalHeaderOffset() int { return im.optAt }

// Field offsets for SetUint32 callers, relative to the optional header.
const (
	FieldSizeOfInitializedData = optSizeOfInitializedData
	FieldSizeOfImage           = optSizeOfImage
	FieldSizeOfHeaders         = optSizeOfHeaders
)

// Checksum computes the image checksum the way the Windows loader and
// imagehlp's CheckSumMappedFile do: the 16-bit one's-complement-style sum
// of the file, with the CheckSum field itself counted as zero, folded to
// 16 bits, plus the file length.
func Checksum(b []byte, checkSumOffset int) uint32 {
	var sum uint64
	for i := 0; i+1 < len(b); i += 2 {
		if i == checkSumOffset || i == checkSumOffset+2 {
			continue
		}
		sum += uint64(binary.LittleEndian.Uint16(b[i:]))
		sum = (sum & 0xffff) + (sum >> 16)
	}
	if len(b)%2 == 1 {
		sum += uint64(b[len(b)-1])
		sum = (sum & 0xffff) + (sum >> 16)
	}
	sum = (sum & 0xffff) + (sum >> 16)
	return uint32(sum) + uint32(len(b))
}

// SetChecksum stores the image checksum of b, whose CheckSum field is at
// checkSumOffset.
func SetChecksum(b []byte, checkSumOffset int) {
	binary.LittleEndian.PutUint32(b[checkSumOffset:], Checksum(b, checkSumOffset))
}

// AlignUp rounds n up to a multiple of the power of two a.
func AlignUp(n, a uint32) uint32 { return (n + a - 1) &^ (a - 1) }
