package boot

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io"
	"unicode/utf16"
)

// GPT layout (UEFI specification, chapter 5.3).
const (
	gptSignature       = "EFI PART"
	gptHeaderMinSize   = 92
	gptEntryMinSize    = 128
	gptMaxEntries      = 4096 // far above the 128 every tool writes; bounds what a damaged header can make us read
	gptNameUnits       = 36   // UTF-16 code units in an entry's name
	mbrPartitionOffset = 446
)

// gptHeader is a parsed GPT header; raw keeps the header bytes so fields
// this package does not know survive a rewrite.
type gptHeader struct {
	raw          []byte // HeaderSize bytes
	myLBA        uint64
	alternateLBA uint64
	firstUsable  uint64
	lastUsable   uint64
	diskGUID     [16]byte // string order
	entriesLBA   uint64
	numEntries   uint32
	entrySize    uint32
	entriesCRC   uint32
}

// GPTPartition is one used entry of a partition table.
type GPTPartition struct {
	Number     int      // 1-based slot in the entry array (the kernel's PARTN)
	Type       [16]byte // string order, as ParseGUID returns
	UUID       [16]byte // string order
	FirstLBA   uint64
	LastLBA    uint64
	Attributes uint64
	Name       string
}

// gptTable is a disk's primary GPT as read, with the raw entry array so
// unused and unknown bytes survive a rewrite.
type gptTable struct {
	sectorSize int
	header     gptHeader
	entries    []byte
	parts      []GPTPartition
}

// readGPT reads and checks the primary GPT of a disk with the given logical
// sector size.
func readGPT(r io.ReaderAt, sectorSize int) (*gptTable, error) {
	return readGPTAt(r, sectorSize, 1)
}

// loadGPT reads the primary GPT or, when it is damaged, the backup on the
// disk's last sector: a write of the primary's entries and header can be
// cut between the two, and the backup (always written first) then holds
// the complete table. fromBackup tells which one was read.
func loadGPT(r io.ReaderAt, sectorSize int, diskSectors uint64) (t *gptTable, fromBackup bool, err error) {
	t, err = readGPT(r, sectorSize)
	if err == nil {
		return t, false, nil
	}
	if diskSectors < 3 {
		return nil, false, err
	}
	b, berr := readGPTAt(r, sectorSize, diskSectors-1)
	if berr != nil {
		return nil, false, fmt.Errorf("primary GPT: %w; backup GPT at the disk's end: %v", err, berr)
	}
	return b, true, nil
}

// readGPTAt reads and checks the GPT header at lba and its entry array.
func readGPTAt(r io.ReaderAt, sectorSize int, lba uint64) (*gptTable, error) {
	sector := make([]byte, sectorSize)
	if _, err := r.ReadAt(sector, int64(lba)*int64(sectorSize)); err != nil {
		return nil, fmt.Errorf("reading the GPT header at LBA %d: %w", lba, err)
	}
	h, err := parseGPTHeader(sector)
	if err != nil {
		return nil, err
	}
	if h.myLBA != lba {
		return nil, fmt.Errorf("GPT header at LBA %d says it is at LBA %d: the table is damaged", lba, h.myLBA)
	}
	entries := make([]byte, int(h.numEntries)*int(h.entrySize))
	if _, err := r.ReadAt(entries, int64(h.entriesLBA)*int64(sectorSize)); err != nil {
		return nil, fmt.Errorf("reading %d GPT entries at LBA %d: %w", h.numEntries, h.entriesLBA, err)
	}
	if got := crc32.ChecksumIEEE(entries); got != h.entriesCRC {
		return nil, fmt.Errorf("GPT entry array checksum is %08x, the header says %08x: the table is damaged", got, h.entriesCRC)
	}
	t := &gptTable{sectorSize: sectorSize, header: h, entries: entries}
	for i := 0; i < int(h.numEntries); i++ {
		e := entries[i*int(h.entrySize) : (i+1)*int(h.entrySize)]
		if p, used := parseGPTEntry(e, i+1); used {
			t.parts = append(t.parts, p)
		}
	}
	return t, nil
}

func parseGPTHeader(b []byte) (gptHeader, error) {
	le := binary.LittleEndian
	if len(b) < gptHeaderMinSize || string(b[:8]) != gptSignature {
		return gptHeader{}, fmt.Errorf("no GPT header (signature %q missing): the disk is not a drover image", gptSignature)
	}
	size := le.Uint32(b[12:])
	if size < gptHeaderMinSize || int(size) > len(b) {
		return gptHeader{}, fmt.Errorf("GPT header size %d is invalid", size)
	}
	raw := append([]byte(nil), b[:size]...)
	want := le.Uint32(raw[16:])
	if got := headerCRC(raw); got != want {
		return gptHeader{}, fmt.Errorf("GPT header checksum is %08x, the header says %08x: the table is damaged", got, want)
	}
	h := gptHeader{
		raw:          raw,
		myLBA:        le.Uint64(raw[24:]),
		alternateLBA: le.Uint64(raw[32:]),
		firstUsable:  le.Uint64(raw[40:]),
		lastUsable:   le.Uint64(raw[48:]),
		diskGUID:     guidFromDisk(raw[56:72]),
		entriesLBA:   le.Uint64(raw[72:]),
		numEntries:   le.Uint32(raw[80:]),
		entrySize:    le.Uint32(raw[84:]),
		entriesCRC:   le.Uint32(raw[88:]),
	}
	if h.entrySize < gptEntryMinSize || h.entrySize%8 != 0 || h.numEntries == 0 || h.numEntries > gptMaxEntries {
		return gptHeader{}, fmt.Errorf("GPT header describes %d entries of %d bytes: the table is damaged", h.numEntries, h.entrySize)
	}
	return h, nil
}

// encode returns the header in one sector with fresh checksums; the bytes
// after the header stay zero, as the specification reserves them.
func (h gptHeader) encode(sectorSize int) []byte {
	le := binary.LittleEndian
	b := make([]byte, sectorSize)
	copy(b, h.raw)
	le.PutUint64(b[24:], h.myLBA)
	le.PutUint64(b[32:], h.alternateLBA)
	le.PutUint64(b[40:], h.firstUsable)
	le.PutUint64(b[48:], h.lastUsable)
	d := guidToDisk(h.diskGUID)
	copy(b[56:72], d[:])
	le.PutUint64(b[72:], h.entriesLBA)
	le.PutUint32(b[80:], h.numEntries)
	le.PutUint32(b[84:], h.entrySize)
	le.PutUint32(b[88:], h.entriesCRC)
	le.PutUint32(b[16:], headerCRC(b[:len(h.raw)]))
	return b
}

// headerCRC is the CRC32 of the header with its own CRC field taken as zero.
func headerCRC(raw []byte) uint32 {
	c := append([]byte(nil), raw...)
	binary.LittleEndian.PutUint32(c[16:], 0)
	return crc32.ChecksumIEEE(c)
}

func parseGPTEntry(e []byte, number int) (GPTPartition, bool) {
	le := binary.LittleEndian
	p := GPTPartition{
		Number:     number,
		Type:       guidFromDisk(e[0:16]),
		UUID:       guidFromDisk(e[16:32]),
		FirstLBA:   le.Uint64(e[32:]),
		LastLBA:    le.Uint64(e[40:]),
		Attributes: le.Uint64(e[48:]),
	}
	if p.Type == [16]byte{} {
		return p, false
	}
	units := make([]uint16, 0, gptNameUnits)
	for i := 0; i < gptNameUnits; i++ {
		u := le.Uint16(e[56+2*i:])
		if u == 0 {
			break
		}
		units = append(units, u)
	}
	p.Name = string(utf16.Decode(units))
	return p, true
}

func encodeGPTEntry(e []byte, p GPTPartition) {
	le := binary.LittleEndian
	clear(e)
	t, u := guidToDisk(p.Type), guidToDisk(p.UUID)
	copy(e[0:16], t[:])
	copy(e[16:32], u[:])
	le.PutUint64(e[32:], p.FirstLBA)
	le.PutUint64(e[40:], p.LastLBA)
	le.PutUint64(e[48:], p.Attributes)
	for i, c := range utf16.Encode([]rune(p.Name)) {
		if i == gptNameUnits {
			break
		}
		le.PutUint16(e[56+2*i:], c)
	}
}

// ReadPartitions returns the used entries of a disk's GPT: the primary,
// or the backup on the last sector when the primary is damaged.
func ReadPartitions(r io.ReaderAt, diskSize int64, sectorSize int) ([]GPTPartition, error) {
	t, _, err := loadGPT(r, sectorSize, uint64(diskSize/int64(sectorSize)))
	if err != nil {
		return nil, err
	}
	return t.parts, nil
}

func guidString(u [16]byte) string {
	h := hex.EncodeToString(u[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// GPT stores the first three GUID fields little-endian ("mixed endian");
// the kernel's PARTUUID and every tool print them in string order.
var guidOrder = [16]int{3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15}

func guidFromDisk(b []byte) [16]byte {
	var u [16]byte
	for i, j := range guidOrder {
		u[i] = b[j]
	}
	return u
}

func guidToDisk(u [16]byte) [16]byte {
	var b [16]byte
	for i, j := range guidOrder {
		b[j] = u[i]
	}
	return b
}
