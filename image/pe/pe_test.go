package pe

import (
	"bytes"
	"debug/pe"
	"encoding/binary"
	"testing"

	"github.com/drover-os/drover/image/pe/petest"
)

// TestOffsetsAgreeWithDebugPE: the field offsets drover writes through are
// the fields the standard library's independent PE reader reads.
func TestOffsetsAgreeWithDebugPE(t *testing.T) {
	b := petest.Stub(0x1234, 0x80)
	im, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint32(b[im.CheckSumOffset():], 0xc0ffee01)
	binary.LittleEndian.PutUint32(b[im.CertDirOffset():], 0x4000)
	binary.LittleEndian.PutUint32(b[im.CertDirOffset()+4:], 0x321)
	binary.LittleEndian.PutUint32(b[im.OptionalHeaderOffset()+FieldSizeOfImage:], 0x9000)
	f, err := pe.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	opt := f.OptionalHeader.(*pe.OptionalHeader64)
	if opt.CheckSum != 0xc0ffee01 || opt.SizeOfImage != 0x9000 {
		t.Errorf("debug/pe reads CheckSum %#x, SizeOfImage %#x: the offsets are off", opt.CheckSum, opt.SizeOfImage)
	}
	if d := opt.DataDirectory[CertTableIndex]; d.VirtualAddress != 0x4000 || d.Size != 0x321 {
		t.Errorf("debug/pe reads the certificate table as %+v", d)
	}
	// CertTable reports the header as parsed: parse the edited bytes again.
	if im, err = Parse(b); err != nil {
		t.Fatal(err)
	}
	if off, size := im.CertTable(); off != 0x4000 || size != 0x321 {
		t.Errorf("CertTable() = %#x, %#x", off, size)
	}
	if got := binary.LittleEndian.Uint16(b[im.COFFOffset()+2:]); int(got) != len(f.Sections) {
		t.Errorf("NumberOfSections at COFFOffset+2 is %d, debug/pe counts %d sections", got, len(f.Sections))
	}
	for i, s := range f.Sections {
		name := string(bytes.TrimRight(b[im.SectionTableOffset()+i*SectionHeaderSize:][:8], "\x00"))
		if name != s.Name || im.Sections()[i].Name != s.Name {
			t.Errorf("section %d: table has %q, debug/pe %q", i, name, s.Name)
		}
	}
}

// TestChecksum checks the algorithm on a buffer worked by hand: 16-bit
// words summed with the carry folded back, the CheckSum field counted as
// zero, plus the length.
func TestChecksum(t *testing.T) {
	b := []byte{
		0xff, 0xff, 0x01, 0x00, // 0xffff + 0x0001 = 0x10000 → folded 0x0001
		0xaa, 0xbb, 0xcc, 0xdd, // the CheckSum field: not counted
		0x10, 0x00, 0x20, 0x00, // + 0x10 + 0x20 = 0x0031
		0x05, // odd trailing byte: + 0x05 = 0x0036
	}
	if got, want := Checksum(b, 4), uint32(0x36+len(b)); got != want {
		t.Errorf("Checksum = %#x, want %#x", got, want)
	}
	SetChecksum(b, 4)
	if got := binary.LittleEndian.Uint32(b[4:]); got != 0x36+13 {
		t.Errorf("SetChecksum stored %#x", got)
	}
	// Storing the checksum does not change it (the field is excluded).
	if Checksum(b, 4) != 0x36+13 {
		t.Error("the checksum counts its own field")
	}
}

// TestParseRefuses names what is wrong with an input that is not a PE32+
// image drover can edit.
func TestParseRefuses(t *testing.T) {
	stub := petest.Stub(0x100, 0x10)
	for name, b := range map[string][]byte{
		"empty":     nil,
		"no MZ":     append([]byte("ZM"), stub[2:]...),
		"truncated": stub[:len(stub)-1],
	} {
		if _, err := Parse(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := Parse(stub); err != nil {
		t.Errorf("the test stub: %v", err)
	}
}
