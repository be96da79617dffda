// Command hello is the workload image of the drover smoke test: a Pod running
// it to completion proves that the node pulled an image, started a container
// and reported its exit. It prints a fixed greeting (which the harness greps
// for in the Pod log) and the container's hostname (the Pod name under
// Kubernetes), then exits 0.
//
// It is built by harness/registry with CGO_ENABLED=0 into a static binary and
// must stay standard-library only: it is compiled in a throwaway module.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Println("hello from drover")
	host, err := os.Hostname()
	if err != nil {
		fmt.Fprintf(os.Stderr, "hello: reading hostname: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("hostname: %s\n", host)
}
