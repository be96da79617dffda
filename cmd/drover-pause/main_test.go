package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestPauseStopsOnSIGTERM builds the program and runs it as the runtime
// does: it must wait until SIGTERM, then exit 0 (a sandbox stopped cleanly,
// not killed).
func TestPauseStopsOnSIGTERM(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "drover-pause")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting pause: %v", err)
	}
	r := bufio.NewReader(stderr)
	// Its first line means the handlers are in place, so SIGTERM must stop it cleanly.
	line, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "pause: waiting") {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("pause first line %q (err %v), want the waiting notice", line, err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(r)
	if err := cmd.Wait(); err != nil {
		t.Errorf("pause after SIGTERM: %v, want exit 0", err)
	}
	if !strings.Contains(string(rest), "Shutting down, got signal: terminated") {
		t.Errorf("pause after SIGTERM printed %q", rest)
	}
}
