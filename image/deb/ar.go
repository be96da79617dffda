package deb

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// arMagic opens every ar archive, and so every .deb.
const arMagic = "!<arch>\n"

// arHeaderSize is the fixed size of a member header:
// name[16] mtime[12] uid[6] gid[6] mode[8] size[10] magic[2].
const arHeaderSize = 60

// arReader walks the members of an ar archive without seeking, so a .deb
// can be read straight from a file or a download.
type arReader struct {
	r   io.Reader
	cur *io.LimitedReader // body of the current member
	pad bool              // the current member's body has odd size
	hdr [arHeaderSize]byte
}

func newArReader(r io.Reader) (*arReader, error) {
	var magic [len(arMagic)]byte
	if _, err := io.ReadFull(r, magic[:]); err != nil {
		return nil, fmt.Errorf("reading ar magic: %w", noEOF(err))
	}
	if string(magic[:]) != arMagic {
		return nil, fmt.Errorf("not an ar archive (magic %q): is this really a .deb?", magic[:])
	}
	return &arReader{r: r}, nil
}

// Next skips what is left of the current member and returns the name and
// size of the next one; its body is then read through Read. io.EOF means
// there are no more members.
func (a *arReader) Next() (name string, size int64, err error) {
	if a.cur != nil {
		if _, err := io.Copy(io.Discard, a.cur); err != nil {
			return "", 0, fmt.Errorf("skipping ar member: %w", noEOF(err))
		}
		if a.pad {
			if _, err := io.ReadFull(a.r, a.hdr[:1]); err != nil {
				return "", 0, fmt.Errorf("skipping ar padding: %w", noEOF(err))
			}
		}
		a.cur = nil
	}
	n, err := io.ReadFull(a.r, a.hdr[:])
	if n == 0 && err == io.EOF {
		return "", 0, io.EOF
	}
	if err != nil {
		return "", 0, fmt.Errorf("reading ar header: %w", noEOF(err))
	}
	h := a.hdr[:]
	if string(h[58:60]) != "`\n" {
		return "", 0, fmt.Errorf("corrupt ar header %q: bad terminator", h)
	}
	// GNU ar ends names with "/"; dpkg-deb writes them without.
	name = strings.TrimSuffix(strings.TrimRight(string(h[0:16]), " "), "/")
	sizeField := string(bytes.TrimRight(h[48:58], " "))
	size, err = strconv.ParseInt(sizeField, 10, 64)
	if err != nil || size < 0 {
		return "", 0, fmt.Errorf("ar member %q: bad size %q", name, sizeField)
	}
	a.cur = &io.LimitedReader{R: a.r, N: size}
	a.pad = size%2 == 1
	return name, size, nil
}

// Read reads the body of the current member.
func (a *arReader) Read(p []byte) (int, error) {
	if a.cur == nil {
		return 0, io.EOF
	}
	n, err := a.cur.Read(p)
	if err == io.EOF && a.cur.N > 0 {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// noEOF turns a bare EOF in the middle of a structure into
// io.ErrUnexpectedEOF: the file was cut short.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
