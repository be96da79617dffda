package gpt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"sort"
	"strings"

	diskfsgpt "github.com/diskfs/go-diskfs/partition/gpt"
)

// ReadLayout reads the partition table of a size-byte disk image and checks
// it the way `drover verify` needs: a protective MBR, a valid primary GPT, a
// valid backup GPT in the last sector with the same entries, and partitions
// that lie inside the usable area without overlapping. It returns the layout
// and the disk GUID (lower case).
func ReadLayout(r io.ReaderAt, size int64) (*Layout, string, error) {
	if size%SectorSize != 0 || size < (firstUsableLBA+backupSectors)*SectorSize {
		return nil, "", fmt.Errorf("reading GPT: image size %d is not a multiple of %d or too small for a GPT", size, SectorSize)
	}
	head := make([]byte, firstUsableLBA*SectorSize)
	if _, err := r.ReadAt(head, 0); err != nil {
		return nil, "", fmt.Errorf("reading GPT: reading the first %d sectors: %w", firstUsableLBA, err)
	}
	if err := checkProtectiveMBR(head[:SectorSize]); err != nil {
		return nil, "", fmt.Errorf("reading GPT: %w", err)
	}
	table, err := diskfsgpt.Read(readerAtFile{r, size}, SectorSize, SectorSize)
	if err != nil {
		return nil, "", fmt.Errorf("reading GPT: %w", err)
	}
	if table.RecoveredFromBackup {
		return nil, "", errors.New("reading GPT: the primary GPT is damaged (only the backup is valid); rebuild the image")
	}
	if err := table.Verify(readerAtFile{r, size}, uint64(size)); err != nil {
		return nil, "", fmt.Errorf("reading GPT: backup header: %w", err)
	}
	primaryHeader := head[SectorSize : 2*SectorSize]
	if err := checkBackup(r, size, primaryHeader); err != nil {
		return nil, "", fmt.Errorf("reading GPT: %w", err)
	}

	l := &Layout{
		DiskSize:       size,
		FirstUsableLBA: binary.LittleEndian.Uint64(primaryHeader[40:48]),
		LastUsableLBA:  binary.LittleEndian.Uint64(primaryHeader[48:56]),
	}
	for _, p := range table.Partitions {
		l.Parts = append(l.Parts, Placed{
			Part: Part{
				Name:       p.Name,
				Type:       strings.ToLower(string(p.Type)),
				UUID:       strings.ToLower(p.GUID),
				Size:       int64(p.End-p.Start+1) * SectorSize,
				Attributes: p.Attributes,
			},
			Index:    p.Index,
			FirstLBA: p.Start,
			LastLBA:  p.End,
			Offset:   int64(p.Start) * SectorSize,
			Length:   int64(p.End-p.Start+1) * SectorSize,
		})
	}
	sort.Slice(l.Parts, func(i, j int) bool { return l.Parts[i].FirstLBA < l.Parts[j].FirstLBA })
	l.Align = DefaultAlign
	for i, p := range l.Parts {
		if p.LastLBA < p.FirstLBA || p.FirstLBA < l.FirstUsableLBA || p.LastLBA > l.LastUsableLBA {
			return nil, "", fmt.Errorf("reading GPT: partition %d (%q) spans LBAs %d-%d outside the usable %d-%d", p.Index, p.Name, p.FirstLBA, p.LastLBA, l.FirstUsableLBA, l.LastUsableLBA)
		}
		if i > 0 && p.FirstLBA <= l.Parts[i-1].LastLBA {
			return nil, "", fmt.Errorf("reading GPT: partitions %d and %d overlap", l.Parts[i-1].Index, p.Index)
		}
		for l.Align > SectorSize && p.Offset%l.Align != 0 {
			l.Align /= 2
		}
	}
	sort.Slice(l.Parts, func(i, j int) bool { return l.Parts[i].Index < l.Parts[j].Index })
	return l, strings.ToLower(table.GUID), nil
}

func checkProtectiveMBR(b []byte) error {
	e := b[446:462]
	if b[510] != 0x55 || b[511] != 0xAA || e[4] != 0xEE || binary.LittleEndian.Uint32(e[8:12]) != 1 {
		return errors.New("sector 0 is not a protective MBR (a single type 0xEE partition from LBA 1)")
	}
	if !bytes.Equal(b[462:510], make([]byte, 48)) {
		return errors.New("the protective MBR has more than one partition entry")
	}
	return nil
}

// checkBackup compares the backup header and entry array with the primary:
// go-diskfs validates the primary and the backup header's position but not
// the backup entries, which firmware falls back to when the primary breaks.
func checkBackup(r io.ReaderAt, size int64, primaryHeader []byte) error {
	hdr := make([]byte, SectorSize)
	lastLBA := uint64(size/SectorSize) - 1
	if _, err := r.ReadAt(hdr, int64(lastLBA)*SectorSize); err != nil {
		return fmt.Errorf("reading the backup header: %w", err)
	}
	if string(hdr[0:8]) != "EFI PART" {
		return errors.New("the last sector holds no backup GPT header")
	}
	hsize := binary.LittleEndian.Uint32(hdr[12:16])
	if hsize < 92 || hsize > SectorSize {
		return fmt.Errorf("the backup header has an invalid size %d", hsize)
	}
	check := bytes.Clone(hdr[:hsize])
	copy(check[16:20], []byte{0, 0, 0, 0})
	if crc32.ChecksumIEEE(check) != binary.LittleEndian.Uint32(hdr[16:20]) {
		return errors.New("the backup header's CRC is wrong")
	}
	if my := binary.LittleEndian.Uint64(hdr[24:32]); my != lastLBA {
		return fmt.Errorf("the backup header says it is at LBA %d, not %d", my, lastLBA)
	}
	if !bytes.Equal(hdr[40:72], primaryHeader[40:72]) || !bytes.Equal(hdr[80:92], primaryHeader[80:92]) {
		return errors.New("the backup header disagrees with the primary (usable LBAs, disk GUID or entries)")
	}
	primaryArray, err := readArray(r, primaryHeader, lastLBA)
	if err != nil {
		return fmt.Errorf("reading the primary entry array: %w", err)
	}
	backupArray, err := readArray(r, hdr, lastLBA)
	if err != nil {
		return fmt.Errorf("reading the backup entry array: %w", err)
	}
	if !bytes.Equal(primaryArray, backupArray) {
		return errors.New("the backup partition entries differ from the primary")
	}
	return nil
}

// readArray reads the entry array a header points to.
func readArray(r io.ReaderAt, hdr []byte, lastLBA uint64) ([]byte, error) {
	lba := binary.LittleEndian.Uint64(hdr[72:80])
	n := int64(binary.LittleEndian.Uint32(hdr[80:84])) * int64(binary.LittleEndian.Uint32(hdr[84:88]))
	if lba == 0 || lba > lastLBA || n <= 0 || n > 1<<20 || int64(lba)*SectorSize+n > int64(lastLBA+1)*SectorSize {
		return nil, fmt.Errorf("the array (LBA %d, %d bytes) does not fit the disk", lba, n)
	}
	b := make([]byte, n)
	if _, err := r.ReadAt(b, int64(lba)*SectorSize); err != nil {
		return nil, err
	}
	return b, nil
}

// readerAtFile adapts an io.ReaderAt of known size to go-diskfs's
// backend.File; Read only calls ReadAt and, for the backup, Seek(0, End).
type readerAtFile struct {
	r    io.ReaderAt
	size int64
}

func (f readerAtFile) ReadAt(p []byte, off int64) (int, error) { return f.r.ReadAt(p, off) }
func (f readerAtFile) Read([]byte) (int, error)                { return 0, errors.New("gpt: use ReadAt") }
func (f readerAtFile) Stat() (fs.FileInfo, error)              { return nil, errors.New("gpt: no file info") }
func (f readerAtFile) Close() error                            { return nil }
func (f readerAtFile) Seek(off int64, whence int) (int64, error) {
	if whence == io.SeekEnd {
		return f.size + off, nil
	}
	return 0, errors.New("gpt: only Seek(n, io.SeekEnd) is supported")
}
