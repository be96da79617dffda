package cluster

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestProcessStopsGracefully(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "p.log")
	// Exits 0 on SIGTERM, after saying so.
	p, err := startProcess("graceful", "/bin/sh", []string{"-c", `trap 'echo got TERM; exit 0' TERM; echo started; while :; do sleep 0.1; done`}, log)
	if err != nil {
		t.Fatal(err)
	}
	waitLog(t, log, "started")
	if err := p.exitError(); err != nil {
		t.Fatalf("running process reported exit: %v", err)
	}
	if err := p.stop(time.Minute); err != nil {
		t.Errorf("stop: %v", err)
	}
	data, _ := os.ReadFile(log)
	if !strings.Contains(string(data), "\ngot TERM\n") || !strings.HasPrefix(string(data), "--- ") {
		t.Errorf("log:\n%s", data)
	}
}

func TestProcessStopKillsGroup(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "p.log")
	pidFile := filepath.Join(dir, "child.pid")
	// Ignores SIGTERM and leaves a grandchild that ignores it too: stop
	// must kill the whole group.
	script := `trap '' TERM; (trap '' TERM; while :; do sleep 0.1; done) & echo $! > ` + pidFile + `; echo started; wait`
	p, err := startProcess("stubborn", "/bin/sh", []string{"-c", script}, log)
	if err != nil {
		t.Fatal(err)
	}
	waitLog(t, log, "started")
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	child, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	if err := p.stop(200 * time.Millisecond); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("stop = %v, want an error saying it was killed", err)
	}
	// The grandchild is reparented, so it may linger as a zombie until
	// init reaps it; what matters is that it no longer runs.
	for i := 0; ; i++ {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(child) + "/stat")
		if errors.Is(err, os.ErrNotExist) || (err == nil && strings.Contains(string(stat), ") Z ")) {
			break
		}
		if i == 100 {
			t.Fatalf("grandchild %d still running: %s", child, stat)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestProcessExitErrorHasLogTail(t *testing.T) {
	log := filepath.Join(t.TempDir(), "p.log")
	p, err := startProcess("failing", "/bin/sh", []string{"-c", "echo line one; echo 'fatal: bad flag' >&2; exit 3"}, log)
	if err != nil {
		t.Fatal(err)
	}
	<-p.done
	err = p.exitError()
	if err == nil || !strings.Contains(err.Error(), "failing exited: exit status 3") || !strings.Contains(err.Error(), "fatal: bad flag") {
		t.Errorf("exitError = %v", err)
	}
	if err := p.stop(time.Second); err != nil {
		t.Errorf("stopping an exited process: %v", err)
	}
	if _, err := startProcess("missing", filepath.Join(t.TempDir(), "nope"), nil, log); err == nil {
		t.Error("starting a missing binary succeeded")
	}
}

func TestLogTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l")
	var b strings.Builder
	for i := 1; i <= 30; i++ {
		b.WriteString("line " + strconv.Itoa(i) + "\n")
	}
	os.WriteFile(path, []byte(b.String()), 0o644)
	if got := logTail(path, 3); got != "line 28\nline 29\nline 30" {
		t.Errorf("logTail = %q", got)
	}
	if got := logTail(filepath.Join(t.TempDir(), "none"), 3); !strings.Contains(got, "cannot read") {
		t.Errorf("logTail of a missing file = %q", got)
	}
}

// waitLog waits until the log at path contains s: the shell must have set
// its traps before the test signals it.
func waitLog(t *testing.T, path, s string) {
	t.Helper()
	for i := 0; ; i++ {
		data, _ := os.ReadFile(path)
		// A whole line: the log's header line quotes the script.
		if strings.Contains(string(data), "\n"+s+"\n") {
			return
		}
		if i == 200 {
			t.Fatalf("%s never contained %q:\n%s", path, s, data)
		}
		time.Sleep(25 * time.Millisecond)
	}
}
