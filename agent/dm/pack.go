// Package dm talks to the Linux device-mapper through the ioctls on
// /dev/mapper/control (Documentation/admin-guide/device-mapper and
// include/uapi/linux/dm-ioctl.h): create a device, load a table, resume it,
// remove it. It is the small subset drover-init needs to set up the
// dm-verity root, written in-house because no maintained Go library for it
// is available; packing is pure and tested against golden bytes, the thin
// Control type issues the ioctls.
package dm

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// Sizes of the kernel structures (include/uapi/linux/dm-ioctl.h). struct
// dm_ioctl is 312 bytes on every architecture: the ioctl numbers encode it
// (0xc138fd00 = _IOWR(0xfd, 0, 0x138)).
const (
	headerSize     = 312
	targetSpecSize = 40
	nameLen        = 128 // DM_NAME_LEN, NUL included
	uuidLen        = 129 // DM_UUID_LEN, NUL included
	typeLen        = 16  // DM_MAX_TYPE_NAME, NUL included
)

// Interface version this package speaks. The kernel accepts a request whose
// major version equals its own and whose minor is not newer; 4.0.0 asks for
// nothing beyond what every 4.x kernel has.
var ioctlVersion = [3]uint32{4, 0, 0}

// Header flags (DM_*_FLAG) this package sets or reads.
const (
	FlagReadOnly    uint32 = 1 << 0 // DM_READONLY_FLAG: the loaded table is read-only
	FlagSuspend     uint32 = 1 << 1 // DM_SUSPEND_FLAG: with DEV_SUSPEND, suspend instead of resume
	FlagBufferFull  uint32 = 1 << 8 // DM_BUFFER_FULL_FLAG: the reply did not fit
	flagsKnownInput        = FlagReadOnly | FlagSuspend
)

// Target is one line of a device-mapper table: the sectors
// [Start, Start+Length) of the device are handled by the target Type
// ("verity", "linear", …) with Params as the kernel parses them.
type Target struct {
	Start  uint64 // first sector (512 bytes) of the device this target maps
	Length uint64 // number of sectors
	Type   string
	Params string
}

// String renders the target as `dmsetup table` prints it.
func (t Target) String() string {
	return fmt.Sprintf("%d %d %s %s", t.Start, t.Length, t.Type, t.Params)
}

// Header is the part of struct dm_ioctl a caller needs from a reply.
type Header struct {
	Version     [3]uint32
	DataSize    uint32
	DataStart   uint32
	TargetCount uint32
	OpenCount   int32
	Flags       uint32
	EventNr     uint32
	Dev         uint64 // the kernel's huge_encode_dev(dev_t); see Major/Minor
	Name        string
	UUID        string
}

// Major returns the major number of Dev. The kernel encodes dev_t with
// new_encode_dev: minor low 8 bits, major next 12, then the high minor bits.
func (h Header) Major() uint32 { return uint32((h.Dev & 0xfff00) >> 8) }

// Minor returns the minor number of Dev (see Major).
func (h Header) Minor() uint32 { return uint32(h.Dev&0xff) | uint32((h.Dev>>12)&0xfff00) }

// Request is the input of one ioctl before packing.
type Request struct {
	Name    string
	UUID    string
	Flags   uint32
	Targets []Target // only for DM_TABLE_LOAD
}

// Pack lays out r as the kernel reads it: struct dm_ioctl followed, for a
// table load, by one struct dm_target_spec per target, each followed by its
// NUL-terminated parameter string padded to 8 bytes. Each spec's next field
// is the distance from that spec to the following one, which is how
// dm-ioctl.c walks a table being loaded.
//
// An empty Name is allowed only for requests that name no device
// (DM_VERSION).
func Pack(r Request) ([]byte, error) {
	if r.Name != "" || len(r.Targets) > 0 {
		if err := checkName(r.Name); err != nil {
			return nil, err
		}
	}
	if len(r.UUID) >= uuidLen || strings.IndexByte(r.UUID, 0) >= 0 {
		return nil, fmt.Errorf("device-mapper uuid %q is invalid: use at most %d bytes and no NUL", r.UUID, uuidLen-1)
	}
	if r.Flags&^flagsKnownInput != 0 {
		return nil, fmt.Errorf("device-mapper flags %#x include bits this package does not send", r.Flags)
	}
	payload := make([]byte, 0, 256)
	for i, t := range r.Targets {
		if t.Type == "" || len(t.Type) >= typeLen || strings.IndexByte(t.Type, 0) >= 0 {
			return nil, fmt.Errorf("device-mapper target %d: type %q is invalid: use 1 to %d bytes", i, t.Type, typeLen-1)
		}
		if strings.IndexByte(t.Params, 0) >= 0 {
			return nil, fmt.Errorf("device-mapper target %d (%s): parameters contain a NUL byte", i, t.Type)
		}
		if t.Length == 0 {
			return nil, fmt.Errorf("device-mapper target %d (%s): length is zero sectors", i, t.Type)
		}
		rec := align8(targetSpecSize + len(t.Params) + 1)
		spec := make([]byte, rec)
		binary.LittleEndian.PutUint64(spec[0:], t.Start)
		binary.LittleEndian.PutUint64(spec[8:], t.Length)
		// spec[16:20] status: output only.
		binary.LittleEndian.PutUint32(spec[20:], uint32(rec))
		copy(spec[24:24+typeLen], t.Type)
		copy(spec[targetSpecSize:], t.Params)
		payload = append(payload, spec...)
	}
	b := make([]byte, headerSize+len(payload))
	for i, v := range ioctlVersion {
		binary.LittleEndian.PutUint32(b[4*i:], v)
	}
	binary.LittleEndian.PutUint32(b[12:], uint32(len(b)))
	binary.LittleEndian.PutUint32(b[16:], headerSize)
	binary.LittleEndian.PutUint32(b[20:], uint32(len(r.Targets)))
	binary.LittleEndian.PutUint32(b[28:], r.Flags)
	copy(b[48:48+nameLen], r.Name)
	copy(b[176:176+uuidLen], r.UUID)
	copy(b[headerSize:], payload)
	return b, nil
}

// Unpack reads the header of a reply.
func Unpack(b []byte) (Header, error) {
	if len(b) < headerSize {
		return Header{}, fmt.Errorf("device-mapper reply of %d bytes is shorter than its %d-byte header", len(b), headerSize)
	}
	var h Header
	for i := range h.Version {
		h.Version[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	h.DataSize = binary.LittleEndian.Uint32(b[12:])
	h.DataStart = binary.LittleEndian.Uint32(b[16:])
	h.TargetCount = binary.LittleEndian.Uint32(b[20:])
	h.OpenCount = int32(binary.LittleEndian.Uint32(b[24:]))
	h.Flags = binary.LittleEndian.Uint32(b[28:])
	h.EventNr = binary.LittleEndian.Uint32(b[32:])
	h.Dev = binary.LittleEndian.Uint64(b[40:])
	h.Name = cString(b[48 : 48+nameLen])
	h.UUID = cString(b[176 : 176+uuidLen])
	return h, nil
}

// checkName refuses names the kernel refuses (dm-ioctl.c check_name), with a
// message that says why.
func checkName(name string) error {
	switch {
	case name == "" || name == "." || name == "..":
		return fmt.Errorf("device-mapper name %q is invalid: give a plain name such as \"root\"", name)
	case len(name) >= nameLen:
		return fmt.Errorf("device-mapper name %q is too long: use at most %d bytes", name, nameLen-1)
	case strings.ContainsAny(name, "/\x00"):
		return fmt.Errorf("device-mapper name %q is invalid: it may not contain '/' or NUL", name)
	}
	return nil
}

func align8(n int) int { return (n + 7) &^ 7 }

func cString(b []byte) string {
	if i := strings.IndexByte(string(b), 0); i >= 0 {
		return string(b[:i])
	}
	return string(b)
}
