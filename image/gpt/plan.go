package gpt

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"unicode/utf16"

	"github.com/google/uuid"
)

const (
	// SectorSize is the logical sector size drover images use; ECS and QEMU
	// disks present 512-byte sectors.
	SectorSize = 512
	// DefaultAlign is the partition alignment when Plan is given 0: 1 MiB,
	// what sfdisk and systemd-repart use, a multiple of every physical block
	// and erase-block size that matters.
	DefaultAlign = 1 << 20

	maxEntries = 128
	entryBytes = 128
	// arraySectors is the size of one partition entry array: 128 entries of
	// 128 bytes, the minimum the UEFI specification allows and what every
	// tool writes.
	arraySectors = maxEntries * entryBytes / SectorSize
	// firstUsableLBA follows the protective MBR, the primary header and the
	// primary entry array.
	firstUsableLBA = 2 + arraySectors
	// backupSectors is the backup entry array plus the backup header at the
	// end of the disk.
	backupSectors = arraySectors + 1
)

// Part is one partition as the builder asks for it.
type Part struct {
	Name       string // GPT partition label (PARTLABEL), at most 36 UTF-16 code units
	Type       string // partition type GUID, e.g. TypeESP
	UUID       string // unique partition GUID (PARTUUID), chosen by the caller
	Size       int64  // bytes wanted; 0 = up to the end of a fixed-size disk (last partition only)
	Attributes uint64 // GPT attribute bits, e.g. AttrReadOnly
}

// Placed is a partition with its place on the disk.
type Placed struct {
	Part
	Index    int    // 1-based entry number (the N in /dev/vdaN)
	FirstLBA uint64 // first sector
	LastLBA  uint64 // last sector, inclusive
	Offset   int64  // byte offset of the first sector: where the caller writes the contents
	Length   int64  // bytes allotted: Size rounded up to the alignment
}

// Layout is a complete partition plan: what Write lays down and what
// ReadLayout reads back.
type Layout struct {
	DiskSize       int64  // bytes; a multiple of SectorSize
	Align          int64  // partition start and length alignment in bytes
	FirstUsableLBA uint64 // first sector a partition may use
	LastUsableLBA  uint64 // last sector a partition may use
	Parts          []Placed
}

// Plan places parts in order, each starting on an align boundary and
// occupying its size rounded up to align. diskSize 0 sizes the disk to fit
// (the last partition plus the backup GPT, rounded up to align); a fixed
// diskSize must hold everything. align 0 means DefaultAlign.
func Plan(parts []Part, diskSize, align int64) (*Layout, error) {
	if align == 0 {
		align = DefaultAlign
	}
	if align < SectorSize || align%SectorSize != 0 {
		return nil, fmt.Errorf("planning partitions: alignment %d is not a positive multiple of %d bytes", align, SectorSize)
	}
	if diskSize < 0 || diskSize%SectorSize != 0 {
		return nil, fmt.Errorf("planning partitions: disk size %d is not a non-negative multiple of %d bytes", diskSize, SectorSize)
	}
	if len(parts) == 0 {
		return nil, errors.New("planning partitions: no partitions given")
	}
	if len(parts) > maxEntries {
		return nil, fmt.Errorf("planning partitions: %d partitions, a GPT holds at most %d", len(parts), maxEntries)
	}
	normalized, err := normalizeParts(parts, diskSize)
	if err != nil {
		return nil, err
	}

	l := &Layout{Align: align, FirstUsableLBA: firstUsableLBA}
	next := roundUp(firstUsableLBA*SectorSize, align)
	for i, p := range normalized {
		l.Parts = append(l.Parts, Placed{Part: p, Index: i + 1, Offset: next, Length: roundUp(p.Size, align)})
		next += l.Parts[i].Length
	}
	if diskSize == 0 {
		diskSize = roundUp(next+backupSectors*SectorSize, align)
	}
	l.DiskSize = diskSize
	l.LastUsableLBA = uint64(diskSize/SectorSize) - backupSectors - 1
	usableEnd := int64(l.LastUsableLBA+1) * SectorSize

	last := &l.Parts[len(l.Parts)-1]
	if last.Size == 0 {
		last.Length = usableEnd/align*align - last.Offset
		if last.Length <= 0 {
			return nil, fmt.Errorf("planning partitions: no room left on a %d-byte disk for %q (size 0 = rest of disk); make the disk larger", diskSize, last.Name)
		}
	}
	if end := last.Offset + last.Length; end > usableEnd {
		need := roundUp(end+backupSectors*SectorSize, align)
		return nil, fmt.Errorf("planning partitions: a %d-byte disk is too small, the partitions need %d bytes; pass a larger disk size or 0 to fit", diskSize, need)
	}
	for i := range l.Parts {
		p := &l.Parts[i]
		p.FirstLBA = uint64(p.Offset / SectorSize)
		p.LastLBA = uint64((p.Offset+p.Length)/SectorSize) - 1
	}
	return l, nil
}

// normalizeParts validates parts and returns copies with canonical
// lower-case GUIDs.
func normalizeParts(parts []Part, diskSize int64) ([]Part, error) {
	out := make([]Part, len(parts))
	seen := map[uuid.UUID]string{}
	for i, p := range parts {
		what := fmt.Sprintf("partition %d (%q)", i+1, p.Name)
		if n := len(utf16.Encode([]rune(p.Name))); n > 36 {
			return nil, fmt.Errorf("planning %s: the label is %d UTF-16 code units, a GPT label holds 36", what, n)
		}
		if strings.ContainsRune(p.Name, 0) {
			return nil, fmt.Errorf("planning %s: the label contains a NUL character", what)
		}
		typ, err := uuid.Parse(p.Type)
		if err != nil || typ == uuid.Nil {
			return nil, fmt.Errorf("planning %s: type %q is not a non-zero GUID", what, p.Type)
		}
		id, err := uuid.Parse(p.UUID)
		if err != nil || id == uuid.Nil {
			return nil, fmt.Errorf("planning %s: UUID %q is not a non-zero GUID (derive one from the content)", what, p.UUID)
		}
		if other, dup := seen[id]; dup {
			return nil, fmt.Errorf("planning %s: UUID %s is already used by %s", what, id, other)
		}
		seen[id] = what
		switch {
		case p.Size < 0:
			return nil, fmt.Errorf("planning %s: negative size %d", what, p.Size)
		case p.Size == 0 && (i != len(parts)-1 || diskSize == 0):
			return nil, fmt.Errorf("planning %s: size 0 (rest of disk) is allowed only for the last partition of a fixed-size disk", what)
		}
		p.Type, p.UUID = typ.String(), id.String()
		out[i] = p
	}
	return out, nil
}

func roundUp(n, to int64) int64 { return (n + to - 1) / to * to }

// String renders the layout as a table for `drover build --plan`.
func (l *Layout) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "GPT disk: %d bytes (%s), %d sectors of %d bytes, usable LBAs %d-%d, alignment %s\n",
		l.DiskSize, human(l.DiskSize), l.DiskSize/SectorSize, SectorSize, l.FirstUsableLBA, l.LastUsableLBA, human(l.Align))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tLABEL\tTYPE\tFIRST LBA\tLAST LBA\tSIZE\tUUID\tATTRIBUTES")
	for _, p := range l.Parts {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n",
			p.Index, p.Name, TypeName(p.Type), p.FirstLBA, p.LastLBA, human(p.Length), p.UUID, AttributeNames(p.Attributes))
	}
	tw.Flush()
	return b.String()
}

// AttributeNames renders attribute bits as a comma-separated list of names,
// unknown bits as "bitN", no bits as "-".
func AttributeNames(attrs uint64) string {
	names := map[int]string{0: "required", 1: "no-block-io", 2: "legacy-bios-bootable", 59: "growfs", 60: "read-only", 62: "hidden", 63: "no-auto"}
	var out []string
	for bit := 0; bit < 64; bit++ {
		if attrs&(1<<bit) == 0 {
			continue
		}
		if n, ok := names[bit]; ok {
			out = append(out, n)
		} else {
			out = append(out, fmt.Sprintf("bit%d", bit))
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ",")
}

func human(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
