// Package uki assembles a Unified Kernel Image (UAPI Group UKI
// specification): systemd's EFI stub with the kernel, initrd, command line,
// os-release and kernel release appended as PE sections, laid out as
// systemd's ukify lays them out — each section at the next SectionAlignment
// boundary after the previous one in memory and the next FileAlignment
// boundary in the file, .linux last with the kernel's own SizeOfImage as its
// virtual size (so the stub has room to relocate it), then NumberOfSections,
// SizeOfInitializedData and SizeOfImage updated. Unlike ukify, which leaves
// CheckSum zero, Build stores the real image checksum (firmware ignores it;
// objdump and signing tools show it).
//
// The stub's .sbat section (shim's SBAT.md: a CSV of the components the
// image holds and their security generations) is kept, with the Parts'
// own entries appended in place, as ukify --sbat merges them.
//
// The result is unsigned; image/authenticode signs it for Secure Boot.
package uki

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/drover-os/drover/image/pe"
)

// Parts are the contents of a UKI's sections.
type Parts struct {
	OSRelease []byte // .osrel: the image's os-release (systemd-boot takes the menu title from it)
	Cmdline   string // .cmdline: the whole kernel command line; with Secure Boot on, the stub ignores any other
	Uname     string // .uname: the kernel release, e.g. 6.12.48+deb13-cloud-amd64
	Initrd    []byte // .initrd
	Linux     []byte // .linux: the kernel's EFI image (vmlinuz)
	// SBAT are entries appended to the stub's .sbat, after its own.
	SBAT []SBATEntry
}

// SBATEntry is one component line of an SBAT CSV (shim's SBAT.md):
// component_name,component_generation,vendor_name,vendor_package_name,
// vendor_version,vendor_url. Where SBAT is enforced (shim), an image is
// refused when its generation of a component is below the one the
// SbatLevel variable names.
type SBATEntry struct {
	Component  string
	Generation uint32
	Vendor     string
	Package    string
	Version    string
	URL        string
}

// String is the entry's CSV line, with its newline.
func (e SBATEntry) String() string {
	return fmt.Sprintf("%s,%d,%s,%s,%s,%s\n", e.Component, e.Generation, e.Vendor, e.Package, e.Version, e.URL)
}

func (e SBATEntry) check() error {
	if e.Generation < 1 || e.Generation > 1<<31-1 {
		return fmt.Errorf("SBAT entry %q: generation %d, want 1 to %d", e.Component, e.Generation, 1<<31-1)
	}
	for _, f := range []struct{ name, v string }{
		{"component", e.Component}, {"vendor", e.Vendor}, {"package", e.Package}, {"version", e.Version}, {"url", e.URL},
	} {
		// shim splits on commas and lines; it has no quoting.
		if f.v == "" || strings.ContainsAny(f.v, ",\n\r\x00\"") {
			return fmt.Errorf("SBAT entry %q: %s %q must be non-empty, without commas, quotes or line breaks", e.Component, f.name, f.v)
		}
	}
	return nil
}

// Section characteristics (PE/COFF §4.1), as ukify sets them.
const (
	scnCntCode            = 0x00000020
	scnCntInitializedData = 0x00000040
	scnMemRead            = 0x40000000
)

type section struct {
	name        string
	data        []byte
	virtualSize uint32
	flags       uint32
}

// sections orders the parts as ukify does; .linux is last "to leave
// breathing room for decompression".
func (p Parts) sections() ([]section, error) {
	if len(p.Linux) == 0 || len(p.Initrd) == 0 || p.Cmdline == "" || p.Uname == "" || len(p.OSRelease) == 0 {
		return nil, fmt.Errorf("UKI needs all of .osrel, .cmdline, .uname, .initrd and .linux (got %d, %d, %d, %d, %d bytes)",
			len(p.OSRelease), len(p.Cmdline), len(p.Uname), len(p.Initrd), len(p.Linux))
	}
	data := scnCntInitializedData | scnMemRead
	linuxSize := uint32(len(p.Linux))
	if k, err := pe.Parse(p.Linux); err == nil && k.Opt.SizeOfImage > linuxSize {
		linuxSize = k.Opt.SizeOfImage
	}
	return []section{
		{".osrel", p.OSRelease, uint32(len(p.OSRelease)), uint32(data)},
		{".cmdline", []byte(p.Cmdline), uint32(len(p.Cmdline)), uint32(data)},
		{".uname", []byte(p.Uname), uint32(len(p.Uname)), uint32(data)},
		{".initrd", p.Initrd, uint32(len(p.Initrd)), uint32(data)},
		// ukify marks .linux as code: old kernels booted through the EFI
		// handover protocol run in place.
		{".linux", p.Linux, linuxSize, scnCntCode | scnMemRead},
	}, nil
}

// Build returns stub (systemd's linuxx64.efi.stub) with the parts appended
// as sections. stub is not modified.
func Build(stub []byte, p Parts) ([]byte, error) {
	secs, err := p.sections()
	if err != nil {
		return nil, err
	}
	im, err := pe.Parse(stub)
	if err != nil {
		return nil, fmt.Errorf("EFI stub: %w", err)
	}
	if off, size := im.CertTable(); off != 0 || size != 0 {
		return nil, fmt.Errorf("EFI stub is signed (certificate table of %d bytes); use the unsigned stub from systemd-boot-efi", size)
	}
	existing := im.Sections()
	if len(existing) == 0 {
		return nil, fmt.Errorf("EFI stub has no sections")
	}
	fileAlign, secAlign := im.Opt.FileAlignment, im.Opt.SectionAlignment
	if fileAlign == 0 || fileAlign&(fileAlign-1) != 0 || secAlign == 0 || secAlign&(secAlign-1) != 0 {
		return nil, fmt.Errorf("EFI stub has FileAlignment %d, SectionAlignment %d; both must be powers of two", fileAlign, secAlign)
	}
	var rawEnd, virtEnd uint32
	for _, s := range existing {
		for _, n := range secs {
			if s.Name == n.name {
				return nil, fmt.Errorf("EFI stub already has a %s section", n.name)
			}
		}
		rawEnd = max(rawEnd, s.Offset+s.Size)
		virtEnd = max(virtEnd, s.VirtualAddress+s.VirtualSize)
	}
	if int(rawEnd) != len(stub) {
		// A symbol table or other data after the last section would end up
		// between sections; systemd's stubs have none.
		return nil, fmt.Errorf("EFI stub has %d bytes after its last section; want none", len(stub)-int(rawEnd))
	}
	headerAt := im.SectionTableOffset() + pe.SectionHeaderSize*len(existing)
	if need := headerAt + pe.SectionHeaderSize*len(secs); need > int(im.Opt.SizeOfHeaders) {
		return nil, fmt.Errorf("EFI stub's headers (SizeOfHeaders %d) have no room for %d more section headers (need %d bytes)",
			im.Opt.SizeOfHeaders, len(secs), need)
	}
	for i := headerAt; i < headerAt+pe.SectionHeaderSize*len(secs); i++ {
		if stub[i] != 0 {
			return nil, fmt.Errorf("EFI stub's header space after the section table is not empty at byte %d", i)
		}
	}

	size := pe.AlignUp(rawEnd, fileAlign)
	for _, s := range secs {
		size += pe.AlignUp(uint32(len(s.data)), fileAlign)
	}
	out := make([]byte, size)
	copy(out, stub)
	le := binary.LittleEndian
	raw, virt := pe.AlignUp(rawEnd, fileAlign), pe.AlignUp(virtEnd, secAlign)
	initialized := le.Uint32(out[im.OptionalHeaderOffset()+pe.FieldSizeOfInitializedData:])
	for i, s := range secs {
		h := out[headerAt+i*pe.SectionHeaderSize : headerAt+(i+1)*pe.SectionHeaderSize]
		copy(h[0:8], s.name)
		rawSize := pe.AlignUp(uint32(len(s.data)), fileAlign)
		le.PutUint32(h[8:], s.virtualSize)
		le.PutUint32(h[12:], virt)
		le.PutUint32(h[16:], rawSize)
		le.PutUint32(h[20:], raw)
		le.PutUint32(h[36:], s.flags)
		copy(out[raw:], s.data)
		initialized += s.virtualSize // as ukify counts it
		raw += rawSize
		virt = pe.AlignUp(virt+s.virtualSize, secAlign)
	}
	if len(p.SBAT) > 0 {
		if err := appendSBAT(out, im, p.SBAT, pe.AlignUp(virtEnd, secAlign)); err != nil {
			return nil, err
		}
	}
	le.PutUint16(out[im.COFFOffset()+2:], uint16(len(existing)+len(secs)))
	le.PutUint32(out[im.OptionalHeaderOffset()+pe.FieldSizeOfInitializedData:], initialized)
	le.PutUint32(out[im.OptionalHeaderOffset()+pe.FieldSizeOfImage:], virt)
	pe.SetChecksum(out, im.CheckSumOffset())
	return out, nil
}

// appendSBAT appends entries to the stub's .sbat section in out, in place:
// the CSV grows into the section's file padding (systemd's stubs leave
// most of a 512-byte block) and its VirtualSize with it. A stub whose
// .sbat has no room, or that has none, is refused rather than laid out
// anew. firstNew is the address of the first section Build adds.
func appendSBAT(out []byte, im *pe.Image, entries []SBATEntry, firstNew uint32) error {
	var add strings.Builder
	for _, e := range entries {
		if err := e.check(); err != nil {
			return err
		}
		add.WriteString(e.String())
	}
	secs := im.Sections()
	at := -1
	for i, s := range secs {
		if s.Name == ".sbat" {
			at = i
		}
	}
	if at < 0 {
		return fmt.Errorf("EFI stub has no .sbat section to add %q to (systemd's stubs have one since 250)", strings.TrimSpace(add.String()))
	}
	s := secs[at]
	csv := bytes.TrimRight(out[s.Offset:s.Offset+min(s.VirtualSize, s.Size)], "\x00")
	if !bytes.HasPrefix(csv, []byte("sbat,")) {
		return fmt.Errorf("EFI stub's .sbat does not start with the sbat,N header line: %q", firstLine(csv))
	}
	merged := append(bytes.Clone(csv), '\n')
	if bytes.HasSuffix(csv, []byte("\n")) {
		merged = merged[:len(csv)]
	}
	merged = append(merged, add.String()...)
	room := min(s.Size, firstNew-s.VirtualAddress)
	for _, o := range secs {
		if o.VirtualAddress > s.VirtualAddress {
			room = min(room, o.VirtualAddress-s.VirtualAddress)
		}
	}
	if uint32(len(merged)) > room {
		return fmt.Errorf("EFI stub's .sbat has room for %d bytes, the merged SBAT needs %d", room, len(merged))
	}
	raw := out[s.Offset : s.Offset+s.Size]
	clear(raw)
	copy(raw, merged)
	h := im.SectionTableOffset() + pe.SectionHeaderSize*at
	binary.LittleEndian.PutUint32(out[h+8:], uint32(len(merged)))
	return nil
}

func firstLine(b []byte) string {
	l, _, _ := bytes.Cut(b, []byte("\n"))
	return string(l)
}

// Section describes one section of a PE image for the manifest and
// `drover diff`.
type Section struct {
	Name           string `json:"name"`
	Offset         uint32 `json:"-"` // file offset of the content
	VirtualAddress uint32 `json:"virtualAddress"`
	Size           uint32 `json:"size"` // content bytes: the smaller of the virtual and raw size
	SHA256         string `json:"sha256"`
}

// Sections lists the sections of a PE image with the digest of each one's
// content, the bytes systemd-stub measures.
func Sections(b []byte) ([]Section, error) {
	im, err := pe.Parse(b)
	if err != nil {
		return nil, err
	}
	var out []Section
	for _, s := range im.Sections() {
		n := min(s.VirtualSize, s.Size)
		sum := sha256.Sum256(b[s.Offset : s.Offset+n])
		out = append(out, Section{Name: s.Name, Offset: s.Offset, VirtualAddress: s.VirtualAddress, Size: n, SHA256: hex.EncodeToString(sum[:])})
	}
	return out, nil
}

// SectionData returns the content of s, a section Sections listed for b.
func SectionData(b []byte, s Section) []byte { return b[s.Offset : s.Offset+s.Size] }

// CheckMachine fails unless b is a PE32+ image for the COFF machine type
// machine (0x8664 x86-64, 0xaa64 arm64): a stub, boot loader or kernel of
// the wrong architecture would only be refused by the firmware.
func CheckMachine(b []byte, machine uint16) error {
	im, err := pe.Parse(b)
	if err != nil {
		return err
	}
	if got := im.File.FileHeader.Machine; got != machine {
		return fmt.Errorf("PE machine type is %#x, want %#x (an EFI binary of another architecture)", got, machine)
	}
	return nil
}
