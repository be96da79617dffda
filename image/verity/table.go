package verity

import (
	"encoding/hex"
	"fmt"
	"strings"
)

// Table returns the parameters of a dm-verity target as the kernel parses
// them (Documentation/admin-guide/device-mapper/verity.rst):
//
//	1 <data_dev> <hash_dev> <data_block_size> <hash_block_size> <num_data_blocks>
//	<hash_start_block> sha256 <root_digest> <salt> [<#opt_params> <opt_params>…]
//
// hash_start_block is 1 because the superblock occupies block 0 of the hash
// device. A device-mapper table line prefixes this with
// "0 <r.DataSectors()> verity ". opts are optional parameters such as
// "restart_on_corruption" or "panic_on_corruption"; an entry may hold
// several words ("use_fec_from_device /dev/x"), and the count is of words,
// as the kernel counts them.
func Table(dataDev, hashDev string, r *Result, opts ...string) string {
	salt := "-" // the kernel's spelling of "no salt"
	if len(r.Salt) > 0 {
		salt = hex.EncodeToString(r.Salt)
	}
	line := fmt.Sprintf("1 %s %s %d %d %d %d %s %s %s",
		dataDev, hashDev, r.DataBlockSize, r.HashBlockSize, r.DataBlocks, hashStartBlock,
		Algorithm, hex.EncodeToString(r.RootHash), salt)
	var words []string
	for _, o := range opts {
		words = append(words, strings.Fields(o)...)
	}
	if len(words) > 0 {
		line += fmt.Sprintf(" %d %s", len(words), strings.Join(words, " "))
	}
	return line
}

// PartitionUUIDs returns the GPT partition UUIDs of the data (root) and
// hash (root-verity) partitions as the Discoverable Partitions Specification
// ties them to the root hash: the first and the last 128 bits of it. Like
// systemd-repart (which memcpy()s the halves) and systemd-dissect (which
// compares them byte for byte), no RFC 4122 version or variant bits are
// applied: the UUIDs must be the raw hash bytes or discovery fails. A hash
// shorter than 16 bytes, which systemd rejects, yields zero UUIDs.
func PartitionUUIDs(rootHash []byte) (root, verity [16]byte) {
	if len(rootHash) < 16 {
		return root, verity
	}
	copy(root[:], rootHash[:16])
	copy(verity[:], rootHash[len(rootHash)-16:])
	return root, verity
}

// FormatGUID formats u as the canonical lowercase 8-4-4-4-12 string with the
// bytes in order, the form systemd prints (SD_ID128_TO_UUID_STRING) and
// GPT tools such as sfdisk and go-diskfs accept; they apply GPT's
// mixed-endian on-disk byte order themselves when writing the entry.
func FormatGUID(u [16]byte) string {
	h := hex.EncodeToString(u[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
