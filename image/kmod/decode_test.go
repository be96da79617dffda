package kmod

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// decodeIndex is an independent reader of libkmod's index format, written
// from the format description (not from trie.go), used to check what the
// writer produced: it returns every key with its values in file order.
func decodeIndex(data []byte) (map[string][]trieValue, error) {
	if len(data) < 12 {
		return nil, fmt.Errorf("index of %d bytes has no header", len(data))
	}
	if m := binary.BigEndian.Uint32(data); m != indexMagic {
		return nil, fmt.Errorf("magic %#x", m)
	}
	if v := binary.BigEndian.Uint32(data[4:]); v != indexVersion {
		return nil, fmt.Errorf("version %#x", v)
	}
	out := map[string][]trieValue{}
	var walk func(off uint32, key string, depth int) error
	walk = func(off uint32, key string, depth int) error {
		if depth > 1000 {
			return fmt.Errorf("trie deeper than 1000 at %q", key)
		}
		p := int(off & offsetMask)
		if p < 12 || p > len(data) {
			return fmt.Errorf("node offset %d out of range", p)
		}
		rd := func(n int) ([]byte, error) {
			if p+n > len(data) {
				return nil, fmt.Errorf("node at %d truncated", off&offsetMask)
			}
			b := data[p : p+n]
			p += n
			return b, nil
		}
		cstr := func() (string, error) {
			i := bytes.IndexByte(data[p:], 0)
			if i < 0 {
				return "", fmt.Errorf("unterminated string at %d", p)
			}
			s := string(data[p : p+i])
			p += i + 1
			return s, nil
		}
		u32 := func() (uint32, error) {
			b, err := rd(4)
			if err != nil {
				return 0, err
			}
			return binary.BigEndian.Uint32(b), nil
		}
		if off&flagPrefix != 0 {
			s, err := cstr()
			if err != nil {
				return err
			}
			key += s
		}
		type child struct {
			c   byte
			off uint32
		}
		var children []child
		if off&flagChildren != 0 {
			fl, err := rd(2)
			if err != nil {
				return err
			}
			first, last := fl[0], fl[1]
			if last < first || last >= childMax {
				return fmt.Errorf("child range %d..%d", first, last)
			}
			for c := int(first); c <= int(last); c++ {
				o, err := u32()
				if err != nil {
					return err
				}
				if o != 0 {
					children = append(children, child{byte(c), o})
				}
			}
		}
		if off&flagValues != 0 {
			n, err := u32()
			if err != nil {
				return err
			}
			for range n {
				prio, err := u32()
				if err != nil {
					return err
				}
				v, err := cstr()
				if err != nil {
					return err
				}
				out[key] = append(out[key], trieValue{prio, v})
			}
		}
		for _, ch := range children {
			if err := walk(ch.off, key+string(ch.c), depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return out, walk(binary.BigEndian.Uint32(data[8:]), "", 0)
}
