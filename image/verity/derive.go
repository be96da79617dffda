package verity

import (
	"crypto/sha256"
	"fmt"
	"io"
)

// Domain-separation prefixes: changing one changes every image's salt or
// UUID, so they are versioned rather than edited.
const (
	saltDomain = "drover verity salt v1\x00"
	uuidDomain = "drover verity uuid v1\x00"
)

// ContentDigest is the sha256 of the first size bytes of data, the usual
// input of DeriveSalt and DeriveUUID when the caller has no digest of the
// image already.
func ContentDigest(data io.ReaderAt, size int64) ([]byte, error) {
	h := sha256.New()
	n, err := io.CopyBuffer(h, io.NewSectionReader(data, 0, size), make([]byte, chunkBytes))
	if err != nil {
		return nil, fmt.Errorf("hashing verity data for its salt: %w", err)
	}
	if n != size {
		return nil, fmt.Errorf("hashing verity data for its salt: read %d of %d bytes: %w", n, size, io.ErrUnexpectedEOF)
	}
	return h.Sum(nil), nil
}

// DeriveSalt derives the 32-byte verity salt from a digest of the data, so
// the same content always gets the same hash tree (the builder has no
// randomness) while different contents never share a salt.
func DeriveSalt(contentDigest []byte) []byte {
	h := sha256.New()
	h.Write([]byte(saltDomain))
	h.Write(contentDigest)
	return h.Sum(nil)
}

// DeriveUUID derives the superblock UUID from a digest of the data. The
// RFC 9562 version 4 and variant bits are set because veritysetup's own
// UUIDs are random (version 4) ones and tools display it as such.
func DeriveUUID(contentDigest []byte) [16]byte {
	h := sha256.New()
	h.Write([]byte(uuidDomain))
	h.Write(contentDigest)
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

// DeriveParams returns the default Params (4096-byte blocks) with salt and
// UUID derived from contentDigest.
func DeriveParams(contentDigest []byte) Params {
	return Params{
		DataBlockSize: DefaultBlockSize,
		HashBlockSize: DefaultBlockSize,
		Salt:          DeriveSalt(contentDigest),
		UUID:          DeriveUUID(contentDigest),
	}
}
