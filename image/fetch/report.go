package fetch

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/drover-os/drover/internal/bytesize"
)

// reporter serialises everything Fetch says on its log: log lines, and
// either a progress bar (terminal) or one line per finished download.
type reporter struct {
	mu    sync.Mutex
	w     io.Writer
	bar   *progressbar.ProgressBar // nil unless Progress and w is a terminal
	files int
	bytes int64
}

// newReporter draws a bar when bar is true: Fetch asks for one only when
// the log is a terminal, where redrawing a line makes sense.
func newReporter(w io.Writer, bar bool, files int, total int64) *reporter {
	if w == nil {
		w = io.Discard
	}
	r := &reporter{w: w}
	if bar {
		r.bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(fmt.Sprintf("fetching %d files", files)),
			progressbar.OptionShowBytes(true),
			progressbar.OptionShowTotalBytes(true),
			progressbar.OptionSetWidth(20),
			progressbar.OptionThrottle(100*time.Millisecond), // redraws, not bytes, would dominate otherwise
			progressbar.OptionClearOnFinish(),
			progressbar.OptionFullWidth(),
			progressbar.OptionUseIECUnits(true),
		)
	}
	return r
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// logf writes one line, moving the bar out of the way first.
func (r *reporter) logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bar != nil {
		r.bar.Clear()
	}
	fmt.Fprintf(r.w, format+"\n", args...)
}

// progress adds n (negative when a transfer restarts) downloaded bytes.
func (r *reporter) progress(_ Item, n int64) {
	if r.bar == nil || n == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bar.Add64(n) // the bar errors only when retries overshoot the total; cosmetic
}

// skip records an item another process fetched while we waited for it.
func (r *reporter) skip(it Item) {
	if r.bar != nil && it.Size > 0 {
		r.progress(it, it.Size)
	}
}

// done records a finished, verified download.
func (r *reporter) done(it Item, n int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.files++
	r.bytes += n
	if r.bar == nil {
		fmt.Fprintf(r.w, "fetched %s (%s)\n", it.Name, bytesize.Format(n))
	}
}

func (r *reporter) finish() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bar != nil {
		r.bar.Finish()
		noun := "files"
		if r.files == 1 {
			noun = "file"
		}
		fmt.Fprintf(r.w, "fetched %d %s (%s)\n", r.files, noun, bytesize.Format(r.bytes))
	}
}
