package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
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
	tr := &http.Transport{Proxy: nil, TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
		DialContext: (&net.Dialer{Timeout: 3 * time.Second}).DialContext}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(url string) guarantee.Probe {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return guarantee.Probe{Err: err.Error()}
		}
		resp, err := c.Do(req)
		if err != nil {
			return guarantee.Probe{Err: err.Error()}
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		return guarantee.Probe{Status: resp.StatusCode}
	}
	return get("https://127.0.0.1:10250/pods"), get("http://127.0.0.1:10255/pods")
}
