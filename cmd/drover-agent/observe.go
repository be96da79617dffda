package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/drover-os/drover/agent/guarantee"
)

// cmdline reads a process's argv from /proc.
func cmdline(pid uint32) ([]string, error) {
	if pid == 0 {
		return nil, fmt.Errorf("no main process")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil, err
	}
	// A process that has exited and not been reaped (a kubelet that
	// crashed, before systemd restarts it) shows an empty file: no
	// command line, not one empty word.
	if len(b) == 0 {
		return nil, nil
	}
	return strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00"), nil
}

// kubeletPorts asks the kubelet's API port and read-only port for its pods
// without credentials, as anything on the node's network could: the API
// must answer 401, the read-only port not at all. The serving certificate
// is not checked: the question is whether the kubelet asks who calls.
func kubeletPorts(ctx context.Context) (api, readOnly guarantee.Probe) {
	c := portClient(3*time.Second, 10*time.Second)
	defer c.CloseIdleConnections()
	return probePort(ctx, c, "https://127.0.0.1:10250/pods"), probePort(ctx, c, "http://127.0.0.1:10255/pods")
}

// portClient asks without credentials, trusts any serving certificate and
// follows no redirect: the first answer is the one judged.
func portClient(dial, total time.Duration) *http.Client {
	tr := &http.Transport{Proxy: nil, TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
		DialContext: (&net.Dialer{Timeout: dial}).DialContext}
	return &http.Client{Transport: tr, Timeout: total,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// probePort is one GET: the status when something answered over HTTP,
// otherwise why not, with Timeout set only when time ran out (a busy node),
// not when the port refused or spoke something else.
func probePort(ctx context.Context, c *http.Client, url string) guarantee.Probe {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return guarantee.Probe{Err: err.Error()}
	}
	resp, err := c.Do(req)
	if err != nil {
		var ne net.Error
		return guarantee.Probe{Err: err.Error(), Timeout: errors.As(err, &ne) && ne.Timeout()}
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	return guarantee.Probe{Status: resp.StatusCode}
}

// instanceSize reads the instance's size as the kubelet reports its
// capacity: the CPUs the kernel has online and MemTotal. The
// reservations are computed from it (nodeconfig.Reserve).
func instanceSize() (cpus int, memTotal uint64, err error) {
	online, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return 0, 0, err
	}
	if cpus, err = countCPUList(string(online)); err != nil {
		return 0, 0, fmt.Errorf("/sys/devices/system/cpu/online: %w", err)
	}
	meminfo, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, 0, err
	}
	if memTotal, err = memTotalOf(string(meminfo)); err != nil {
		return 0, 0, fmt.Errorf("/proc/meminfo: %w", err)
	}
	return cpus, memTotal, nil
}

// countCPUList counts the CPUs of a kernel CPU list ("0-3,8,10-11").
func countCPUList(s string) (int, error) {
	n := 0
	for _, part := range strings.Split(strings.TrimSpace(s), ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return 0, fmt.Errorf("CPU list %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return 0, fmt.Errorf("CPU list %q: bad range %q", s, part)
			}
		}
		n += b - a + 1
	}
	return n, nil
}

// memTotalOf gives /proc/meminfo's MemTotal in bytes.
func memTotalOf(meminfo string) (uint64, error) {
	for line := range strings.Lines(meminfo) {
		rest, ok := strings.CutPrefix(line, "MemTotal:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("MemTotal line %q: want \"<n> kB\"", strings.TrimSpace(line))
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil || kb == 0 {
			return 0, fmt.Errorf("MemTotal line %q: not a size", strings.TrimSpace(line))
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("no MemTotal line")
}
