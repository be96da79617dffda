package qemu

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
