package formats

import (
	"encoding/binary"
	"fmt"
	"io"
	"time"
)

const (
	vhdFooterSize = 512
	mib           = 1 << 20
	// maxCHSSectors is the largest disk CHS geometry can describe; readers
	// fall back to the footer's current size for disks at or beyond it.
	maxCHSSectors = 65535 * 16 * 255
)

var vhdEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// VHDSize returns the disk size a fixed VHD of a size-byte raw image
// declares: size rounded up to a whole MiB (Azure's and ECS's rule), grown
// by whole MiBs until the CHS geometry the footer must carry also covers
// size. qemu sizes a VHD by its geometry unless the creator is one of a few
// known tools, so without the second rule the last bytes of the image (the
// backup GPT, the end of the last partition) would be cut off.
func VHDSize(size int64) int64 {
	s := roundUp(size, mib)
	for {
		c, h, spt := chsGeometry(s / 512)
		chs := int64(c) * int64(h) * int64(spt)
		if chs*512 >= size || chs == maxCHSSectors {
			return s
		}
		s += mib
	}
}

// WriteVHD writes the size-byte raw image read from src to dst as a fixed
// VHD: the raw bytes, zeros up to VHDSize(size), and the 512-byte footer.
// created is the footer timestamp (the build's epoch, not the clock;
// clamped to 2000-01-01..2136) and uniqueID its identifier, which the
// caller derives from the content.
func WriteVHD(dst io.Writer, src io.Reader, size int64, created time.Time, uniqueID [16]byte) error {
	if size <= 0 || size%512 != 0 {
		return fmt.Errorf("writing VHD: image size %d is not a positive multiple of 512 bytes", size)
	}
	n, err := io.CopyBuffer(dst, io.LimitReader(src, size), make([]byte, mib))
	if err != nil {
		return fmt.Errorf("writing VHD: copying the raw image: %w", err)
	}
	if n != size {
		return fmt.Errorf("writing VHD: the raw image ended after %d of %d bytes: %w", n, size, errShortRead)
	}
	disk := VHDSize(size)
	pad := make([]byte, mib)
	for left := disk - size; left > 0; left -= int64(len(pad)) {
		if _, err := dst.Write(pad[:min(left, int64(len(pad)))]); err != nil {
			return fmt.Errorf("writing VHD: padding to %d bytes: %w", disk, err)
		}
	}
	if _, err := dst.Write(vhdFooter(disk, created, uniqueID)); err != nil {
		return fmt.Errorf("writing VHD: footer: %w", err)
	}
	return nil
}

// vhdFooter builds the footer of a fixed disk per the Virtual Hard Disk
// Image Format Specification (Microsoft, 2006).
func vhdFooter(diskSize int64, created time.Time, uniqueID [16]byte) []byte {
	f := make([]byte, vhdFooterSize)
	be := binary.BigEndian
	copy(f[0:8], "conectix")
	be.PutUint32(f[8:], 2)           // features: the reserved bit, always set
	be.PutUint32(f[12:], 0x00010000) // file format version 1.0
	be.PutUint64(f[16:], ^uint64(0)) // data offset: none, a fixed disk
	be.PutUint32(f[24:], vhdTimestamp(created))
	copy(f[28:32], "drvr")           // creator application
	be.PutUint32(f[32:], 0x00010000) // creator version 1.0
	// Creator host OS: the specification defines only "Wi2k" and "Mac ";
	// readers ignore it, so drover uses the generic one.
	copy(f[36:40], "Wi2k")
	be.PutUint64(f[40:], uint64(diskSize)) // original size
	be.PutUint64(f[48:], uint64(diskSize)) // current size
	c, h, spt := chsGeometry(diskSize / 512)
	be.PutUint16(f[56:], c)
	f[58], f[59] = h, spt
	be.PutUint32(f[60:], 2) // disk type: fixed
	copy(f[68:84], uniqueID[:])
	// f[84] saved state: 0; the rest is reserved zeros.
	be.PutUint32(f[64:], vhdChecksum(f))
	return f
}

// vhdChecksum is the one's complement of the byte sum of the footer
// without its checksum field.
func vhdChecksum(f []byte) uint32 {
	var sum uint32
	for i, b := range f {
		if i < 64 || i >= 68 {
			sum += uint32(b)
		}
	}
	return ^sum
}

func vhdTimestamp(t time.Time) uint32 {
	if t.Before(vhdEpoch) {
		return 0
	}
	return uint32(min(t.Unix()-vhdEpoch.Unix(), 0xFFFFFFFF))
}

// chsGeometry is the specification's CHS algorithm (appendix "CHS
// Calculation") for a disk of totalSectors 512-byte sectors.
func chsGeometry(totalSectors int64) (cylinders uint16, heads, sectorsPerTrack uint8) {
	total := min(totalSectors, maxCHSSectors)
	var spt, hd, cth int64
	if total >= 65535*16*63 {
		spt, hd = 255, 16
		cth = total / spt
	} else {
		spt = 17
		cth = total / spt
		hd = max((cth+1023)/1024, 4)
		if cth >= hd*1024 || hd > 16 {
			spt, hd = 31, 16
			cth = total / spt
		}
		if cth >= hd*1024 {
			spt, hd = 63, 16
			cth = total / spt
		}
	}
	return uint16(cth / hd), uint8(hd), uint8(spt)
}
