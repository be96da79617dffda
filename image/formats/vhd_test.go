package formats

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"
)

var testID = [16]byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}

func TestVHDFooter(t *testing.T) {
	raw := testRaw(3 << 20)
	var out bytes.Buffer
	created := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := WriteVHD(&out, bytes.NewReader(raw), int64(len(raw)), created, testID); err != nil {
		t.Fatal(err)
	}
	img := out.Bytes()
	disk := VHDSize(int64(len(raw)))
	if int64(len(img)) != disk+512 {
		t.Fatalf("VHD is %d bytes, want %d of disk and a 512-byte footer", len(img), disk)
	}
	if !bytes.Equal(img[:len(raw)], raw) || !bytes.Equal(img[len(raw):disk], make([]byte, disk-int64(len(raw)))) {
		t.Error("the disk area is not the raw image followed by zeros")
	}
	f := img[disk:]
	be := binary.BigEndian
	for name, check := range map[string]bool{
		"cookie":       string(f[0:8]) == "conectix",
		"features":     be.Uint32(f[8:]) == 2,
		"version":      be.Uint32(f[12:]) == 0x00010000,
		"data offset":  be.Uint64(f[16:]) == 0xFFFFFFFFFFFFFFFF,
		"timestamp":    be.Uint32(f[24:]) == uint32(created.Sub(vhdEpoch).Seconds()),
		"creator":      string(f[28:32]) == "drvr",
		"host OS":      string(f[36:40]) == "Wi2k",
		"orig size":    be.Uint64(f[40:]) == uint64(disk),
		"current size": be.Uint64(f[48:]) == uint64(disk),
		"disk type":    be.Uint32(f[60:]) == 2,
		"unique id":    bytes.Equal(f[68:84], testID[:]),
		"saved state":  f[84] == 0,
		"reserved":     bytes.Equal(f[85:], make([]byte, 427)),
	} {
		if !check {
			t.Errorf("footer field %s is wrong", name)
		}
	}
	var sum uint32
	for i, b := range f {
		if i < 64 || i > 67 {
			sum += uint32(b)
		}
	}
	if got := be.Uint32(f[64:]); got != ^sum {
		t.Errorf("checksum %#x, want %#x", got, ^sum)
	}
	c, h, s := be.Uint16(f[56:]), f[58], f[59]
	if int64(c)*int64(h)*int64(s)*512 < int64(len(raw)) {
		t.Errorf("geometry %d/%d/%d covers less than the raw image", c, h, s)
	}
}

func TestCHSGeometry(t *testing.T) {
	for _, tc := range []struct {
		sectors int64
		c       uint16
		h, s    uint8
	}{
		{131072, 963, 8, 17},              // 64 MiB: short of the size, VHDSize adds a MiB
		{133120, 978, 8, 17},              // 65 MiB
		{4 << 21, 8322, 16, 63},           // 4 GiB
		{65535 * 16 * 63, 16191, 16, 255}, // the switch to 255 sectors per track
		{1 << 40, 65535, 16, 255},         // beyond CHS: clamped to the maximum
	} {
		c, h, s := chsGeometry(tc.sectors)
		if c != tc.c || h != tc.h || s != tc.s {
			t.Errorf("chsGeometry(%d) = %d/%d/%d, want %d/%d/%d", tc.sectors, c, h, s, tc.c, tc.h, tc.s)
		}
	}
}

func TestVHDSize(t *testing.T) {
	for _, size := range []int64{512, 1 << 20, 64 << 20, 64<<20 + 512, 1 << 30, 3<<30 + 7*512, 200 << 30} {
		got := VHDSize(size)
		c, h, s := chsGeometry(got / 512)
		chs := int64(c) * int64(h) * int64(s) * 512
		if got%mib != 0 || got < size || got > size+8*mib || (chs < size && chs != maxCHSSectors*512) {
			t.Errorf("VHDSize(%d) = %d (geometry covers %d)", size, got, chs)
		}
	}
	if VHDSize(64<<20) != 65<<20 {
		t.Errorf("VHDSize(64 MiB) = %d, want 65 MiB (64 MiB's geometry is 130968 sectors)", VHDSize(64<<20))
	}
}

func TestVHDTimestampClamps(t *testing.T) {
	if got := vhdTimestamp(time.Unix(0, 0)); got != 0 {
		t.Errorf("1970 → %d, want 0", got)
	}
	if got := vhdTimestamp(vhdEpoch.Add(90 * time.Second)); got != 90 {
		t.Errorf("epoch+90s → %d", got)
	}
	if got := vhdTimestamp(time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)); got != 0xFFFFFFFF {
		t.Errorf("2200 → %d, want the maximum", got)
	}
}

func TestVHDShortSource(t *testing.T) {
	var out bytes.Buffer
	err := WriteVHD(&out, bytes.NewReader(make([]byte, 1024)), 4096, vhdEpoch, testID)
	if !errors.Is(err, errShortRead) {
		t.Errorf("err = %v, want errShortRead", err)
	}
}
