// Command guest is PID 1 (rdinit=/guest-init) of the QEMU guest in which
// e2e/guest_test.go runs the device-mapper tests on the minimal image's own
// kernel. It runs drover-init's first steps (API mounts, config, modules:
// the image's initrd modules plus those the host added to the config), then
// every line of /guest/plan in order, printing each test binary's output on
// the console, and powers off. The host parses the console; this program
// judges nothing itself.
//
// A plan line is: NAME LOGLEVEL PROGRAM ARGS... — LOGLEVEL is written to
// /proc/sys/kernel/printk first, so kernel lines only reach the console
// when the host wants them there.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/drover-os/drover/agent/boot"
	"golang.org/x/sys/unix"
)

func main() {
	log := boot.NewLog(time.Now())
	m := boot.NewMachine(boot.DefaultPaths, log)
	err := boot.Run(m, boot.Steps()[:3]) // mount-api, config, modules
	con, cerr := os.OpenFile("/dev/console", os.O_WRONLY, 0)
	if cerr != nil {
		con = os.Stdout
	}
	say := func(f string, a ...any) { fmt.Fprintf(con, f+"\n", a...) }
	if err == nil {
		err = run(say, con)
	}
	if err != nil {
		say("GUEST-ERROR %v", err)
	} else {
		say("GUEST-DONE")
	}
	unix.Sync()
	unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
}

func run(say func(string, ...any), con *os.File) error {
	if err := os.MkdirAll("/tmp", 0o1777); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", "/tmp", "tmpfs", 0, "mode=1777"); err != nil {
		return fmt.Errorf("mounting /tmp: %w", err)
	}
	plan, err := os.ReadFile("/guest/plan")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(plan)), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			return fmt.Errorf("/guest/plan: line %q is not NAME LOGLEVEL PROGRAM ARGS...", line)
		}
		if err := os.WriteFile("/proc/sys/kernel/printk", []byte(f[1]), 0); err != nil {
			return fmt.Errorf("setting the console log level: %w", err)
		}
		say("GUEST-RUN %s", f[0])
		cmd := exec.Command(f[2], f[3:]...)
		cmd.Dir = "/tmp"
		cmd.Env = []string{"PATH=/guest/bin:/usr/sbin:/usr/bin:/sbin:/bin", "TMPDIR=/tmp", "HOME=/tmp"}
		cmd.Stdout, cmd.Stderr = con, con
		code := 0
		if err := cmd.Run(); err != nil {
			code = -1
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else {
				say("GUEST-START-ERROR %s %v", f[0], err)
			}
		}
		say("GUEST-EXIT %s %d", f[0], code)
	}
	return nil
}
