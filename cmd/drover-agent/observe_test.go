package main

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCmdlineOfAnExitedProcess: a main process that has exited and is not
// reaped yet (a crashed kubelet before systemd restarts it) has no command
// line, which the guarantee check looks at again; it must not read as one
// empty word, which the check would judge as a kubelet started without any
// of its flags.
func TestCmdlineOfAnExitedProcess(t *testing.T) {
	cmd := exec.Command("sleep", "0")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := uint32(cmd.Process.Pid)
	for deadline := time.Now().Add(10 * time.Second); ; {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/stat")
		if err != nil {
			t.Fatal(err)
		}
		if f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:])); len(f) > 0 && f[0] == "Z" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sleep 0 (pid %d) is not a zombie after 10s: %s", pid, stat)
		}
		time.Sleep(10 * time.Millisecond)
	}
	argv, err := cmdline(pid)
	cmd.Wait()
	if err != nil || len(argv) != 0 {
		t.Fatalf("cmdline of a zombie: %q, %v; want no words", argv, err)
	}

	live := exec.Command("sleep", "30")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { live.Process.Kill(); live.Wait() }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		// Until the exec, the child shows the test binary's command line.
		if argv, err = cmdline(uint32(live.Process.Pid)); err == nil && slices.Equal(argv, []string{"sleep", "30"}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cmdline of sleep 30: %q, %v", argv, err)
		}
	}
}
