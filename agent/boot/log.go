package boot

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// kmsg levels (syslog priorities) for the records drover-init writes.
const (
	levelErr  = 3
	levelInfo = 6
)

// Log prints drover-init's lines to the console and the kernel log.
// Before /dev is mounted there is neither, so lines wait in memory until
// Attach. Each line goes to /dev/kmsg (so the journal keeps the initrd's
// story) and, unless the kernel itself echoes that kmsg level to its
// consoles, to /dev/console (the serial console ECS shows).
type Log struct {
	mu           sync.Mutex
	start        time.Time
	debug        bool
	console      io.Writer
	kmsgDir      *os.File // the devtmpfs root, kept open so kmsg is reachable after /dev moves
	consoleLevel int      // the kernel's console_loglevel; 0 when unknown
	pending      []logLine
}

type logLine struct {
	level int
	text  string
}

// NewLog returns a Log that measures elapsed time from start and buffers
// until Attach or AttachWriter.
func NewLog(start time.Time) *Log { return &Log{start: start} }

// AttachWriter sends lines to w only (for --plan, tests and a Log outside
// PID 1) and flushes what was buffered.
func (l *Log) AttachWriter(w io.Writer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.console = w
	l.flushLocked()
}

// Attach opens devDir/console and keeps devDir open for per-line kmsg
// writes, then flushes the buffered lines. printkPath is
// /proc/sys/kernel/printk, whose first field is the console log level.
// A missing console is not fatal: the kernel log still gets every line.
func (l *Log) Attach(devDir, printkPath string) error {
	dir, err := os.Open(devDir)
	if err != nil {
		return fmt.Errorf("opening %s for the kernel log: %w", devDir, err)
	}
	var console io.Writer
	if f, err := os.OpenFile(filepath.Join(devDir, "console"), os.O_WRONLY|unix.O_NOCTTY, 0); err == nil {
		console = f
	}
	level := 0
	if b, err := os.ReadFile(printkPath); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			level, _ = strconv.Atoi(f[0])
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.kmsgDir, l.console, l.consoleLevel = dir, console, level
	l.flushLocked()
	return nil
}

// SetDebug turns the Debugf lines on or off.
func (l *Log) SetDebug(on bool) {
	l.mu.Lock()
	l.debug = on
	l.mu.Unlock()
}

// Elapsed is the time since drover-init started.
func (l *Log) Elapsed() time.Duration { return time.Since(l.start) }

// Step prints the line that opens a step: its name and the elapsed time.
func (l *Log) Step(name string) {
	l.emit(levelInfo, fmt.Sprintf("drover-init: %s (+%.3fs)", name, l.Elapsed().Seconds()))
}

// Printf prints one line prefixed with "drover-init: ".
func (l *Log) Printf(format string, a ...any) {
	l.emit(levelInfo, "drover-init: "+fmt.Sprintf(format, a...))
}

// Debugf prints one line when drover.debug is on.
func (l *Log) Debugf(format string, a ...any) {
	l.mu.Lock()
	on := l.debug
	l.mu.Unlock()
	if on {
		l.emit(levelInfo, "drover-init:   "+fmt.Sprintf(format, a...))
	}
}

// Fatal prints the one line that explains why the machine reboots.
func (l *Log) Fatal(what string, delay time.Duration) {
	l.emit(levelErr, fmt.Sprintf("drover-init: FATAL: %s; rebooting in %ds", what, int(delay.Seconds())))
}

func (l *Log) emit(level int, text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.console == nil && l.kmsgDir == nil {
		l.pending = append(l.pending, logLine{level, text})
		return
	}
	l.writeLocked(logLine{level, text})
}

func (l *Log) flushLocked() {
	for _, p := range l.pending {
		l.writeLocked(p)
	}
	l.pending = nil
}

func (l *Log) writeLocked(p logLine) {
	echoed := false
	if l.kmsgDir != nil {
		// A fresh descriptor per line: the kernel rate-limits each open
		// /dev/kmsg to 10 lines per 5 s, which a boot can exceed.
		fd, err := unix.Openat(int(l.kmsgDir.Fd()), "kmsg", unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
		if err == nil {
			_, err = unix.Write(fd, []byte(fmt.Sprintf("<%d>%s\n", p.level, p.text)))
			unix.Close(fd)
			// The kernel prints records below console_loglevel on every
			// console itself; writing them again would double each line.
			echoed = err == nil && p.level < l.consoleLevel
		}
	}
	if !echoed && l.console != nil {
		io.WriteString(l.console, p.text+"\n")
	}
}
