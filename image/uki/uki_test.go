package uki

import (
	"bytes"
	"debug/pe"
	"encoding/binary"
	"strings"
	"testing"

	drpe "github.com/drover-os/drover/image/pe"
	"github.com/drover-os/drover/image/pe/petest"
)

func testParts() Parts {
	kernel := petest.Stub(5000, 100) // a PE, so its SizeOfImage becomes .linux's virtual size
	return Parts{
		OSRelease: []byte("ID=debian\nIMAGE_ID=minimal\n"),
		Cmdline:   "console=ttyS0 drover.roothash=00ff",
		Uname:     "6.12.0-test",
		Initrd:    bytes.Repeat([]byte{0xab}, 3000),
		Linux:     kernel,
	}
}

func TestBuildLayout(t *testing.T) {
	stub := petest.Stub(9000, 120)
	orig := append([]byte(nil), stub...)
	p := testParts()
	out, err := Build(stub, p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(stub, orig) {
		t.Fatal("Build modified the stub")
	}
	f, err := pe.NewFile(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	opt := f.OptionalHeader.(*pe.OptionalHeader64)
	var names []string
	var prevVirtEnd, prevRawEnd uint32
	for i, s := range f.Sections {
		names = append(names, s.Name)
		if s.VirtualAddress%opt.SectionAlignment != 0 || s.Offset%opt.FileAlignment != 0 || s.Size%opt.FileAlignment != 0 {
			t.Errorf("section %s misaligned: va %#x, offset %#x, raw size %#x", s.Name, s.VirtualAddress, s.Offset, s.Size)
		}
		if i > 0 && (s.VirtualAddress != drpe.AlignUp(prevVirtEnd, opt.SectionAlignment) || s.Offset != prevRawEnd) {
			t.Errorf("section %s at va %#x / offset %#x overlaps or leaves a gap after %#x / %#x", s.Name, s.VirtualAddress, s.Offset, prevVirtEnd, prevRawEnd)
		}
		prevVirtEnd, prevRawEnd = s.VirtualAddress+s.VirtualSize, s.Offset+s.Size
	}
	if got := strings.Join(names, " "); got != ".text .sbat .osrel .cmdline .uname .initrd .linux" {
		t.Errorf("sections %q", got)
	}
	if want := drpe.AlignUp(prevVirtEnd, opt.SectionAlignment); opt.SizeOfImage != want {
		t.Errorf("SizeOfImage %#x, want %#x", opt.SizeOfImage, want)
	}
	if int(prevRawEnd) != len(out) {
		t.Errorf("file is %d bytes, sections end at %d", len(out), prevRawEnd)
	}
	k, _ := drpe.Parse(p.Linux)
	linux := f.Sections[len(f.Sections)-1]
	if linux.VirtualSize != k.Opt.SizeOfImage || linux.Characteristics != 0x40000020 {
		t.Errorf(".linux virtual size %#x (want the kernel's SizeOfImage %#x), characteristics %#x", linux.VirtualSize, k.Opt.SizeOfImage, linux.Characteristics)
	}
	for _, want := range []struct {
		name string
		data []byte
	}{{".osrel", p.OSRelease}, {".cmdline", []byte(p.Cmdline)}, {".uname", []byte(p.Uname)}, {".initrd", p.Initrd}, {".linux", p.Linux}} {
		s := f.Section(want.name)
		got, _ := s.Data()
		if !bytes.Equal(got[:len(want.data)], want.data) || s.Characteristics&0x40000000 == 0 {
			t.Errorf("section %s does not hold its content or is not readable", want.name)
		}
	}
	im, _ := drpe.Parse(out)
	if got, want := binary.LittleEndian.Uint32(out[im.CheckSumOffset():]), drpe.Checksum(out, im.CheckSumOffset()); got != want || got == 0 {
		t.Errorf("CheckSum %#x, want %#x", got, want)
	}
	again, _ := Build(stub, p)
	if !bytes.Equal(out, again) {
		t.Error("two builds differ")
	}
}

func TestSectionsDigests(t *testing.T) {
	out, err := Build(petest.Stub(9000, 120), testParts())
	if err != nil {
		t.Fatal(err)
	}
	secs, err := Sections(out)
	if err != nil {
		t.Fatal(err)
	}
	p := testParts()
	p.Cmdline = strings.Replace(p.Cmdline, "00ff", "00fe", 1)
	out2, _ := Build(petest.Stub(9000, 120), p)
	secs2, _ := Sections(out2)
	var changed []string
	for i := range secs {
		if secs[i] != secs2[i] {
			changed = append(changed, secs[i].Name)
		}
	}
	if strings.Join(changed, ",") != ".cmdline" {
		t.Errorf("changing the command line changed sections %v, want .cmdline only", changed)
	}
}

func TestBuildRefuses(t *testing.T) {
	stub := petest.Stub(9000, 120)
	for name, tc := range map[string]struct {
		stub []byte
		p    func(*Parts)
		want string
	}{
		"no cmdline":     {stub, func(p *Parts) { p.Cmdline = "" }, "needs all of"},
		"trailing data":  {append(append([]byte(nil), stub...), 1, 2, 3), func(*Parts) {}, "after its last section"},
		"not a PE":       {[]byte("hello, not a PE image at all, certainly not one with a header of 64 bytes"), func(*Parts) {}, "not a PE"},
		"no header room": {shrinkHeaders(stub), func(*Parts) {}, "no room"},
	} {
		p := testParts()
		tc.p(&p)
		if _, err := Build(tc.stub, p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", name, err, tc.want)
		}
	}
}

// shrinkHeaders claims SizeOfHeaders ends right after the section table.
func shrinkHeaders(stub []byte) []byte {
	b := append([]byte(nil), stub...)
	im, _ := drpe.Parse(b)
	binary.LittleEndian.PutUint32(b[im.OptionalHeaderOffset()+drpe.FieldSizeOfHeaders:], uint32(im.SectionTableOffset()+2*40+40))
	return b
}

func droverEntry(gen uint32) SBATEntry {
	return SBATEntry{Component: "drover", Generation: gen, Vendor: "drover", Package: "minimal", Version: "20261121.091544", URL: "https://github.com/drover-os/drover"}
}

// TestBuildSBAT: the entries follow the stub's own .sbat lines, header
// first, in the same section; nothing else of the stub moves.
func TestBuildSBAT(t *testing.T) {
	stub := petest.Stub(9000, 120)
	p := testParts()
	p.SBAT = []SBATEntry{droverEntry(3)}
	out, err := Build(stub, p)
	if err != nil {
		t.Fatal(err)
	}
	f, err := pe.NewFile(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	s := f.Section(".sbat")
	data, _ := s.Data()
	want := "sbat,1,SBAT Version,sbat,1,https://github.com/rhboot/shim/blob/main/SBAT.md\n" +
		"drover,3,drover,minimal,20261121.091544,https://github.com/drover-os/drover\n"
	if got := string(data[:s.VirtualSize]); got != want {
		t.Errorf(".sbat holds\n%q\nwant\n%q", got, want)
	}
	if strings.Trim(string(data[s.VirtualSize:]), "\x00") != "" {
		t.Errorf(".sbat has bytes after its CSV: %q", data[s.VirtualSize:])
	}
	plain, _ := Build(stub, testParts())
	a, _ := Sections(plain)
	b, _ := Sections(out)
	for i := range a {
		if (a[i] != b[i]) != (a[i].Name == ".sbat") {
			t.Errorf("section %s: %+v without the entry, %+v with it", a[i].Name, a[i], b[i])
		}
	}
	// Without entries the stub's .sbat is kept byte for byte.
	f0, _ := pe.NewFile(bytes.NewReader(plain))
	if d, _ := f0.Section(".sbat").Data(); !bytes.Equal(d, stub[0x400+0x2400:0x400+0x2400+0x200]) {
		t.Error("Build without SBAT entries changed the stub's .sbat")
	}
	// A stub whose CSV does not end in a newline still gets one line per
	// entry.
	noNL := append([]byte(nil), stub...)
	noNL[0x400+0x2400+75] = 0 // the header's newline
	out, err = Build(noNL, p)
	if err != nil {
		t.Fatal(err)
	}
	f, _ = pe.NewFile(bytes.NewReader(out))
	data, _ = f.Section(".sbat").Data()
	if got := string(data[:f.Section(".sbat").VirtualSize]); got != want {
		t.Errorf("without the stub's newline .sbat holds\n%q\nwant\n%q", got, want)
	}
}

func TestBuildSBATRefuses(t *testing.T) {
	stub := petest.Stub(9000, 120)
	noSBAT := append([]byte(nil), stub...)
	im, _ := drpe.Parse(noSBAT)
	copy(noSBAT[im.SectionTableOffset()+drpe.SectionHeaderSize:], ".data\x00\x00\x00")
	noHeader := append([]byte(nil), stub...)
	copy(noHeader[0x400+0x2400:], "grub,1,")
	long := droverEntry(1)
	long.URL = "https://example.invalid/" + strings.Repeat("x", 400)
	for name, tc := range map[string]struct {
		stub  []byte
		entry SBATEntry
		want  string
	}{
		"generation 0":     {stub, droverEntry(0), "generation 0, want 1 to 2147483647"},
		"generation > int": {stub, droverEntry(1 << 31), "generation 2147483648"},
		"comma":            {stub, SBATEntry{Component: "drover", Generation: 1, Vendor: "a,b", Package: "p", Version: "v", URL: "u"}, `vendor "a,b" must be non-empty, without commas`},
		"newline":          {stub, SBATEntry{Component: "drover", Generation: 1, Vendor: "v", Package: "p\nx,1", Version: "v", URL: "u"}, "without commas, quotes or line breaks"},
		"empty":            {stub, SBATEntry{Component: "drover", Generation: 1, Vendor: "v", Package: "p", URL: "u"}, `version "" must be non-empty`},
		"no room":          {stub, long, "has room for 512 bytes, the merged SBAT needs 541"},
		"no .sbat":         {noSBAT, droverEntry(1), "EFI stub has no .sbat section"},
		"no header":        {noHeader, droverEntry(1), "does not start with the sbat,N header line"},
	} {
		p := testParts()
		p.SBAT = []SBATEntry{tc.entry}
		if _, err := Build(tc.stub, p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", name, err, tc.want)
		}
	}
}
