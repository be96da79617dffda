package verity

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// SuperblockSize is the on-disk size of the verity superblock.
const SuperblockSize = 512

// superblockMagic is the signature at offset 0 ("verity" and two NULs).
var superblockMagic = [8]byte{'v', 'e', 'r', 'i', 't', 'y', 0, 0}

// Byte offsets of cryptsetup's struct verity_sb (little-endian, packed).
const (
	sbOffVersion       = 8
	sbOffHashType      = 12
	sbOffUUID          = 16
	sbOffAlgorithm     = 32
	sbAlgorithmSize    = 32
	sbOffDataBlockSize = 64
	sbOffHashBlockSize = 68
	sbOffDataBlocks    = 72
	sbOffSaltSize      = 80
	sbOffSalt          = 88 // after 6 bytes of padding
)

// Superblock is the veritysetup superblock at the start of the hash area.
type Superblock struct {
	Version       uint32 // superblock version, 1
	HashType      uint32 // 1 = normal (salt first), 0 = Chrome OS (salt last)
	UUID          [16]byte
	Algorithm     string // "sha256"
	DataBlockSize uint32
	HashBlockSize uint32
	DataBlocks    uint64
	Salt          []byte
}

// MarshalBinary encodes the superblock in its 512-byte on-disk form.
func (s *Superblock) MarshalBinary() ([]byte, error) {
	if len(s.Algorithm) >= sbAlgorithmSize {
		return nil, fmt.Errorf("encoding verity superblock: algorithm name %q is longer than %d bytes", s.Algorithm, sbAlgorithmSize-1)
	}
	if len(s.Salt) > maxSaltSize {
		return nil, fmt.Errorf("encoding verity superblock: salt of %d bytes exceeds %d", len(s.Salt), maxSaltSize)
	}
	b := make([]byte, SuperblockSize)
	le := binary.LittleEndian
	copy(b, superblockMagic[:])
	le.PutUint32(b[sbOffVersion:], s.Version)
	le.PutUint32(b[sbOffHashType:], s.HashType)
	copy(b[sbOffUUID:], s.UUID[:])
	copy(b[sbOffAlgorithm:], s.Algorithm)
	le.PutUint32(b[sbOffDataBlockSize:], s.DataBlockSize)
	le.PutUint32(b[sbOffHashBlockSize:], s.HashBlockSize)
	le.PutUint64(b[sbOffDataBlocks:], s.DataBlocks)
	le.PutUint16(b[sbOffSaltSize:], uint16(len(s.Salt)))
	copy(b[sbOffSalt:], s.Salt)
	return b, nil
}

// UnmarshalBinary decodes and sanity-checks an on-disk superblock the way
// cryptsetup does before trusting its fields.
func (s *Superblock) UnmarshalBinary(b []byte) error {
	if len(b) < SuperblockSize {
		return fmt.Errorf("verity superblock is %d bytes, want %d", len(b), SuperblockSize)
	}
	if !bytes.Equal(b[:8], superblockMagic[:]) {
		return errors.New("no verity superblock (signature \"verity\" missing): is this the hash partition, written by veritysetup format or drover?")
	}
	le := binary.LittleEndian
	*s = Superblock{
		Version:       le.Uint32(b[sbOffVersion:]),
		HashType:      le.Uint32(b[sbOffHashType:]),
		Algorithm:     string(bytes.TrimRight(b[sbOffAlgorithm:sbOffAlgorithm+sbAlgorithmSize], "\x00")),
		DataBlockSize: le.Uint32(b[sbOffDataBlockSize:]),
		HashBlockSize: le.Uint32(b[sbOffHashBlockSize:]),
		DataBlocks:    le.Uint64(b[sbOffDataBlocks:]),
	}
	copy(s.UUID[:], b[sbOffUUID:])
	if s.Version != 1 {
		return fmt.Errorf("verity superblock version %d is not supported (only 1)", s.Version)
	}
	if s.HashType > 1 {
		return fmt.Errorf("verity superblock hash type %d is not supported (0 or 1)", s.HashType)
	}
	saltSize := int(le.Uint16(b[sbOffSaltSize:]))
	if saltSize > maxSaltSize {
		return fmt.Errorf("verity superblock salt size %d exceeds %d: the superblock is corrupt", saltSize, maxSaltSize)
	}
	s.Salt = bytes.Clone(b[sbOffSalt : sbOffSalt+saltSize])
	return nil
}

// ReadSuperblock reads the verity superblock at offset 0 of r.
func ReadSuperblock(r io.ReaderAt) (*Superblock, error) {
	b := make([]byte, SuperblockSize)
	if n, err := r.ReadAt(b, 0); n < len(b) {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("reading verity superblock: %w", err)
	}
	var s Superblock
	if err := s.UnmarshalBinary(b); err != nil {
		return nil, fmt.Errorf("reading verity superblock: %w", err)
	}
	return &s, nil
}
