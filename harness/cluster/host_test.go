package cluster

import (
	"net"
	"strconv"
	"strings"
	"testing"
)

func TestPickPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := ln.Addr().(*net.TCPAddr).Port
	if _, err := pickPort("127.0.0.1", busy); err == nil || !strings.Contains(err.Error(), "port "+strconv.Itoa(busy)) {
		t.Errorf("busy explicit port: err = %v", err)
	}
	p, err := pickPort("127.0.0.1", -1)
	if err != nil || p <= 0 || p == busy {
		t.Errorf("any free port = %d, %v", p, err)
	}
	// 0 gives 6443 when free and some free port otherwise; either way a
	// port that can be listened on.
	p, err = pickPort("127.0.0.1", 0)
	if err != nil {
		t.Fatal(err)
	}
	l2, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		t.Errorf("pickPort(0) = %d, not free: %v", p, err)
	} else {
		l2.Close()
	}
}

func TestLockStateDir(t *testing.T) {
	dir := t.TempDir()
	unlock, err := lockStateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockStateDir(dir); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("second lock: err = %v", err)
	}
	unlock()
	unlock2, err := lockStateDir(dir)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	unlock2()
}

// A Start that failed early leaves a Cluster with nothing running; Stop
// must cope, and a second Stop must be harmless.
func TestStopNothing(t *testing.T) {
	c := &Cluster{}
	if err := c.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if err := c.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}
