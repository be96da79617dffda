package esp

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/diskfs/go-diskfs/backend"
)

// memBackend is a fixed-size in-memory disk for go-diskfs. Building in
// memory keeps go-diskfs's many small cluster writes off the real file and
// lets finish patch the result before a single sequential write.
type memBackend struct {
	b   []byte
	pos int64
}

var _ backend.Storage = (*memBackend)(nil)

func newMemBackend(size int64) *memBackend { return &memBackend{b: make([]byte, size)} }

func (m *memBackend) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off >= int64(len(m.b)) {
		return 0, io.EOF
	}
	n := copy(p, m.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (m *memBackend) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > int64(len(m.b)) {
		return 0, fmt.Errorf("write of %d bytes at %d past the end of the %d-byte ESP", len(p), off, len(m.b))
	}
	return copy(m.b[off:], p), nil
}

func (m *memBackend) Read(p []byte) (int, error) {
	n, err := m.ReadAt(p, m.pos)
	m.pos += int64(n)
	return n, err
}

func (m *memBackend) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		off += m.pos
	case io.SeekEnd:
		off += int64(len(m.b))
	default:
		return 0, errors.New("esp: invalid whence")
	}
	if off < 0 {
		return 0, errors.New("esp: negative seek")
	}
	m.pos = off
	return off, nil
}

func (m *memBackend) Stat() (fs.FileInfo, error)              { return memInfo{size: int64(len(m.b))}, nil }
func (m *memBackend) Close() error                            { return nil }
func (m *memBackend) Sys() (*os.File, error)                  { return nil, backend.ErrNotSuitable }
func (m *memBackend) Writable() (backend.WritableFile, error) { return m, nil }
func (m *memBackend) Path() string                            { return "" }

type memInfo struct{ size int64 }

func (i memInfo) Name() string       { return "esp" }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() fs.FileMode  { return 0o600 }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return false }
func (i memInfo) Sys() any           { return nil }
