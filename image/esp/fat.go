package esp

import (
	"encoding/binary"
	"fmt"
	"time"
)

// minFAT32Clusters is the cluster count below which firmware, following
// Microsoft's FAT specification, reads a volume as FAT16 whatever its boot
// sector says; mkfs.fat refuses to make a smaller FAT32.
const minFAT32Clusters = 65525

const reservedSectors = 32

// geometry is the FAT32 layout fat32.Create picks for a size.
type geometry struct {
	clusterBytes  int64
	sectorsPerFAT int64
	clusters      int64 // data clusters, numbered 2..clusters+1
	dataStart     int64 // byte offset of cluster 2
}

// geometryFor mirrors fat32.Create (go-diskfs v1.9.4): the mkfs.fat cluster
// size table and its sectors-per-FAT formula. finish checks the boot sector
// go-diskfs wrote against it, so a change there fails loudly instead of
// mis-sizing.
func geometryFor(size int64) geometry {
	var cb int64
	switch {
	case size <= 260<<20:
		cb = 512
	case size <= 8<<30:
		cb = 4 << 10
	case size <= 16<<30:
		cb = 8 << 10
	case size <= 32<<30:
		cb = 16 << 10
	default:
		cb = 32 << 10
	}
	spc := cb / sectorSize
	total := size / sectorSize
	denom := sectorSize*spc + 8
	spf := (4*(total-reservedSectors) + denom - 1) / denom
	data := total - reservedSectors - 2*spf
	return geometry{
		clusterBytes:  cb,
		sectorsPerFAT: spf,
		clusters:      max(0, data/spc),
		dataStart:     (reservedSectors + 2*spf) * sectorSize,
	}
}

// fatCovers reports whether the FAT has an entry for every cluster (plus
// the two reserved entries).
func (g geometry) fatCovers() bool {
	return 4*(g.clusters+2) <= g.sectorsPerFAT*sectorSize
}

// finish makes go-diskfs's output reproducible and clean for fsck.fat: it
// stores volumeID as the serial number (boot sector and its backup);
// rewrites the creation, access and modification times of every directory
// entry, the volume label and the "." and ".." entries included, to mtime;
// points ".." of top-level directories at cluster 0 as the FAT specification
// requires for the root (go-diskfs stores the root's cluster 2); frees the
// cluster go-diskfs gives empty files (an empty file has none); and fills in
// the FSInfo free-cluster count and hint, which go-diskfs leaves unknown.
func finish(b []byte, g geometry, volumeID uint32, mtime time.Time) error {
	bps := int64(binary.LittleEndian.Uint16(b[11:13]))
	spc := int64(b[13])
	reserved := int64(binary.LittleEndian.Uint16(b[14:16]))
	spf := int64(binary.LittleEndian.Uint32(b[36:40]))
	root := binary.LittleEndian.Uint32(b[44:48])
	backup := int64(binary.LittleEndian.Uint16(b[50:52]))
	if bps != sectorSize || spc*bps != g.clusterBytes || reserved != reservedSectors || b[16] != 2 || spf != g.sectorsPerFAT || backup == 0 {
		return fmt.Errorf("go-diskfs wrote an unexpected FAT32 boot sector (%d-byte sectors, %d per cluster, %d reserved, %d FATs of %d sectors); esp.geometryFor needs updating",
			bps, spc, reserved, b[16], spf)
	}
	for _, sector := range []int64{0, backup} {
		binary.LittleEndian.PutUint32(b[sector*sectorSize+67:], volumeID)
	}
	date, clock := fatTime(mtime)
	w := walker{
		b: b, g: g, root: root, date: date, clock: clock,
		fat:  b[reserved*bps : (reserved+spf)*bps],
		fat2: b[(reserved+spf)*bps : (reserved+2*spf)*bps],
	}
	if err := w.stampDir(root, 0); err != nil {
		return err
	}
	free, next := uint32(0), uint32(0xFFFFFFFF)
	for c := uint32(2); int64(c) <= g.clusters+1; c++ {
		if binary.LittleEndian.Uint32(w.fat[4*c:])&0x0FFFFFFF == 0 {
			free++
			next = min(next, c)
		}
	}
	fsinfo := int64(binary.LittleEndian.Uint16(b[48:50]))
	for _, sector := range []int64{fsinfo, backup + fsinfo} {
		s := b[sector*sectorSize : (sector+1)*sectorSize]
		if string(s[0:4]) != "RRaA" || string(s[484:488]) != "rrAa" {
			return fmt.Errorf("go-diskfs wrote no FSInfo sector at sector %d", sector)
		}
		binary.LittleEndian.PutUint32(s[488:492], free)
		binary.LittleEndian.PutUint32(s[492:496], next)
	}
	return nil
}

type walker struct {
	b           []byte
	g           geometry
	root        uint32
	fat, fat2   []byte
	date, clock uint16
}

func (w walker) stampDir(first uint32, depth int) error {
	if depth > 64 {
		return fmt.Errorf("directories nest deeper than 64 levels at cluster %d", first)
	}
	chain, err := w.chain(first)
	if err != nil {
		return err
	}
	for _, c := range chain {
		start := w.g.dataStart + int64(c-2)*w.g.clusterBytes
		for off := start; off < start+w.g.clusterBytes; off += 32 {
			e := w.b[off : off+32]
			switch {
			case e[0] == 0x00:
				return nil // no entries follow
			case e[0] == 0xE5, e[11]&0x3F == 0x0F:
				continue // deleted, or a long-name slot (which has no times)
			}
			e[13] = 0 // creation time, 10 ms units
			binary.LittleEndian.PutUint16(e[14:16], w.clock)
			binary.LittleEndian.PutUint16(e[16:18], w.date)
			binary.LittleEndian.PutUint16(e[18:20], w.date)
			binary.LittleEndian.PutUint16(e[22:24], w.clock)
			binary.LittleEndian.PutUint16(e[24:26], w.date)
			name := string(e[0:11])
			cluster := uint32(binary.LittleEndian.Uint16(e[26:28])) | uint32(binary.LittleEndian.Uint16(e[20:22]))<<16
			switch {
			case e[11]&0x08 != 0: // volume label
			case name == "..         " && cluster == w.root:
				setCluster(e, 0)
			case name == ".          " || name == "..         ":
			case e[11]&0x10 != 0:
				if err := w.stampDir(cluster, depth+1); err != nil {
					return err
				}
			case binary.LittleEndian.Uint32(e[28:32]) == 0 && cluster != 0:
				if err := w.freeChain(cluster); err != nil {
					return err
				}
				setCluster(e, 0)
			}
		}
	}
	return nil
}

// freeChain marks the clusters of a chain free in both FATs.
func (w walker) freeChain(first uint32) error {
	chain, err := w.chain(first)
	if err != nil {
		return err
	}
	for _, c := range chain {
		binary.LittleEndian.PutUint32(w.fat[4*c:], 0)
		binary.LittleEndian.PutUint32(w.fat2[4*c:], 0)
	}
	return nil
}

func setCluster(e []byte, c uint32) {
	binary.LittleEndian.PutUint16(e[26:28], uint16(c))
	binary.LittleEndian.PutUint16(e[20:22], uint16(c>>16))
}

// chain follows the FAT from cluster first to its end-of-chain mark.
func (w walker) chain(first uint32) ([]uint32, error) {
	var out []uint32
	for c := first; c < 0x0FFFFFF8; c = binary.LittleEndian.Uint32(w.fat[4*c:]) & 0x0FFFFFFF {
		if c < 2 || int64(c) > w.g.clusters+1 || int64(len(out)) > w.g.clusters {
			return nil, fmt.Errorf("broken cluster chain at cluster %d (starting at %d)", c, first)
		}
		out = append(out, c)
	}
	return out, nil
}

// fatTime encodes t in FAT's date and time fields, clamped to the range
// they can hold (1980-01-01 to 2107-12-31) and rounded down to 2 seconds.
// FAT times carry no zone; drover writes UTC.
func fatTime(t time.Time) (date, clock uint16) {
	t = t.UTC()
	lo := time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)
	hi := time.Date(2107, 12, 31, 23, 59, 58, 0, time.UTC)
	if t.Before(lo) {
		t = lo
	}
	if t.After(hi) {
		t = hi
	}
	date = uint16((t.Year()-1980)<<9 | int(t.Month())<<5 | t.Day())
	clock = uint16(t.Hour()<<11 | t.Minute()<<5 | t.Second()/2)
	return date, clock
}
