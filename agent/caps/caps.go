// Package caps drops the agent's Linux capabilities once provisioning is
// done, so the resident drift guard runs with far less than the phases
// before it needed (drover-agent.service's CapabilityBoundingSet). The
// drop covers every thread of the process (the Go runtime runs goroutines
// on many), the bounding set included, and locks root's special treatment
// off, so nothing the process does later can regain what it gave up.
package caps

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// Capability numbers (linux/capability.h) the agent names.
const (
	DACReadSearch = 2
	SetPCap       = 8
	SysBoot       = 22
)

// Secure bits (linux/securebits.h): root gets no capabilities on exec and
// keeps none through setuid, for good.
const (
	secNoRoot              = 1 << 0
	secNoRootLocked        = 1 << 1
	secNoSetuidFixup       = 1 << 2
	secNoSetuidFixupLocked = 1 << 3
	secKeepCapsLocked      = 1 << 5
	secureBits             = secNoRoot | secNoRootLocked | secNoSetuidFixup | secNoSetuidFixupLocked | secKeepCapsLocked
)

const (
	prCapBSetDrop   = 24
	prSetSecureBits = 28
	capVersion3     = 0x20080522
)

// Masks are the two 32-bit halves of a capability set for capset(2).
func Masks(keep ...int) [2]uint32 {
	var m [2]uint32
	for _, c := range keep {
		m[c/32] |= 1 << (c % 32)
	}
	return m
}

// DropPlan is the bounding-set entries to drop: every capability the kernel
// knows (0..last) except keep.
func DropPlan(last int, keep ...int) []int {
	var out []int
	for c := 0; c <= last; c++ {
		kept := false
		for _, k := range keep {
			kept = kept || k == c
		}
		if !kept {
			out = append(out, c)
		}
	}
	return out
}

// Drop keeps only the capabilities in keep, on every thread: secure bits
// first (they need CAP_SETPCAP), then the bounding set (CAP_SETPCAP too),
// then the permitted, effective and inheritable sets. It needs a binary
// built without cgo (syscall.AllThreadsSyscall).
func Drop(keep ...int) error {
	last, err := lastCap()
	if err != nil {
		return err
	}
	if _, _, e := syscall.AllThreadsSyscall(syscall.SYS_PRCTL, prSetSecureBits, secureBits, 0); e != 0 {
		return fmt.Errorf("prctl(PR_SET_SECUREBITS): %w (is CAP_SETPCAP in drover-agent.service's CapabilityBoundingSet?)", e)
	}
	for _, c := range DropPlan(last, keep...) {
		if _, _, e := syscall.AllThreadsSyscall(syscall.SYS_PRCTL, prCapBSetDrop, uintptr(c), 0); e != 0 && e != syscall.EINVAL {
			return fmt.Errorf("prctl(PR_CAPBSET_DROP, %d): %w", c, e)
		}
	}
	hdr := struct {
		version uint32
		pid     int32
	}{capVersion3, 0}
	m := Masks(keep...)
	var data [2]struct{ effective, permitted, inheritable uint32 }
	for i := range data {
		data[i].effective, data[i].permitted = m[i], m[i]
	}
	if _, _, e := syscall.AllThreadsSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("capset: %w", e)
	}
	return nil
}

// lastCap is the highest capability the running kernel knows.
func lastCap() (int, error) {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 0, fmt.Errorf("reading the kernel's last capability: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("/proc/sys/kernel/cap_last_cap %q: %w", b, err)
	}
	return n, nil
}
