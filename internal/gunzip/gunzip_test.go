package gunzip

import (
	"bytes"
	"compress/gzip"
	"errors"
	"testing"
)

func gz(t *testing.T, n int) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(make([]byte, n))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestBytes: the reader stops at the stream's limit or at what is left of
// the budget, whichever comes first, charges only what it returns, and
// once the budget ran out inflates nothing more.
func TestBytes(t *testing.T) {
	z := gz(t, 1000)
	b := NewBudget(2500)
	for i := range 2 {
		out, err := Bytes(z, 4096, b)
		if err != nil || len(out) != 1000 {
			t.Fatalf("stream %d: %d bytes, %v", i, len(out), err)
		}
	}
	if b.Left() != 500 {
		t.Errorf("left %d, want 500", b.Left())
	}
	if _, err := Bytes(z, 999, b); !errors.As(err, new(TooLarge)) {
		t.Errorf("past the stream's limit: %v", err)
	}
	if b.Out() || b.Left() != 500 {
		t.Errorf("a stream past its own limit charged the budget: out %v, left %d", b.Out(), b.Left())
	}
	if _, err := Bytes(z, 4096, b); !errors.Is(err, ErrBudget) || !b.Out() {
		t.Errorf("past the budget: %v, out %v", err, b.Out())
	}
	if _, err := Bytes(gz(t, 1), 4096, b); !errors.Is(err, ErrBudget) {
		t.Errorf("after the budget ran out: %v", err)
	}
	if err := b.Take(0); !errors.Is(err, ErrBudget) {
		t.Errorf("Take after the budget ran out: %v", err)
	}
	if out, err := Bytes(z, 1000, nil); err != nil || len(out) != 1000 {
		t.Errorf("without a budget: %d bytes, %v", len(out), err)
	}
	if _, err := Bytes(z[:len(z)-4], 4096, nil); err == nil {
		t.Error("a truncated stream inflated without an error")
	}
}

// TestPrefix: a scanner's read gives a damaged stream's start, stops at
// the budget (and then reads nothing more), and charges what it gave.
func TestPrefix(t *testing.T) {
	z := gz(t, 1000)
	if out, ok := Prefix(append(z[:len(z)/2:len(z)/2], "trailing"...), 4096, nil); !ok || len(out) == 0 {
		t.Errorf("truncated stream: %d bytes, ok %v", len(out), ok)
	}
	if _, ok := Prefix([]byte("not gzip"), 4096, nil); ok {
		t.Error("not gzip: ok")
	}
	b := NewBudget(1500)
	if out, ok := Prefix(append(z, z...), 4096, b); !ok || len(out) != 1000 || b.Left() != 500 || b.Out() {
		t.Errorf("one member of two: %d bytes, ok %v, left %d, out %v", len(out), ok, b.Left(), b.Out())
	}
	if out, ok := Prefix(z, 4096, b); !ok || len(out) != 500 || !b.Out() {
		t.Errorf("past the budget: %d bytes, ok %v, out %v", len(out), ok, b.Out())
	}
	if _, ok := Prefix(z, 4096, b); ok {
		t.Error("after the budget ran out: ok")
	}
	exact := NewBudget(1000)
	if out, _ := Prefix(z, 4096, exact); len(out) != 1000 || exact.Out() {
		t.Errorf("a stream of exactly the budget: %d bytes, out %v", len(out), exact.Out())
	}
}
