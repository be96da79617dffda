// Package e2e holds the end-to-end tests: build real images with the drover
// binary, check them with independent tools and boot them under QEMU. They
// run with `go test -tags e2e ./e2e/` (make e2e), as root in CI.
package e2e
