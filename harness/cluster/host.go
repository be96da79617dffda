package cluster

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// pickPort returns port when it is free on host; port 0 means
// DefaultPort or, when that is taken, any free port; port -1 means any
// free port.
func pickPort(host string, port int) (int, error) {
	want := port
	if port == 0 {
		want = DefaultPort
	}
	if want > 0 {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(want)))
		if err == nil {
			ln.Close()
			return want, nil
		}
		if port != 0 {
			return 0, fmt.Errorf("starting local cluster: port %d on %s is not free (%w); pick another port or leave it unset", port, host, err)
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("starting local cluster: finding a free port on %s: %w", host, err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// lockStateDir makes sure only one cluster runs from a state dir: two
// would fight over etcd's data and the ports in the kubeconfigs.
func lockStateDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("starting local cluster: locking %s: %w", dir, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting local cluster: state dir %s is in use by another drover process (%w); stop it or use another state dir", dir, err)
	}
	return func() { f.Close() }, nil
}
