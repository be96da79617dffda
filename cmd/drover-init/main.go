// Command drover-init is the initrd's PID 1: it sets up the dm-verity root,
// /var and /etc and switches to systemd (see package agent/boot). Run as
// any other PID, `drover-init --plan CONFIG` prints the boot steps for a
// config file.
package main

import (
	"fmt"
	"os"
	"time"

	"github.com/drover-os/drover/agent/boot"
)

func main() {
	if os.Getpid() != 1 {
		os.Exit(plan(os.Args[1:]))
	}
	start := time.Now()
	log := boot.NewLog(start)
	var err error
	func() {
		// A panic in PID 1 would panic the kernel with no word of why:
		// turn it into the same fatal line and reboot as any error.
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("internal error: %v", r)
			}
		}()
		err = boot.Run(boot.NewMachine(boot.DefaultPaths, log), boot.Steps())
	}()
	if err == nil {
		err = fmt.Errorf("the boot steps ended without starting an init system")
	}
	boot.Halt(log, err, boot.RebootDelay)
}

func plan(args []string) int {
	if len(args) != 2 || args[0] != "--plan" {
		fmt.Fprintln(os.Stderr, "drover-init runs as PID 1 in the initrd; to see its steps: drover-init --plan CONFIG")
		return 2
	}
	b, err := os.ReadFile(args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "drover-init:", err)
		return 1
	}
	c, err := boot.Parse(b)
	if err != nil {
		fmt.Fprintln(os.Stderr, "drover-init:", err)
		return 1
	}
	for i, s := range boot.Steps() {
		fmt.Printf("%2d. %s\n", i+1, s.Describe(c))
	}
	return 0
}
