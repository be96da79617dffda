// Package gunzip is the one gzip-with-limit reader of the agent's path
// (the Ignition parser, Redact, the token search of internal/secretscan):
// every stream is inflated through a reader that stops at the stream's own
// limit and at what is left of a Budget shared by everything one input
// decompresses, so a few KB of gzip can neither allocate nor inflate more
// than the caller allows, however many streams they hold.
package gunzip

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
)

// ErrBudget is returned once the Budget has run out; the caller words it
// (it knows what the budget covers).
var ErrBudget = errors.New("decompression budget spent")

// TooLarge is one stream past its own limit.
type TooLarge struct{ Limit int64 }

func (e TooLarge) Error() string { return fmt.Sprintf("more than %d MiB decompressed", e.Limit>>20) }

// Budget is what is left of a total for one input, drawn from by every
// stream (and by the caller for plain data it counts alike). A nil Budget
// bounds nothing beyond each stream's own limit.
type Budget struct {
	left int64
	out  bool
}

// NewBudget allows n bytes in total.
func NewBudget(n int64) *Budget { return &Budget{left: n} }

// Out reports whether a draw has gone over: once it has, every later draw
// fails too, so an input is refused (or reported) at one place.
func (b *Budget) Out() bool { return b != nil && b.out }

// Left is what may still be drawn.
func (b *Budget) Left() int64 { return b.left }

// Take charges n bytes already in memory.
func (b *Budget) Take(n int64) error {
	if b == nil {
		return nil
	}
	if b.out || n > b.left {
		b.out = true
		return ErrBudget
	}
	b.left -= n
	return nil
}

// Bytes inflates raw (gzip, members concatenated as gzip allows) whole,
// at most limit bytes and at most what b has left. It never holds more
// than it may keep: a first pass inflates into nothing, counting, and
// only a stream that fits is inflated again into a buffer of exactly its
// size (io.ReadAll would grow its buffer past twice the size on the way).
func Bytes(raw []byte, limit int64, b *Budget) ([]byte, error) {
	if b.Out() {
		return nil, ErrBudget
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	cr := &counter{r: zr, limit: limit, b: b}
	if _, err := io.Copy(io.Discard, cr); err != nil {
		if errors.Is(err, ErrBudget) {
			b.out = true
		}
		return nil, err
	}
	if err := zr.Reset(bytes.NewReader(raw)); err != nil {
		return nil, err
	}
	out := make([]byte, cr.n)
	if _, err := io.ReadFull(zr, out); err != nil {
		return nil, err
	}
	if err := b.Take(cr.n); err != nil {
		return nil, err // not reached: the count stayed within what was left
	}
	return out, nil
}

// Prefix inflates the one gzip member at the start of data, tolerating a
// truncated or damaged stream and trailing bytes: it returns what inflated
// before the end, the first error, limit bytes or what b has left —
// whichever comes first — and charges b for it. For scanners, which look
// at a stream's start even when it does not end well; ok is false when
// data does not start with a gzip header or b has run out.
func Prefix(data []byte, limit int64, b *Budget) (out []byte, ok bool) {
	if b.Out() {
		return nil, false
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, false
	}
	zr.Multistream(false)
	n, budgeted := limit, b != nil && b.left < limit
	if budgeted {
		n = b.left + 1 // one byte more tells whether the stream went on
	}
	// Counted first, then read again into a buffer of that size, as in
	// Bytes; the second pass yields the same bytes up to the same end.
	k, _ := io.Copy(io.Discard, io.LimitReader(zr, n))
	if err := zr.Reset(bytes.NewReader(data)); err != nil {
		return nil, false
	}
	zr.Multistream(false)
	out = make([]byte, k)
	if _, err := io.ReadFull(zr, out); err != nil {
		return nil, false // not reached: the same stream, read as far
	}
	if budgeted && int64(len(out)) > b.left {
		out, b.out = out[:b.left], true
	}
	if b != nil {
		b.left -= int64(len(out))
	}
	return out, true
}

// counter fails as soon as more than limit bytes, or more than the budget
// has left, have been read: the stream is not inflated further.
type counter struct {
	r     io.Reader
	n     int64
	limit int64
	b     *Budget
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	switch {
	case c.n > c.limit:
		return n, TooLarge{c.limit}
	case c.b != nil && c.n > c.b.left:
		return n, ErrBudget
	}
	return n, err
}
