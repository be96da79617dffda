// Command drover builds immutable Kubernetes node images for Alibaba Cloud
// ECS and smoke-tests them under QEMU. It is the only place that prints
// errors and exits; the work is done by the image/, agent/ and harness/
// packages.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// exitError carries a specific exit status (e.g. 1 for "different" in diff,
// 2 for usage) through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := newRootCmd().ExecuteContext(ctx)
	if err == nil {
		return
	}
	code := 1
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	}
	if ctx.Err() != nil {
		fmt.Fprintln(os.Stderr, "drover: interrupted; nothing half-written was kept, run the command again")
		os.Exit(130)
	}
	if ee == nil || ee.err != nil {
		fmt.Fprintf(os.Stderr, "drover: %v\n", err)
	}
	os.Exit(code)
}
