package boot

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"strings"

	"github.com/drover-os/drover/image/verity"
)

// MinVarSize is the smallest /var drover-init creates: below it the node
// could not hold even the container runtime's state.
const MinVarSize = 64 << 20

// varAlign is where the var partition starts: a 1 MiB boundary, as every
// partitioning tool aligns.
const varAlign = 1 << 20

// VarSpec describes the /var partition to find or create.
type VarSpec struct {
	Type     [16]byte // partition type GUID, string order
	Name     string   // GPT partition name (the label)
	MinBytes int64    // refuse to create a smaller partition; 0 means MinVarSize
}

// DiskWrite is one write of a plan.
type DiskWrite struct {
	Offset int64
	Data   []byte
	What   string
}

// VarPlan is the outcome of PlanVarPartition: the var partition and, when
// it has to be created, the writes that create it, in the order that keeps
// a valid primary/backup pair on disk if the node loses power between any
// two of them.
type VarPlan struct {
	Partition    GPTPartition
	SectorSize   int
	Created      bool   // the writes add the partition
	Repaired     bool   // the primary GPT was damaged; the writes restore it from the backup
	OldBackupLBA uint64 // where the backup header was
	NewBackupLBA uint64 // where it is after the writes (the disk's last sector)
	Writes       []DiskWrite
}

// Start returns the partition's offset in bytes.
func (p *VarPlan) Start() int64 { return int64(p.Partition.FirstLBA) * int64(p.SectorSize) }

// Size returns the partition's size in bytes.
func (p *VarPlan) Size() int64 {
	return int64(p.Partition.LastLBA-p.Partition.FirstLBA+1) * int64(p.SectorSize)
}

// String describes the plan in one line.
func (p *VarPlan) String() string {
	if p.Repaired {
		return fmt.Sprintf("var partition %d exists (%d MiB at LBA %d); restore the damaged primary GPT from the backup", p.Partition.Number, p.Size()>>20, p.Partition.FirstLBA)
	}
	if !p.Created {
		return fmt.Sprintf("var partition %d exists (%d MiB at LBA %d)", p.Partition.Number, p.Size()>>20, p.Partition.FirstLBA)
	}
	s := fmt.Sprintf("create var partition %d (%d MiB at LBA %d, PARTUUID %s)",
		p.Partition.Number, p.Size()>>20, p.Partition.FirstLBA, verity.FormatGUID(p.Partition.UUID))
	if p.OldBackupLBA != p.NewBackupLBA {
		s += fmt.Sprintf(", move the backup GPT from LBA %d to %d", p.OldBackupLBA, p.NewBackupLBA)
	}
	return s
}

// PlanVarPartition reads the GPT of a disk of diskSize bytes and returns
// the var partition it has, or the writes that add one over all free space
// after the last partition. A disk larger than the image still has its
// backup GPT where the image ended, so the plan moves it to the disk's end
// and fixes the primary header's alternate and last-usable LBAs; both
// headers' and entry arrays' CRCs are recomputed. Nothing is written here.
func PlanVarPartition(disk io.ReaderAt, diskSize int64, sectorSize int, spec VarSpec) (*VarPlan, error) {
	if sectorSize < 512 || sectorSize&(sectorSize-1) != 0 {
		return nil, fmt.Errorf("sector size %d is not a power of two of at least 512", sectorSize)
	}
	ss := int64(sectorSize)
	diskSectors := uint64(diskSize / ss)
	t, fromBackup, err := loadGPT(disk, sectorSize, diskSectors)
	if err != nil {
		return nil, err
	}
	h := t.header
	plan := &VarPlan{SectorSize: sectorSize, OldBackupLBA: h.alternateLBA}
	if fromBackup {
		// Rebuild the primary where every tool puts it: header at LBA 1,
		// entries right after.
		h.myLBA, h.alternateLBA, h.entriesLBA = 1, diskSectors-1, 2
		plan.OldBackupLBA = diskSectors - 1
	}

	var existing []GPTPartition
	var lastEnd uint64
	free := -1
	for _, p := range t.parts {
		if p.Type == spec.Type {
			existing = append(existing, p)
		}
		lastEnd = max(lastEnd, p.LastLBA)
	}
	switch len(existing) {
	case 1:
		plan.Partition, plan.NewBackupLBA = existing[0], h.alternateLBA
		if fromBackup {
			plan.Repaired = true
			plan.Writes = []DiskWrite{
				{Offset: int64(h.entriesLBA) * ss, Data: padEntries(t.entries, sectorSize), What: "primary GPT entries (from the backup)"},
				{Offset: ss, Data: h.encode(sectorSize), What: "primary GPT header (from the backup)"},
			}
		}
		if w, ok := protectiveMBRFix(disk, diskSectors); ok {
			plan.Writes = append(plan.Writes, w)
		}
		return plan, nil
	case 0:
	default:
		return nil, fmt.Errorf("the disk has %d var partitions (type %s): remove all but one, or replace the instance",
			len(existing), verity.FormatGUID(spec.Type))
	}
	for i := 0; i < int(h.numEntries); i++ {
		if _, used := parseGPTEntry(t.entries[i*int(h.entrySize):(i+1)*int(h.entrySize)], i+1); !used {
			free = i
			break
		}
	}
	if free < 0 {
		return nil, fmt.Errorf("all %d GPT entries are in use: no slot for the var partition", h.numEntries)
	}
	if h.alternateLBA >= diskSectors || h.lastUsable >= diskSectors {
		return nil, fmt.Errorf("the disk has %d sectors but its GPT reaches LBA %d: the disk is smaller than the image (a truncated copy?); rebuild the disk from the image",
			diskSectors, max(h.alternateLBA, h.lastUsable))
	}

	entryBytes := int64(h.numEntries) * int64(h.entrySize)
	entrySectors := uint64((entryBytes + ss - 1) / ss)
	newAlt := diskSectors - 1
	newBackupEntries := newAlt - entrySectors
	newLastUsable := newBackupEntries - 1
	if newLastUsable < h.lastUsable {
		return nil, fmt.Errorf("the disk's end (LBA %d) leaves no room for the backup GPT after the last usable LBA %d", newAlt, h.lastUsable)
	}
	align := uint64(varAlign / ss)
	if align == 0 {
		align = 1
	}
	start := max(lastEnd+1, h.firstUsable)
	start = (start + align - 1) / align * align
	minBytes := spec.MinBytes
	if minBytes == 0 {
		minBytes = MinVarSize
	}
	if start > newLastUsable || int64(newLastUsable-start+1)*ss < minBytes {
		freeBytes := int64(0)
		if start <= newLastUsable {
			freeBytes = int64(newLastUsable-start+1) * ss
		}
		return nil, fmt.Errorf("the disk has %d MiB free after its last partition, /var needs at least %d MiB: use a system disk at least %d MiB larger than the image",
			freeBytes>>20, minBytes>>20, (minBytes-freeBytes+(1<<20)-1)>>20)
	}

	part := GPTPartition{
		Number:   free + 1,
		Type:     spec.Type,
		UUID:     VarPartitionUUID(h.diskGUID),
		FirstLBA: start,
		LastLBA:  newLastUsable,
		Name:     spec.Name,
	}
	entries := append([]byte(nil), t.entries...)
	encodeGPTEntry(entries[free*int(h.entrySize):(free+1)*int(h.entrySize)], part)
	entriesPadded := padEntries(entries, sectorSize)

	primary := h
	primary.alternateLBA = newAlt
	primary.lastUsable = newLastUsable
	primary.entriesCRC = crc32.ChecksumIEEE(entries)
	backup := primary
	backup.myLBA, backup.alternateLBA, backup.entriesLBA = newAlt, primary.myLBA, newBackupEntries

	plan.Created, plan.Partition, plan.NewBackupLBA = true, part, newAlt
	// Backup first: until the primary is rewritten it still names the old
	// backup, which stays intact, so every prefix of these writes leaves a
	// valid table and a retry plans the same partition again.
	plan.Writes = []DiskWrite{
		{Offset: int64(newBackupEntries) * ss, Data: entriesPadded, What: "backup GPT entries"},
		{Offset: int64(newAlt) * ss, Data: backup.encode(sectorSize), What: "backup GPT header"},
		{Offset: int64(h.entriesLBA) * ss, Data: entriesPadded, What: "primary GPT entries"},
		{Offset: ss, Data: primary.encode(sectorSize), What: "primary GPT header"},
	}
	if w, ok := protectiveMBRFix(disk, diskSectors); ok {
		plan.Writes = append(plan.Writes, w)
	}
	if !fromBackup && h.alternateLBA > h.lastUsable && h.alternateLBA < newBackupEntries {
		// The stale backup header now lies in free space or in the new
		// partition; clear it so no tool mistakes it for the live one.
		// (On a disk grown by only a few sectors the new backup entries
		// already overwrote it.)
		plan.Writes = append(plan.Writes, DiskWrite{Offset: int64(h.alternateLBA) * ss, Data: make([]byte, ss), What: "old backup GPT header (cleared)"})
	}
	return plan, nil
}

// padEntries returns the entry array filled up to whole sectors with
// zeros, as it is written.
func padEntries(entries []byte, sectorSize int) []byte {
	n := (len(entries) + sectorSize - 1) / sectorSize * sectorSize
	b := make([]byte, n)
	copy(b, entries)
	return b
}

// protectiveMBRFix returns the write that makes a standard protective MBR
// (one 0xEE entry from LBA 1) cover the whole disk again, as sgdisk does;
// a hybrid MBR is left as it is.
func protectiveMBRFix(disk io.ReaderAt, diskSectors uint64) (DiskWrite, bool) {
	mbr := make([]byte, 512)
	if _, err := disk.ReadAt(mbr, 0); err != nil || mbr[510] != 0x55 || mbr[511] != 0xaa {
		return DiskWrite{}, false
	}
	e := mbr[mbrPartitionOffset:]
	if e[4] != 0xee || binary.LittleEndian.Uint32(e[8:]) != 1 {
		return DiskWrite{}, false
	}
	for i := 1; i < 4; i++ {
		for _, c := range e[16*i : 16*i+16] {
			if c != 0 {
				return DiskWrite{}, false
			}
		}
	}
	size := uint32(min(diskSectors-1, 0xffffffff))
	if binary.LittleEndian.Uint32(e[12:]) == size {
		return DiskWrite{}, false
	}
	b := binary.LittleEndian.AppendUint32(nil, size)
	return DiskWrite{Offset: mbrPartitionOffset + 12, Data: b, What: "protective MBR size"}, true
}

// VarPartitionUUID derives the var partition's UUID from the disk GUID, so
// a retried first boot picks the same one, with RFC 4122 version 4 and
// variant bits set like any random partition UUID.
func VarPartitionUUID(diskGUID [16]byte) [16]byte {
	sum := sha256.Sum256(append([]byte("drover var partition\x00"), diskGUID[:]...))
	var u [16]byte
	copy(u[:], sum[:16])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

// ApplyWrites performs a plan's writes in order.
func ApplyWrites(w io.WriterAt, writes []DiskWrite) error {
	for _, d := range writes {
		if _, err := w.WriteAt(d.Data, d.Offset); err != nil {
			return fmt.Errorf("writing %s at byte %d: %w", d.What, d.Offset, err)
		}
	}
	return nil
}

// DescribeWrites lists a plan's writes, one per line, for drover.debug.
func DescribeWrites(writes []DiskWrite) string {
	var b strings.Builder
	for _, d := range writes {
		fmt.Fprintf(&b, "  %s: %d bytes at %d\n", d.What, len(d.Data), d.Offset)
	}
	return b.String()
}
