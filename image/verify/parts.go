package verify

import (
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/drover-os/drover/image/gpt"
	"github.com/drover-os/drover/image/verity"
)

// checkGPT reads the partition table (both copies) and compares every
// entry with the manifest's partitions.
func (v *verifier) checkGPT() {
	l, _, err := gpt.ReadLayout(v.img, v.size)
	if err != nil {
		v.add(PartGPT, "%v: firmware and drover-init find the partitions through this table; %s", err, rebuildHint)
		return
	}
	seen := map[int]bool{}
	for _, want := range v.m.Partitions {
		seen[want.Index] = true
		var got *gpt.Placed
		for i := range l.Parts {
			if l.Parts[i].Index == want.Index {
				got = &l.Parts[i]
			}
		}
		if got == nil {
			v.add(PartGPT, "entry %d (%s) is missing from the partition table; %s", want.Index, want.Name, rebuildHint)
			continue
		}
		for _, f := range [][3]string{
			{"name", got.Name, want.Name},
			{"type", gpt.TypeName(got.Type), want.Type},
			{"uuid", got.UUID, want.UUID},
			{"offset", fmt.Sprint(got.Offset), fmt.Sprint(want.Offset)},
			{"size", fmt.Sprint(got.Length), fmt.Sprint(want.Size)},
		} {
			if f[1] != f[2] {
				v.add(PartGPT, "entry %d (%s): %s is %s, the manifest says %s; drover-init finds root and root-verity by type and UUID, so the node may not boot; %s",
					want.Index, want.Name, f[0], f[1], f[2], rebuildHint)
			}
		}
	}
	for _, p := range l.Parts {
		if !seen[p.Index] {
			v.add(PartGPT, "entry %d (%s, type %s) is not in the manifest: the image was booted (first boot adds the var partition) or repartitioned; verify a fresh copy of the built image",
				p.Index, p.Name, gpt.TypeName(p.Type))
		}
	}
}

// checkVerity recomputes the dm-verity hash tree over the root partition
// and checks it against the stored tree and the manifest's root hash, which
// is what the kernel does block by block on a node.
func (v *verifier) checkVerity() {
	root, tree := v.section("root"), v.section("root-verity")
	if root == nil || tree == nil {
		return
	}
	rp, _ := v.partition("root")
	hp, _ := v.partition("root-verity")
	rootHash, err := hex.DecodeString(v.m.RootHash)
	if err != nil || len(rootHash) != 32 {
		v.add(PartManifest, "root hash %q is not 64 hex digits: pass the manifest written with the image", v.m.RootHash)
		return
	}
	err = verity.Verify(root, rp.Size, tree, rootHash)
	var ce *verity.CorruptionError
	switch {
	case errors.As(err, &ce) && ce.Data:
		v.add(rp.Name, "dm-verity: data block %d (partition offset %d, image offset %d) does not match its digest in the hash tree (sha256 %s, want %s): the root filesystem was modified, and a node reading that block gets an I/O error; %s",
			ce.Block, ce.Offset, rp.Offset+ce.Offset, hex.EncodeToString(ce.Got), hex.EncodeToString(ce.Want), rebuildHint)
	case errors.As(err, &ce) && hex.EncodeToString(ce.Want) == v.m.RootHash:
		v.add(hp.Name, "dm-verity: the top hash block (level %d, partition offset %d, image offset %d) hashes to %s, not the root hash %s: the hash tree or its superblock's salt was modified, or the manifest belongs to another image; %s",
			ce.Level, ce.Offset, hp.Offset+ce.Offset, hex.EncodeToString(ce.Got), v.m.RootHash, rebuildHint)
	case errors.As(err, &ce):
		v.add(hp.Name, "dm-verity: hash block %d of level %d (partition offset %d, image offset %d) does not match its digest in the level above: the hash tree was modified; %s",
			ce.Block, ce.Level, ce.Offset, hp.Offset+ce.Offset, rebuildHint)
	case err != nil:
		v.add(hp.Name, "dm-verity: %v", err)
	default:
		v.explainUnverified(rp.Name, hp.Name, tree)
	}
}

// explainUnverified says where a partition that differs from the manifest
// can differ although its hash tree verifies: in bytes dm-verity never
// reads.
func (v *verifier) explainUnverified(rootName, treeName string, tree interface {
	ReadAt([]byte, int64) (int, error)
}) {
	rp, _ := v.partition(rootName)
	hp, _ := v.partition(treeName)
	sb, err := verity.ReadSuperblock(tree)
	if err != nil {
		return
	}
	covered := int64(sb.DataBlocks) * int64(sb.DataBlockSize)
	if got, ok := v.partSHA[rootName]; ok && got != rp.SHA256 {
		v.add(rootName, "the hash tree verifies, so the difference is in the %d bytes after the %d it covers (the partition's padding): a node never reads them, but this is not the image built; %s",
			rp.Size-covered, covered, rebuildHint)
	}
	if got, ok := v.partSHA[treeName]; ok && got != hp.SHA256 {
		treeSize := verity.HashSize(covered, verity.Params{DataBlockSize: sb.DataBlockSize, HashBlockSize: sb.HashBlockSize})
		v.add(treeName, "the hash tree verifies, so the difference is in a superblock field the tree does not depend on (e.g. its UUID) or in the %d bytes of padding after the %d-byte tree; %s",
			hp.Size-treeSize, treeSize, rebuildHint)
	}
}
