// Command drover-pause is the program of a drover node's pod sandbox
// ("pause") image: it holds a pod's namespaces open until the runtime stops
// it. Like the upstream pause it exits 0 on SIGTERM or SIGINT and, when it
// runs as PID 1 of a shared PID namespace, reaps the zombies that nobody
// else will.
//
// drover build compiles it (static, -trimpath, the lock's toolchain) for
// linux/amd64 and linux/arm64 into the image index the node imports into
// containerd at boot (image/oci, docs/node-config.md "The sandbox image"):
// a node never pulls its sandbox image. Standard library only, so that its
// digest moves only with its source and the toolchain.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("drover-pause")
		return
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	// The line tells a watcher the handlers are installed; before that a
	// SIGTERM would kill the process instead of stopping it cleanly. Sandbox
	// output goes nowhere under containerd, so it costs nothing there.
	fmt.Fprintln(os.Stderr, "pause: waiting for SIGTERM or SIGINT")
	for sig := range sigs {
		if sig == syscall.SIGCHLD {
			if os.Getpid() == 1 {
				reap()
			}
			continue
		}
		fmt.Fprintf(os.Stderr, "Shutting down, got signal: %v\n", sig)
		os.Exit(0)
	}
}

// reap collects every exited child; SIGCHLD coalesces, so one signal may
// stand for several zombies.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
