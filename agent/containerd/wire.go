package containerd

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
)

// The messages of containerd's API the agent sends and reads, encoded with
// protowire by field number, as containerd's .proto files (api v1.12.0:
// services/content/v1, services/images/v1, services/leases/v1,
// types/descriptor.proto) number them. wire_test.go checks each against
// the code generated from those files.

// Descriptor is containerd.types.Descriptor.
type Descriptor struct {
	MediaType string // 1
	Digest    string // 2
	Size      int64  // 3
}

// Image is containerd.services.images.v1.Image (its timestamps unread).
type Image struct {
	Name   string            // 1
	Labels map[string]string // 2
	Target Descriptor        // 3
}

// contentInfo is containerd.services.content.v1.Info (timestamps unread).
type contentInfo struct {
	Digest string            // 1
	Size   int64             // 2
	Labels map[string]string // 5
}

// writeAction is containerd.services.content.v1.WriteAction.
type writeAction int32

const (
	writeStat   writeAction = 0
	writeData   writeAction = 1 // WRITE
	writeCommit writeAction = 2
)

// writeRequest is containerd.services.content.v1.WriteContentRequest.
type writeRequest struct {
	Action   writeAction       // 1
	Ref      string            // 2
	Total    int64             // 3
	Expected string            // 4
	Offset   int64             // 5
	Data     []byte            // 6
	Labels   map[string]string // 7
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b // proto3: a default value is not written
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func appendInt(b []byte, num protowire.Number, v int64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(v))
}

func appendMessage(b []byte, num protowire.Number, m []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, m)
}

// appendMap writes a map<string, string> as its entries (key 1, value 2),
// in key order so that a message is the same bytes every time.
func appendMap(b []byte, num protowire.Number, m map[string]string) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		var e []byte
		e = appendString(e, 1, k)
		e = appendString(e, 2, m[k])
		b = appendMessage(b, num, e)
	}
	return b
}

// fieldMask is google.protobuf.FieldMask: repeated string paths = 1.
func fieldMask(paths ...string) []byte {
	var b []byte
	for _, p := range paths {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, p)
	}
	return b
}

func (d Descriptor) marshal() []byte {
	var b []byte
	b = appendString(b, 1, d.MediaType)
	b = appendString(b, 2, d.Digest)
	return appendInt(b, 3, d.Size)
}

func (im Image) marshal() []byte {
	var b []byte
	b = appendString(b, 1, im.Name)
	b = appendMap(b, 2, im.Labels)
	return appendMessage(b, 3, im.Target.marshal())
}

func (w writeRequest) marshal() []byte {
	var b []byte
	b = appendInt(b, 1, int64(w.Action))
	b = appendString(b, 2, w.Ref)
	b = appendInt(b, 3, w.Total)
	b = appendString(b, 4, w.Expected)
	b = appendInt(b, 5, w.Offset)
	b = appendBytes(b, 6, w.Data)
	return appendMap(b, 7, w.Labels)
}

// The requests, one function each: the service's message with its fields.

func infoRequest(digest string) []byte { return appendString(nil, 1, digest) }

// updateInfoRequest sets the given labels of a blob, and only those.
func updateInfoRequest(digest string, labels map[string]string) []byte {
	var info []byte
	info = appendString(info, 1, digest)
	info = appendMap(info, 5, labels)
	var paths []string
	for k := range labels {
		paths = append(paths, "labels."+k)
	}
	slices.Sort(paths)
	return appendMessage(appendMessage(nil, 1, info), 2, fieldMask(paths...))
}

func createImageRequest(im Image) []byte { return appendMessage(nil, 1, im.marshal()) }

func getImageRequest(name string) []byte { return appendString(nil, 1, name) }

// updateImageRequest writes im's target and the given labels of it.
func updateImageRequest(im Image, labelKeys []string) []byte {
	paths := []string{"target"}
	for _, k := range labelKeys {
		paths = append(paths, "labels."+k)
	}
	return appendMessage(appendMessage(nil, 1, im.marshal()), 2, fieldMask(paths...))
}

func createLeaseRequest(id string, labels map[string]string) []byte {
	return appendMap(appendString(nil, 1, id), 3, labels)
}

func deleteLeaseRequest(id string) []byte { return appendString(nil, 1, id) }

// fields walks a message's fields, calling fn with each field's number,
// type and value (the varint, or the bytes of a length-delimited field);
// fixed-width and group fields are skipped. A truncated message is an
// error.
func fields(b []byte, fn func(num protowire.Number, typ protowire.Type, v uint64, data []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("reading a field tag: %w", protowire.ParseError(n))
		}
		b = b[n:]
		var v uint64
		var data []byte
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			data, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("reading field %d: %w", num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := fn(num, typ, v, data); err != nil {
			return err
		}
	}
	return nil
}

// mapEntry reads one map<string, string> entry.
func mapEntry(b []byte, into map[string]string) error {
	var k, v string
	err := fields(b, func(num protowire.Number, typ protowire.Type, _ uint64, data []byte) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			k = string(data)
		case num == 2 && typ == protowire.BytesType:
			v = string(data)
		}
		return nil
	})
	into[k] = v
	return err
}

func parseDescriptor(b []byte) (Descriptor, error) {
	var d Descriptor
	err := fields(b, func(num protowire.Number, typ protowire.Type, v uint64, data []byte) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			d.MediaType = string(data)
		case num == 2 && typ == protowire.BytesType:
			d.Digest = string(data)
		case num == 3 && typ == protowire.VarintType:
			d.Size = int64(v)
		}
		return nil
	})
	return d, err
}

func parseImage(b []byte) (Image, error) {
	im := Image{Labels: map[string]string{}}
	err := fields(b, func(num protowire.Number, typ protowire.Type, _ uint64, data []byte) error {
		var err error
		switch {
		case num == 1 && typ == protowire.BytesType:
			im.Name = string(data)
		case num == 2 && typ == protowire.BytesType:
			err = mapEntry(data, im.Labels)
		case num == 3 && typ == protowire.BytesType:
			im.Target, err = parseDescriptor(data)
		}
		return err
	})
	return im, err
}

func parseInfo(b []byte) (contentInfo, error) {
	in := contentInfo{Labels: map[string]string{}}
	err := fields(b, func(num protowire.Number, typ protowire.Type, v uint64, data []byte) error {
		var err error
		switch {
		case num == 1 && typ == protowire.BytesType:
			in.Digest = string(data)
		case num == 2 && typ == protowire.VarintType:
			in.Size = int64(v)
		case num == 5 && typ == protowire.BytesType:
			err = mapEntry(data, in.Labels)
		}
		return err
	})
	return in, err
}

// field1 returns the bytes of field 1 of a response whose only field of
// interest is a message there (InfoResponse.info, GetImageResponse.image).
func field1(b []byte) ([]byte, error) {
	var out []byte
	err := fields(b, func(num protowire.Number, typ protowire.Type, _ uint64, data []byte) error {
		if num == 1 && typ == protowire.BytesType {
			out = data
		}
		return nil
	})
	return out, err
}
