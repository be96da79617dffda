package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCmdlineOfAnExitedProcess: a main process that has exited and is not
// reaped yet (a crashed kubelet before systemd restarts it) has no command
// line, which the guarantee check looks at again; it must not read as one
// empty word, which the check would judge as a kubelet started without any
// of its flags.
func TestCmdlineOfAnExitedProcess(t *testing.T) {
	cmd := exec.Command("sleep", "0")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := uint32(cmd.Process.Pid)
	for deadline := time.Now().Add(10 * time.Second); ; {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/stat")
		if err != nil {
			t.Fatal(err)
		}
		if f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:])); len(f) > 0 && f[0] == "Z" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sleep 0 (pid %d) is not a zombie after 10s: %s", pid, stat)
		}
		time.Sleep(10 * time.Millisecond)
	}
	argv, err := cmdline(pid)
	cmd.Wait()
	if err != nil || len(argv) != 0 {
		t.Fatalf("cmdline of a zombie: %q, %v; want no words", argv, err)
	}

	live := exec.Command("sleep", "30")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { live.Process.Kill(); live.Wait() }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		// Until the exec, the child shows the test binary's command line.
		if argv, err = cmdline(uint32(live.Process.Pid)); err == nil && slices.Equal(argv, []string{"sleep", "30"}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cmdline of sleep 30: %q, %v", argv, err)
		}
	}
}

func TestCountCPUList(t *testing.T) {
	for in, want := range map[string]int{"0\n": 1, "0-1\n": 2, "0-3,8,10-11\n": 7, "0,2": 2} {
		if got, err := countCPUList(in); err != nil || got != want {
			t.Errorf("countCPUList(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "a", "3-1", "0-", "0,,1"} {
		if got, err := countCPUList(in); err == nil {
			t.Errorf("countCPUList(%q) = %d, want an error", in, got)
		}
	}
}

func TestMemTotalOf(t *testing.T) {
	got, err := memTotalOf("MemTotal:        3022124 kB\nMemFree:          123 kB\n")
	if err != nil || got != 3022124<<10 {
		t.Errorf("memTotalOf = %d, %v", got, err)
	}
	for _, in := range []string{"MemFree: 1 kB\n", "MemTotal: 12 MB\n", "MemTotal: 0 kB\n", "MemTotal: x kB\n", "MemTotal:\n"} {
		if got, err := memTotalOf(in); err == nil {
			t.Errorf("memTotalOf(%q) = %d, want an error", in, got)
		}
	}
}

// The running machine's own size: what the kubelet would report.
func TestInstanceSizeOfThisMachine(t *testing.T) {
	cpus, mem, err := instanceSize()
	if err != nil || cpus < 1 || mem < 64<<20 {
		t.Errorf("instanceSize() = %d CPUs, %d bytes, %v", cpus, mem, err)
	}
}

// TestProbePort: only a probe that ran out of time is marked Timeout (the
// guard then judges nothing); a refused port, a port speaking something
// else and an answer are evidence.
func TestProbePort(t *testing.T) {
	c := portClient(time.Second, 300*time.Millisecond)
	defer c.CloseIdleConnections()
	ctx := t.Context()

	api := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
	}))
	defer api.Close()
	if p := probePort(ctx, c, api.URL+"/pods"); p.Status != http.StatusUnauthorized || p.Timeout || p.Err != "" {
		t.Errorf("a kubelet API asking for credentials: %+v, want HTTP 401", p)
	}

	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	held := make(chan net.Conn, 4)
	go func() {
		for {
			conn, err := silent.Accept()
			if err != nil {
				return
			}
			held <- conn // accepted, never answered
		}
	}()
	defer func() {
		for len(held) > 0 {
			(<-held).Close()
		}
	}()
	if p := probePort(ctx, c, "http://"+silent.Addr().String()+"/pods"); !p.Timeout || p.Status != 0 || p.Err == "" {
		t.Errorf("a port that accepts and never answers: %+v, want Timeout with the error", p)
	}

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := closed.Addr().String()
	closed.Close()
	if p := probePort(ctx, c, "http://"+addr+"/pods"); p.Timeout || p.Status != 0 || !strings.Contains(p.Err, "refused") {
		t.Errorf("a closed port: %+v, want connection refused, not a timeout", p)
	}

	garbage, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer garbage.Close()
	go func() {
		for {
			conn, err := garbage.Accept()
			if err != nil {
				return
			}
			conn.Write([]byte("SSH-2.0-not-http\r\n"))
			conn.Close()
		}
	}()
	if p := probePort(ctx, c, "http://"+garbage.Addr().String()+"/pods"); p.Timeout || p.Status != 0 || p.Err == "" {
		t.Errorf("a port speaking something else: %+v, want an error that is not a timeout", p)
	}
}
