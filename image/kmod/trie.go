package kmod

import (
	"encoding/binary"
	"fmt"
)

// The .bin files are libkmod's index format: a header, then a radix trie.
// Every integer is a big-endian uint32.
//
//	header: magic 0xB007F457, version 0x00020001, offset of the root node
//	node:   prefix string + NUL            (if flag 0x80000000)
//	        first, last byte; (last-first+1) child offsets
//	                                       (if flag 0x20000000)
//	        value count; {priority, value + NUL}...
//	                                       (if flag 0x40000000)
//
// A node offset carries its flags in the top nibble. A missing child is 0.
const (
	indexMagic   = 0xB007F457
	indexVersion = 0x00020001

	flagPrefix   = 0x80000000
	flagValues   = 0x40000000
	flagChildren = 0x20000000
	offsetMask   = 0x0FFFFFFF

	// childMax bounds the child array: libkmod indexes children by a 7-bit
	// character and depmod refuses anything else.
	childMax = 128
)

type trieValue struct {
	priority uint32
	value    string
}

type trieNode struct {
	prefix   string
	values   []trieValue
	children map[byte]*trieNode
}

// trie builds an index the way depmod's in-memory index does, so that the
// same insertions give the same bytes.
type trie struct{ root trieNode }

// insert adds value under key. Values of one key are kept sorted by
// priority; among equal priorities the newest comes first, as in depmod.
func (t *trie) insert(key, value string, priority uint32) error {
	for _, s := range []string{key, value} {
		for i := 0; i < len(s); i++ {
			if s[i] >= childMax {
				return fmt.Errorf("index key %q, value %q: byte 0x%x is not 7-bit ASCII, which the module index cannot hold (depmod refuses it too)", key, value, s[i])
			}
		}
	}
	n := &t.root
	for {
		// Split n where its prefix and the key part ways.
		j := 0
		for j < len(n.prefix) && j < len(key) && n.prefix[j] == key[j] {
			j++
		}
		if j < len(n.prefix) {
			child := &trieNode{prefix: n.prefix[j+1:], values: n.values, children: n.children}
			*n = trieNode{prefix: n.prefix[:j], children: map[byte]*trieNode{n.prefix[j]: child}}
		}
		key = key[j:]
		if key == "" {
			n.addValue(value, priority)
			return nil
		}
		c := key[0]
		next := n.children[c]
		if next == nil {
			if n.children == nil {
				n.children = map[byte]*trieNode{}
			}
			leaf := &trieNode{prefix: key[1:]}
			leaf.addValue(value, priority)
			n.children[c] = leaf
			return nil
		}
		n, key = next, key[1:]
	}
}

func (n *trieNode) addValue(value string, priority uint32) {
	i := 0
	for i < len(n.values) && n.values[i].priority < priority {
		i++
	}
	n.values = append(n.values, trieValue{})
	copy(n.values[i+1:], n.values[i:])
	n.values[i] = trieValue{priority, value}
}

// bytes serialises the trie.
func (t *trie) bytes() []byte {
	buf := make([]byte, 12, 4096)
	binary.BigEndian.PutUint32(buf[0:], indexMagic)
	binary.BigEndian.PutUint32(buf[4:], indexVersion)
	var root uint32
	buf, root = t.root.write(buf)
	binary.BigEndian.PutUint32(buf[8:], root)
	return buf
}

// write appends the subtree of n in pre-order, a node before its children
// and every subtree contiguous, as kmod ≥ 34's depmod writes it (older
// versions wrote children first; libkmod reads both). It returns the node's
// offset with its flags.
func (n *trieNode) write(buf []byte) ([]byte, uint32) {
	off := uint32(len(buf))
	if n.prefix != "" {
		buf = append(append(buf, n.prefix...), 0)
		off |= flagPrefix
	}
	first, last := childMax, -1
	for c := range n.children {
		first, last = min(first, int(c)), max(last, int(c))
	}
	table := 0
	if last >= 0 {
		buf = append(buf, byte(first), byte(last))
		table = len(buf)
		buf = append(buf, make([]byte, 4*(last-first+1))...) // filled in below
		off |= flagChildren
	}
	if len(n.values) > 0 {
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(n.values)))
		for _, v := range n.values {
			buf = binary.BigEndian.AppendUint32(buf, v.priority)
			buf = append(append(buf, v.value...), 0)
		}
		off |= flagValues
	}
	for c := first; c <= last; c++ {
		if child := n.children[byte(c)]; child != nil {
			var childOff uint32
			buf, childOff = child.write(buf)
			binary.BigEndian.PutUint32(buf[table+4*(c-first):], childOff)
		}
	}
	return buf, off
}
