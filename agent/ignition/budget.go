package ignition

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"

	"github.com/coreos/ignition/v2/config/util"
	"github.com/coreos/ignition/v2/config/v3_5/types"
)

// maxContentsTotal bounds the decoded contents of one config together:
// every file's contents and append fragment (data: URL or remote,
// decompressed) and every unit and drop-in. maxFileSize alone bounds one
// resource, and a few KB of user-data can hold hundreds of resources
// that each stay under it (gzip of zeros shrinks about 1000 times, and the
// user-data's own gzip shrinks the repeated fragments again), so without
// a total the agent and drover validate would inflate gigabytes. A node's
// real config is KBs to a few MiB; 128 MiB is twice the largest single
// resource, so one resource at its own limit still fits beside a normal
// config, and it is what the agent then holds in memory and writes to the
// tmpfs /etc, small beside the smallest instance's RAM.
const maxContentsTotal = 128 << 20

// budget is what is left of maxContentsTotal for one config. Every decoded
// byte is drawn from it as it is read: the inline contents in document
// order, then the units (both while parsing), then the remote contents as
// they are fetched; a config is refused at the resource where it runs out.
type budget struct {
	left int64
	// out is set once a resource went over: it is reported once, and no
	// resource after it is decoded.
	out bool
}

func newBudget() *budget { return &budget{left: maxContentsTotal} }

// errOverBudget is returned once the config's contents are past
// maxContentsTotal.
var errOverBudget = fmt.Errorf("the config's contents expand past %d MiB in total", maxContentsTotal>>20)

// overBudgetHint is what a user does about errOverBudget.
const overBudgetHint = "a node's config is KBs to a few MiB (this limit counts every file's contents, append fragment and unit, decompressed) — remove what is not meant to be there, or put large payloads in the image instead of the user-data"

// tooLarge is one resource (or the user-data) past its own limit.
type tooLarge struct{ limit int64 }

func (e tooLarge) Error() string { return fmt.Sprintf("more than %d MiB decompressed", e.limit>>20) }

// take charges n bytes already in memory (a plain resource, a unit).
func (b *budget) take(n int64) error {
	if b == nil {
		return nil
	}
	if b.out || n > b.left {
		b.out = true
		return errOverBudget
	}
	b.left -= n
	return nil
}

// gunzip is the one gzip-with-limit reader of the agent and of drover
// validate: the user-data's own gzip (b nil: bounded by limit only) and
// every compressed resource (charged to the config's budget b). It never
// holds more than it may keep: a first pass inflates into nothing,
// counting through a reader that stops at whichever limit comes first,
// and only a stream that fits is inflated again into a buffer of exactly
// its size (io.ReadAll would grow its buffer past twice the size on the
// way, and keep the garbage until the next collection).
func gunzip(raw []byte, limit int64, b *budget) ([]byte, error) {
	if b != nil && b.out {
		return nil, errOverBudget
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	cr := &countingReader{r: zr, limit: limit, b: b}
	if _, err := io.Copy(io.Discard, cr); err != nil {
		if errors.Is(err, errOverBudget) {
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
	if err := b.take(cr.n); err != nil {
		return nil, err // not reached: the count stayed within b.left
	}
	return out, nil
}

// countingReader fails as soon as more than limit bytes, or more than the
// budget has left, have been read: the stream is never inflated further.
type countingReader struct {
	r     io.Reader
	n     int64
	limit int64
	b     *budget
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	switch {
	case c.n > c.limit:
		return n, tooLarge{c.limit}
	case c.b != nil && c.n > c.b.left:
		return n, errOverBudget
	}
	return n, err
}

// chargeUnits draws the units' and drop-ins' contents from the budget,
// after the inline file contents.
func chargeUnits(units []types.Unit, b *budget, c *collector) {
	for i, u := range units {
		at := []any{"systemd", "units", i}
		if !util.NilOrEmpty(u.Contents) && !spend(b, int64(len(*u.Contents)), sub(at, "contents"), c) {
			return
		}
		for j, d := range u.Dropins {
			if !util.NilOrEmpty(d.Contents) && !spend(b, int64(len(*d.Contents)), sub(at, "dropins", j, "contents"), c) {
				return
			}
		}
	}
}

// spend charges n bytes of the resource at at, reporting the first
// resource that goes over.
func spend(b *budget, n int64, at []any, c *collector) bool {
	wasOut := b.out
	if err := b.take(n); err != nil {
		if !wasOut {
			overBudget(at, c)
		}
		return false
	}
	return true
}

func overBudget(at []any, c *collector) {
	c.addf(at, "%v; %s", errOverBudget, overBudgetHint)
}

// dropIfOverBudget forgets every decoded content once the budget has run
// out: the config is refused, and the checks that still run on it (Extra,
// CheckWrites) see the files' contents as unknown, as for contents not
// fetched, instead of keeping (and copying) up to the whole budget.
func (cfg *Config) dropIfOverBudget() {
	if cfg.budget == nil || !cfg.budget.out {
		return
	}
	for i := range cfg.files {
		fc := &cfg.files[i]
		fc.contents = resolved{}
		for j := range fc.appends {
			fc.appends[j] = resolved{}
		}
	}
}
