package qemu

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fakeVM starts a VM whose "QEMU" is a shell script printing console
// lines, so Start's real pipeline (process, line scanner, escape stripping,
// serial log, subscribers) runs without booting anything. Prepare still
// makes the overlay with the real qemu-img, a host tool CI installs.
func fakeVM(t *testing.T, script string) (*VM, *Config) {
	t.Helper()
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Fatal("qemu-img not found: install qemu-utils (scripts/host-setup.sh)")
	}
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	c := &Config{
		Image:    write("img.raw", strings.Repeat("\x00", 1<<16), 0o644),
		Arch:     "amd64",
		StateDir: filepath.Join(dir, "state"),
		QEMU:     write("fake-qemu", "#!/bin/sh\necho \"$@\" > \"$(dirname \"$0\")/args\"\n"+script, 0o755),
		OVMFCode: write("CODE.fd", "code", 0o644),
		OVMFVars: write("VARS.fd", "vars", 0o644),
	}
	vm, err := Start(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vm.Stop() })
	return vm, c
}

// TestWaitForSeesPastAndFutureLines: a pattern already on the console is
// found at once, one printed later when it comes; terminal colours are
// stripped from the lines before they are matched and logged.
func TestWaitForSeesPastAndFutureLines(t *testing.T) {
	vm, c := fakeVM(t, `echo "Booting drover"
printf '\033[0;32m  OK  \033[0m Started kubelet.service\r\n'
sleep 1
echo "node joined"
exec sleep 60
`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if p, err := vm.WaitFor(ctx, "never", "  OK   Started kubelet"); err != nil || p != "  OK   Started kubelet" {
		t.Fatalf("WaitFor = %q, %v (log %q)", p, err, vm.Log())
	}
	if p, err := vm.WaitFor(ctx, "Booting"); err != nil || p != "Booting" {
		t.Fatalf("a line printed before the call: %q, %v", p, err)
	}
	if p, err := vm.WaitFor(ctx, "node joined"); err != nil || p != "node joined" {
		t.Fatalf("a line printed after the call: %q, %v", p, err)
	}
	if strings.Contains(vm.Log(), "\x1b") || strings.Contains(vm.Log(), "\r") {
		t.Errorf("escape sequences or CR kept in the log: %q", vm.Log())
	}
	serial, err := os.ReadFile(c.SerialLog())
	if err != nil || !strings.Contains(string(serial), "Booting drover\n  OK   Started kubelet.service\n") {
		t.Errorf("serial log %q, %v", serial, err)
	}
	args, err := os.ReadFile(filepath.Join(filepath.Dir(c.QEMU), "args"))
	if err != nil || !strings.Contains(string(args), "file="+c.Overlay()) {
		t.Errorf("QEMU was not started with the overlay: %q, %v", args, err)
	}
	if _, err := os.Stat(c.Overlay()); err != nil {
		t.Errorf("no overlay disk: %v", err)
	}
}

// TestWaitForTimesOutAndCancels: a pattern that never comes ends with the
// context, naming the patterns and the context's reason.
func TestWaitForTimesOutAndCancels(t *testing.T) {
	vm, _ := fakeVM(t, "echo booting\nexec sleep 60\n")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := vm.WaitFor(ctx, "login:")
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), `console did not show ["login:"]`) {
		t.Fatalf("timeout: %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("WaitFor returned %s after its deadline", took)
	}

	ctx, cancel = context.WithCancel(context.Background())
	go func() { time.Sleep(200 * time.Millisecond); cancel() }()
	if _, err := vm.WaitFor(ctx, "login:"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancel: %v", err)
	}
}

// TestWaitForVMExit: when QEMU exits before the pattern shows, WaitFor says
// so with the exit status instead of waiting for the deadline.
func TestWaitForVMExit(t *testing.T) {
	vm, _ := fakeVM(t, "echo 'reboot: Power down'\nexit 3\n")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := vm.WaitFor(ctx, "login:")
	if err == nil || !strings.Contains(err.Error(), "VM exited (exit status 3) before the console showed") {
		t.Fatalf("got %v", err)
	}
	if ctx.Err() != nil {
		t.Error("WaitFor waited for the deadline")
	}
	if err := vm.Wait(); err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("Wait = %v", err)
	}
}

// TestWaitForFailsOnAKernelPanic: a guest whose kernel panicked and hangs
// (QEMU still running) fails WaitFor at once, naming the kernel's line; a
// caller that waits for the panic itself still gets it.
func TestWaitForFailsOnAKernelPanic(t *testing.T) {
	vm, _ := fakeVM(t, "echo 'Linux version 6.12'\necho 'Kernel panic - not syncing: Fatal exception in interrupt'\nexec sleep 60\n")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := vm.WaitFor(ctx, "Reached target multi-user.target")
	if err == nil || !strings.Contains(err.Error(), "the guest kernel panicked") || !strings.Contains(err.Error(), "Fatal exception in interrupt") {
		t.Fatalf("got %v", err)
	}
	if ctx.Err() != nil {
		t.Error("WaitFor waited for the deadline")
	}
	if p, err := vm.WaitFor(ctx, "Kernel panic"); err != nil || p != "Kernel panic" {
		t.Errorf("waiting for the panic itself: %q, %v", p, err)
	}
}

// fakeQMP answers QMP on the VM's socket the way QEMU does and records the
// commands; on system_reset it writes a line to the fifo the fake QEMU
// script waits on, which then "boots again".
func fakeQMP(t *testing.T, c *Config, fifo string) *[]string {
	t.Helper()
	l, err := net.Listen("unix", c.qmpPath())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var mu sync.Mutex
	cmds := &[]string{}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			r := bufio.NewReader(conn)
			fmt.Fprintln(conn, `{"QMP": {"version": {}, "capabilities": []}}`)
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					break
				}
				mu.Lock()
				*cmds = append(*cmds, strings.TrimSpace(line))
				mu.Unlock()
				fmt.Fprintln(conn, `{"return": {}}`)
				if strings.Contains(line, "system_reset") {
					os.WriteFile(fifo, []byte("reset\n"), 0o644)
				}
			}
			conn.Close()
		}
	}()
	return cmds
}

// TestWaitForResetsOnceOnAnEarlyPanic: a kernel panic before /init (an
// emulator race under TCG) resets the machine once over QMP and the wait
// goes on to the pattern of the boot after it; the reset is noted in the
// console log. The panicking kernel's last lines, printed before the reset
// took effect (seen in CI: "---[ end Kernel panic … ]---"), are not a
// second panic. A panic after /init ran fails at once, without a reset.
func TestWaitForResetsOnceOnAnEarlyPanic(t *testing.T) {
	script := `d=$(dirname "$0")
echo 'Linux version 6.12'
echo 'Kernel panic - not syncing: Fatal exception in interrupt'
while [ ! -p "$d/reset.fifo" ]; do sleep 0.1; done
read x < "$d/reset.fifo"
echo '[    4.322217] Shutting down cpus with NMI'
echo '[    4.340894] ---[ end Kernel panic - not syncing: Fatal exception in interrupt ]---'
echo 'Linux version 6.12'
echo 'Run /init as init process'
echo 'Reached target multi-user.target'
exec sleep 60
`
	vm, c := fakeVM(t, script)
	fifo := filepath.Join(filepath.Dir(c.QEMU), "reset.fifo")
	cmds := fakeQMP(t, c, fifo)
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if p, err := vm.WaitFor(ctx, "Reached target multi-user.target"); err != nil || p == "" {
		t.Fatalf("WaitFor = %q, %v\n%s", p, err, vm.Log())
	}
	if vm.Resets() != 1 || !strings.Contains(strings.Join(*cmds, " "), `{"execute":"set-action","arguments":{"reboot":"reset"}} {"execute":"system_reset"} {"execute":"set-action","arguments":{"reboot":"shutdown"}}`) {
		t.Errorf("resets %d, QMP commands %q", vm.Resets(), *cmds)
	}
	if !strings.Contains(vm.Log(), "panicked before it ran /init") {
		t.Errorf("no reset note in the console log:\n%s", vm.Log())
	}
	// Later waits do not trip over the panic of the boot before the reset.
	if _, err := vm.WaitFor(ctx, "Run /init"); err != nil {
		t.Errorf("a wait after the reset: %v", err)
	}

	late, lc := fakeVM(t, "echo 'Linux version 6.12'\necho 'Run /init as init process'\necho 'Kernel panic - not syncing: Attempted to kill init!'\nexec sleep 60\n")
	lcmds := fakeQMP(t, lc, filepath.Join(filepath.Dir(lc.QEMU), "reset.fifo"))
	if _, err := late.WaitFor(ctx, "Reached target"); err == nil || !strings.Contains(err.Error(), "Attempted to kill init") {
		t.Errorf("a panic after /init: %v", err)
	}
	if late.Resets() != 0 || len(*lcmds) != 0 {
		t.Errorf("a panic after /init reset the machine: %d, %q", late.Resets(), *lcmds)
	}
}

// TestStopEndsTheVM: Stop ends QEMU (and what it started) and returns.
func TestStopEndsTheVM(t *testing.T) {
	vm, _ := fakeVM(t, "echo up\nsleep 60 & wait\n")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := vm.WaitFor(ctx, "up"); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { vm.Stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("Stop did not return")
	}
	select {
	case <-vm.done:
	default:
		t.Error("Stop returned while QEMU still runs")
	}
}
