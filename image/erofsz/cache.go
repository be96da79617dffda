package erofsz

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// marshalEncoded is how a file's encoding is cached: the extent count, then
// per extent its length, whether it is plain and, if not, its stream. A
// plain extent's bytes are the file's own and are not stored; a file kept
// uncompressed (nil) has no extents.
func marshalEncoded(e *Encoded) []byte {
	var b []byte
	if e == nil {
		return binary.AppendUvarint(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(e.Extents)))
	for _, x := range e.Extents {
		b = binary.AppendUvarint(b, uint64(x.Len))
		if x.Plain {
			b = append(b, 1)
			continue
		}
		b = append(b, 0)
		b = binary.AppendUvarint(b, uint64(len(x.Data)))
		b = append(b, x.Data...)
	}
	return b
}

// unmarshalEncoded reads what marshalEncoded wrote for data, checking that
// the extents cover data in extentSize steps and that each stream saves a
// block, as encode's would.
func unmarshalEncoded(b, data []byte, extentSize int) (*Encoded, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, errors.New("cached encoding: bad extent count")
	}
	b = b[k:]
	if n == 0 {
		if len(b) != 0 {
			return nil, errors.New("cached encoding: trailing bytes")
		}
		return nil, nil
	}
	if n != uint64((len(data)+extentSize-1)/extentSize) {
		return nil, fmt.Errorf("cached encoding: %d extents for %d bytes", n, len(data))
	}
	e := &Encoded{Extents: make([]Extent, 0, n)}
	off := 0
	for range n {
		l, k := binary.Uvarint(b)
		if k <= 0 || len(b) < k+1 || int(l) != min(extentSize, len(data)-off) {
			return nil, fmt.Errorf("cached encoding: bad extent at %d", off)
		}
		plain := b[k] == 1
		b = b[k+1:]
		x := Extent{Len: int(l), Plain: plain, Data: data[off : off+int(l)]}
		if !plain {
			m, k := binary.Uvarint(b)
			if k <= 0 || uint64(len(b)-k) < m {
				return nil, fmt.Errorf("cached encoding: bad stream at %d", off)
			}
			x.Data = b[k : k+int(m)]
			b = b[k+int(m):]
			if x.Blocks() >= (x.Len+BlockSize-1)/BlockSize || len(x.Data) == 0 || x.Data[0] == 0 {
				return nil, fmt.Errorf("cached encoding: stream at %d does not save a block", off)
			}
		}
		e.Extents = append(e.Extents, x)
		off += int(l)
	}
	if len(b) != 0 {
		return nil, errors.New("cached encoding: trailing bytes")
	}
	return e, nil
}
