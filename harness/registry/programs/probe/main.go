// Command probe inspects the node it runs on for the drover smoke test and
// reports in its termination message (read from the Pod status, so the
// harness needs no connection to the kubelet). It runs with hostPID and
// hostNetwork and the node's / mounted read-only at /host (and /host-etc
// read-write for the "edit /etc" step):
//
//	probe inspect     report TCP listeners, sshd, read-only / and /usr, the bootstrap kubeconfig
//	probe edit-etc    write /host-etc/drover-smoke-edit (gone after a reboot: /etc is tmpfs)
//	probe units       failed systemd units and each one's journal lines (systemctl, journalctl in /host)
//	probe chain       systemd-analyze critical-chain of drover-agent.service and kubelet.service
//
// units and chain run the node's own systemctl, journalctl and
// systemd-analyze chrooted into /host (the hostPath mount is recursive, so
// /host/run holds systemd's and the journal's sockets).
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
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
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
	case "units":
		out, _ = json.Marshal(failedUnits())
	case "chain":
		out, _ = json.Marshal(criticalChain())
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

// terminationLimit is what the kubelet keeps of a termination message.
const terminationLimit = 4096

// hostCommand runs one of the node's own programs chrooted into /host;
// args[0] is an absolute path inside /host (the container has no PATH
// lookup for it: the chroot happens in the child, after the lookup).
func hostCommand(args ...string) (string, error) {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: "/host"}
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin", "SYSTEMD_COLORS=0", "SYSTEMD_PAGER=", "LANG=C.UTF-8"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

type unitsReport struct {
	Failed  []string            `json:"failed"`            // units systemctl lists as failed
	Journal map[string][]string `json:"journal,omitempty"` // unit -> its last journal lines this boot
	Error   string              `json:"error,omitempty"`
}

func failedUnits() unitsReport {
	var r unitsReport
	out, err := hostCommand("/usr/bin/systemctl", "list-units", "--failed", "--all", "--plain", "--no-legend", "--no-pager")
	if err != nil {
		r.Error = err.Error()
		return r
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			r.Failed = append(r.Failed, strings.TrimPrefix(f[0], "\u25cf"))
		}
	}
	if len(r.Failed) == 0 {
		return r
	}
	r.Journal = map[string][]string{}
	// Share the termination message between the offenders: the newest
	// lines of each, each line cut to a sensible length.
	budget := (terminationLimit - 200) / len(r.Failed)
	for _, u := range r.Failed {
		out, err := hostCommand("/usr/bin/journalctl", "-b", "-u", u, "--no-pager", "-n", "12", "-o", "short-monotonic")
		if err != nil {
			out = err.Error()
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var keep []string
		used := 0
		for i := len(lines) - 1; i >= 0; i-- {
			l := lines[i]
			if len(l) > 160 {
				l = l[:160]
			}
			if used+len(l)+8 > budget {
				break
			}
			used += len(l) + 8
			keep = append([]string{l}, keep...)
		}
		r.Journal[u] = keep
	}
	return r
}

type chainReport struct {
	Chain string `json:"chain"`          // systemd-analyze critical-chain output
	Time  string `json:"time,omitempty"` // systemd-analyze time, first line
	Error string `json:"error,omitempty"`
}

func criticalChain() chainReport {
	var r chainReport
	out, err := hostCommand("/usr/bin/systemd-analyze", "critical-chain", "--no-pager", "drover-agent.service", "kubelet.service")
	if err != nil {
		r.Error = err.Error()
	}
	r.Chain = strings.TrimSpace(out)
	if t, err := hostCommand("/usr/bin/systemd-analyze", "time", "--no-pager"); err == nil {
		r.Time = strings.TrimSpace(strings.SplitN(t, "\n", 2)[0])
	}
	if len(r.Chain) > terminationLimit-len(r.Time)-200 {
		r.Chain = r.Chain[:terminationLimit-len(r.Time)-200]
	}
	return r
}
