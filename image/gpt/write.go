package gpt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"

	diskfsgpt "github.com/diskfs/go-diskfs/partition/gpt"
	"github.com/google/uuid"
)

// Write lays down the protective MBR (sector 0), the primary GPT header and
// entry array (sectors 1-33) and the backup array and header (the last 33
// sectors of l.DiskSize). It writes nothing else: the caller writes each
// partition's contents at l.Parts[i].Offset into a file that is otherwise
// zero (a new one), so the image is the same bytes every time.
func Write(w io.WriterAt, l *Layout, diskGUID string) error {
	id, err := uuid.Parse(diskGUID)
	if err != nil || id == uuid.Nil {
		return fmt.Errorf("writing GPT: disk GUID %q is not a non-zero GUID (derive one from the content)", diskGUID)
	}
	if l == nil || len(l.Parts) == 0 {
		return errors.New("writing GPT: empty layout; build one with gpt.Plan")
	}
	if l.DiskSize%SectorSize != 0 || l.LastUsableLBA != uint64(l.DiskSize/SectorSize)-backupSectors-1 {
		return fmt.Errorf("writing GPT: layout disk size %d does not match its last usable LBA %d; build it with gpt.Plan", l.DiskSize, l.LastUsableLBA)
	}
	table := &diskfsgpt.Table{
		LogicalSectorSize:  SectorSize,
		PhysicalSectorSize: SectorSize,
		GUID:               id.String(),
		// go-diskfs writes only bytes 446-511 of the MBR and leaves the CHS
		// fields zero; writeProtectiveMBR below writes the whole sector.
		ProtectiveMBR: false,
	}
	for _, p := range l.Parts {
		// go-diskfs draws a random GUID for an empty one: refuse it here so
		// a hand-made layout cannot make the table differ build to build.
		for _, g := range [][2]string{{"UUID", p.UUID}, {"type", p.Type}} {
			if id, err := uuid.Parse(g[1]); err != nil || id == uuid.Nil {
				return fmt.Errorf("writing GPT: partition %d (%q) %s %q is not a non-zero GUID; build the layout with gpt.Plan", p.Index, p.Name, g[0], g[1])
			}
		}
		table.Partitions = append(table.Partitions, &diskfsgpt.Partition{
			Index:      p.Index,
			Start:      p.FirstLBA,
			End:        p.LastLBA,
			Size:       uint64(p.Length),
			Type:       diskfsgpt.Type(p.Type),
			Name:       p.Name,
			GUID:       p.UUID,
			Attributes: p.Attributes,
		})
	}
	if err := table.Write(writerAtFile{w}, l.DiskSize); err != nil {
		return fmt.Errorf("writing GPT of a %d-byte disk: %w", l.DiskSize, err)
	}
	if _, err := w.WriteAt(protectiveMBR(l.DiskSize), 0); err != nil {
		return fmt.Errorf("writing protective MBR: %w", err)
	}
	return nil
}

// protectiveMBR returns sector 0 as UEFI 2.10 §5.2.3 describes it: one
// partition of type 0xEE from LBA 1 to the end of the disk (clamped to 32
// bits), starting CHS 0/0/2 and ending CHS 0xFFFFFF, no boot code.
func protectiveMBR(diskSize int64) []byte {
	b := make([]byte, SectorSize)
	e := b[446:462]
	e[0] = 0x00 // not bootable
	e[1], e[2], e[3] = 0x00, 0x02, 0x00
	e[4] = 0xEE
	e[5], e[6], e[7] = 0xFF, 0xFF, 0xFF
	binary.LittleEndian.PutUint32(e[8:12], 1)
	sectors := uint64(diskSize/SectorSize) - 1
	if sectors > 0xFFFFFFFF {
		sectors = 0xFFFFFFFF
	}
	binary.LittleEndian.PutUint32(e[12:16], uint32(sectors))
	b[510], b[511] = 0x55, 0xAA
	return b
}

// writerAtFile adapts an io.WriterAt to go-diskfs's backend.WritableFile;
// Table.Write only calls WriteAt (and Sync when present, which this hides:
// the caller decides when to sync the image).
type writerAtFile struct{ w io.WriterAt }

func (f writerAtFile) WriteAt(p []byte, off int64) (int, error) { return f.w.WriteAt(p, off) }
func (f writerAtFile) ReadAt([]byte, int64) (int, error)        { return 0, errNotReadable }
func (f writerAtFile) Read([]byte) (int, error)                 { return 0, errNotReadable }
func (f writerAtFile) Seek(int64, int) (int64, error)           { return 0, errNotReadable }
func (f writerAtFile) Stat() (fs.FileInfo, error)               { return nil, errNotReadable }
func (f writerAtFile) Close() error                             { return nil }

var errNotReadable = errors.New("gpt: write-only target")
