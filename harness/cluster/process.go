package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// stopGrace is how long a component gets to exit after SIGTERM before its
// process group is killed.
const stopGrace = 20 * time.Second

// process is a control-plane component running as a child process in its
// own process group, with stdout and stderr in a log file.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed when the process has exited
	err     error         // Wait's result, valid after done
}

// startProcess starts bin with args. The child gets its own process group,
// so that a terminal's Ctrl-C reaches only drover (which then stops the
// cluster in order) and Stop can signal everything the child spawned; and
// SIGKILL as parent-death signal, so that a drover killed outright leaves
// no control plane behind. (Pdeathsig fires when the starting OS thread
// exits; Go retires threads only for goroutines that exit while locked to
// one, which this package never does.)
func startProcess(name, bin string, args []string, logPath string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("starting %s: opening log: %w", name, err)
	}
	fmt.Fprintf(logFile, "--- %s %s\n", time.Now().Format(time.RFC3339), strings.Join(append([]string{bin}, args...), " "))
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// exitError says that the process has exited (and how), or is nil while it
// runs.
func (p *process) exitError() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited: %v; last lines of %s:\n%s", p.name, p.err, p.logPath, logTail(p.logPath, 20))
	default:
		return nil
	}
}

// stop sends SIGTERM to the process group, waits up to grace and then
// kills the group. It returns an error only when the process had to be
// killed; an exit status after SIGTERM is the normal way down.
func (p *process) stop(grace time.Duration) error {
	pgid := p.cmd.Process.Pid // Setpgid: the group id is the leader's pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	var err error
	select {
	case <-p.done:
	case <-time.After(grace):
		err = fmt.Errorf("stopping %s: still running %s after SIGTERM, killed it", p.name, grace)
	}
	// Anything left in the group (the leader, if it ignored SIGTERM, or a
	// child it spawned) goes now; ESRCH means the group is already empty.
	if kerr := syscall.Kill(-pgid, syscall.SIGKILL); kerr != nil && !errors.Is(kerr, syscall.ESRCH) && err == nil {
		err = fmt.Errorf("stopping %s: killing process group %d: %w", p.name, pgid, kerr)
	}
	<-p.done
	return err
}

// logTail returns the last n lines of the file at path, for error messages.
func logTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	if len(data) > 256<<10 {
		data = data[len(data)-256<<10:]
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
