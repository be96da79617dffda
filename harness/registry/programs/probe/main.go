// Command probe inspects the node it runs on for the drover smoke test and
// reports in its termination message (read from the Pod status, so the
// harness needs no connection to the kubelet). It runs with hostPID and
// hostNetwork and the node's / mounted read-only at /host (and /host-etc
// read-write for the "edit /etc" step):
//
//	probe inspect     report TCP listeners, sshd, read-only / and /usr, the bootstrap kubeconfig
//	probe edit-etc    write /host-etc/drover-smoke-edit (gone after a reboot: /etc is tmpfs)
//
// Standard library only: it is built in a throwaway module.
package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

type report struct {
	Listeners     []string `json:"listeners"` // ip:port of non-loopback TCP listeners
	SSHD          bool     `json:"sshd"`      // an sshd binary or process exists
	RootRO        bool     `json:"rootReadOnly"`
	UsrRO         bool     `json:"usrReadOnly"`
	Bootstrap     bool     `json:"bootstrapKubeconfig"` // /etc/kubernetes/bootstrap-kubelet.conf exists
	EtcEditExists bool     `json:"etcEditExists"`
	Error         string   `json:"error,omitempty"`
}

func main() {
	mode := "inspect"
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	var out []byte
	switch mode {
	case "edit-etc":
		err := os.WriteFile("/host-etc/drover-smoke-edit", []byte("edited by the smoke test\n"), 0o644)
		out = []byte(fmt.Sprintf(`{"edited":%v}`, err == nil))
		if err != nil {
			out = []byte(fmt.Sprintf(`{"edited":false,"error":%q}`, err.Error()))
		}
	default:
		r := inspect()
		out, _ = json.Marshal(r)
	}
	fmt.Println(string(out))
	_ = os.WriteFile("/dev/termination-log", out, 0o644)
}

func inspect() report {
	var r report
	r.Listeners = listeners()
	for _, p := range []string{"/host/usr/sbin/sshd", "/host/usr/bin/sshd", "/host/sbin/sshd"} {
		if _, err := os.Stat(p); err == nil {
			r.SSHD = true
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == "sshd" {
			r.SSHD = true
		}
	}
	r.RootRO, r.UsrRO = mountRO("/"), mountRO("/usr")
	_, err := os.Stat("/host/etc/kubernetes/bootstrap-kubelet.conf")
	r.Bootstrap = err == nil
	_, err = os.Stat("/host/etc/drover-smoke-edit")
	r.EtcEditExists = err == nil
	return r
}

// mountRO reports whether the mount covering path in PID 1's mount
// namespace (the host's, with hostPID) is read-only.
func mountRO(path string) bool {
	f, err := os.Open("/proc/1/mountinfo")
	if err != nil {
		return false
	}
	defer f.Close()
	best, ro := "", false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 {
			continue
		}
		mp := fields[4]
		if (path == mp || strings.HasPrefix(path, strings.TrimSuffix(mp, "/")+"/")) && len(mp) >= len(best) {
			best = mp
			ro = strings.Split(fields[5], ",")[0] == "ro"
		}
	}
	return ro
}

// listeners reads /proc/net/tcp{,6} (the host's, with hostNetwork) for
// sockets in LISTEN state not bound to loopback.
func listeners() []string {
	set := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			fields := strings.Fields(line)
			if len(fields) < 4 || fields[3] != "0A" { // 0A = LISTEN
				continue
			}
			ipHex, portHex, _ := strings.Cut(fields[1], ":")
			ip := decodeIP(ipHex)
			port, _ := strconv.ParseUint(portHex, 16, 16)
			if ip == nil || ip.IsLoopback() {
				continue
			}
			set[net.JoinHostPort(ip.String(), strconv.Itoa(int(port)))] = true
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// decodeIP reads the kernel's hex notation: 32-bit words in host (little
// endian) order.
func decodeIP(h string) net.IP {
	b, err := hex.DecodeString(h)
	if err != nil || (len(b) != 4 && len(b) != 16) {
		return nil
	}
	ip := make(net.IP, len(b))
	for i := 0; i < len(b); i += 4 {
		ip[i], ip[i+1], ip[i+2], ip[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	return ip
}
