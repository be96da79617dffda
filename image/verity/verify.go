package verity

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
)

// CorruptionError reports the first block whose content does not match the
// digest that authenticates it. Verify checks top-down, as the kernel does:
// the root hash authenticates the top hash block, each authenticated level
// the one below it, and level 0 the data; so the named block is the one that
// changed, not its (already trusted) parent.
type CorruptionError struct {
	// Data is true for a data block, false for a hash block.
	Data bool
	// Level is the tree level of a corrupt hash block (0 = the level holding
	// data block digests); -1 for data blocks.
	Level int
	// Block is the block's index within the data, or within its level.
	Block uint64
	// Offset is the block's byte offset in the data or in the hash area.
	Offset int64
	// Want is the trusted digest, Got the digest of the block as read.
	Want, Got []byte
}

func (e *CorruptionError) Error() string {
	what := fmt.Sprintf("data block %d at data offset %d", e.Block, e.Offset)
	if !e.Data {
		what = fmt.Sprintf("hash block %d of level %d at hash offset %d", e.Block, e.Level, e.Offset)
	}
	return fmt.Sprintf("verity: %s is corrupt (digest %s, want %s): the image or its hash partition was modified; rebuild or re-copy it",
		what, hex.EncodeToString(e.Got), hex.EncodeToString(e.Want))
}

// Verify recomputes the hash tree of data with the parameters in hash's
// superblock and checks it against the stored tree and rootHash. It returns
// a *CorruptionError naming the first corrupt block, or another error if
// the superblock or the devices cannot be read. dataSize may exceed the data
// the tree covers (a partition larger than its filesystem), not fall short.
func Verify(data io.ReaderAt, dataSize int64, hash io.ReaderAt, rootHash []byte) error {
	sb, err := ReadSuperblock(hash)
	if err != nil {
		return err
	}
	if sb.Algorithm != Algorithm || sb.HashType != 1 {
		return fmt.Errorf("verity superblock uses %s with hash type %d: only %s with hash type 1 can be verified here; use veritysetup verify",
			sb.Algorithm, sb.HashType, Algorithm)
	}
	if len(rootHash) != digestSize {
		return fmt.Errorf("verity root hash is %d bytes, want %d: pass the %d hex digits from the manifest", len(rootHash), digestSize, 2*digestSize)
	}
	p := Params{DataBlockSize: sb.DataBlockSize, HashBlockSize: sb.HashBlockSize}
	if err := p.validateBlockSizes(); err != nil {
		return fmt.Errorf("verity superblock is unusable: %w", err)
	}
	if sb.DataBlocks == 0 {
		return errors.New("verity superblock declares 0 data blocks: the superblock is corrupt")
	}
	need := int64(sb.DataBlocks) * int64(sb.DataBlockSize)
	if need/int64(sb.DataBlockSize) != int64(sb.DataBlocks) || dataSize < need {
		return fmt.Errorf("verity data is %d bytes but the superblock covers %d data blocks of %d bytes: wrong data partition or truncated image",
			dataSize, sb.DataBlocks, sb.DataBlockSize)
	}
	l := layoutFor(sb.DataBlocks, sb.DataBlockSize, sb.HashBlockSize)

	stored := make([][]byte, len(l.Levels))
	for i, lv := range l.Levels {
		stored[i] = make([]byte, lv.Blocks*uint64(l.HashBlockSize))
		if n, err := hash.ReadAt(stored[i], lv.Offset); n < len(stored[i]) {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("reading verity hash level %d at hash offset %d (hash area must be %d bytes): %w",
				i, lv.Offset, l.HashSize, err)
		}
	}

	// The root hash authenticates the top block: the top-most hash block, or
	// the only data block of a tree without levels.
	top := len(l.Levels) - 1
	if top < 0 {
		got := make([]byte, digestSize)
		if err := digestBlocks(data, 1, int(l.DataBlockSize), sb.Salt, got); err != nil {
			return err
		}
		if !bytes.Equal(got, rootHash) {
			return &CorruptionError{Data: true, Level: -1, Block: 0, Offset: 0, Want: rootHash, Got: got}
		}
		return nil
	}
	got := make([]byte, digestSize)
	if err := digestBlocks(bytes.NewReader(stored[top]), 1, int(l.HashBlockSize), sb.Salt, got); err != nil {
		return err
	}
	if !bytes.Equal(got, rootHash) {
		return &CorruptionError{Level: top, Block: 0, Offset: l.Levels[top].Offset, Want: rootHash, Got: got}
	}

	// Each authenticated level authenticates the blocks of the level below.
	for i := top; i > 0; i-- {
		lower := l.Levels[i-1]
		digests := make([]byte, lower.Blocks*digestSize)
		if err := digestBlocks(bytes.NewReader(stored[i-1]), lower.Blocks, int(l.HashBlockSize), sb.Salt, digests); err != nil {
			return err
		}
		if j, found := firstMismatch(stored[i], digests); found {
			return &CorruptionError{
				Level: i - 1, Block: j, Offset: lower.Offset + int64(j)*int64(l.HashBlockSize),
				Want: slot(stored[i], j), Got: slot(digests, j),
			}
		}
	}

	// Level 0 authenticates the data.
	digests := make([]byte, l.DataBlocks*digestSize)
	if err := digestBlocks(data, l.DataBlocks, int(l.DataBlockSize), sb.Salt, digests); err != nil {
		return err
	}
	if j, found := firstMismatch(stored[0], digests); found {
		return &CorruptionError{
			Data: true, Level: -1, Block: j, Offset: int64(j) * int64(l.DataBlockSize),
			Want: slot(stored[0], j), Got: slot(digests, j),
		}
	}
	return nil
}

// firstMismatch compares the digests in got with the leading digest slots of
// level and returns the index of the first that differs, if any. The slots
// after them are padding, authenticated with the whole block by the level
// above.
func firstMismatch(level, got []byte) (j uint64, found bool) {
	if bytes.Equal(level[:len(got)], got) {
		return 0, false
	}
	for bytes.Equal(slot(level, j), slot(got, j)) {
		j++
	}
	return j, true
}

func slot(b []byte, j uint64) []byte {
	return bytes.Clone(b[j*digestSize : (j+1)*digestSize])
}
