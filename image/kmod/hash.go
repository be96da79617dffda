package kmod

import (
	"cmp"
	"encoding/binary"
	"slices"
)

// depmod writes modules.symbols by walking its symbol hash table: buckets in
// order, keys sorted within a bucket. Nothing reads the text file's order,
// but reproducing it keeps our output byte-identical to depmod's.
const symbolBuckets = 2048

// superFastHash is Paul Hsieh's SuperFastHash as libkmod implements it
// (little-endian 16-bit reads, as on the x86 and arm64 hosts that run depmod).
func superFastHash(key string) uint32 {
	n := len(key)
	hash, rem := uint32(n), n&3
	b := []byte(key)
	for ; len(b) >= 4; b = b[4:] {
		hash += uint32(binary.LittleEndian.Uint16(b))
		tmp := uint32(binary.LittleEndian.Uint16(b[2:]))<<11 ^ hash
		hash = hash<<16 ^ tmp
		hash += hash >> 11
	}
	switch rem {
	case 3:
		hash += uint32(binary.LittleEndian.Uint16(b))
		hash ^= hash << 16
		hash ^= uint32(int32(int8(b[2]))) << 18 // C's char is signed
		hash += hash >> 11
	case 2:
		hash += uint32(binary.LittleEndian.Uint16(b))
		hash ^= hash << 11
		hash += hash >> 17
	case 1:
		hash += uint32(int32(int8(b[0])))
		hash ^= hash << 10
		hash += hash >> 1
	}
	hash ^= hash << 3
	hash += hash >> 5
	hash ^= hash << 4
	hash += hash >> 17
	hash ^= hash << 25
	hash += hash >> 6
	return hash
}

// hashOrder sorts keys into the order libkmod's hash iteration visits them.
func hashOrder(keys []string) {
	bucket := func(k string) uint32 { return superFastHash(k) % symbolBuckets }
	slices.SortFunc(keys, func(a, b string) int {
		if c := cmp.Compare(bucket(a), bucket(b)); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
}
