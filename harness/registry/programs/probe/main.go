// Command probe inspects the node it runs on for the drover smoke test and
// reports on stdout and in its termination message, the same line. The
// harness runs most modes as execs in one pod per boot (harness/smoke
// probe.go: the exec's stdout and exit status are the answer) and the rest
// as pods of their own (their termination message, read from the Pod
// status). It runs privileged with
// hostPID and hostNetwork, so /proc/net is the node's network namespace,
// /proc/<pid> are the node's processes and /proc/1/root is the node's root
// with every mount (the live tmpfs /etc included); /host-etc is the node's
// /etc mounted read-write for the "edit /etc" step:
//
//	probe inspect         report sockets (TCP listeners, unconnected UDP) with their owning
//	                      process, sshd, read-only / and /usr, the bootstrap kubeconfig,
//	                      the /etc edit, the device behind /var
//	probe edit-etc TEXT   write TEXT to /host-etc/drover-smoke-edit and read it back
//	                      through /proc/1/root/etc; exit 1 if either fails
//	probe units           failed systemd units and each one's journal lines
//	probe chain           systemd-analyze critical-chain of drover-agent.service and kubelet.service
//	probe time            the node's timesyncd drop-in (as PID 1 sees /etc), the unit's state,
//	                      whether it has synchronised the clock
//	probe evidence DIR UNIT…
//	                      the node's boot id, the files the smoke's own units wrote in /var/DIR
//	                      (one "BOOT-ID PID" line per run), whether each PID is alive and its
//	                      comm, and systemctl's ActiveState/SubState/Result of each UNIT
//	probe security UNIT   systemd-analyze security UNIT (its overall line and every ✗ line)
//	                      and the capability lines of /proc/<MainPID>/status
//	probe put-etc REL B64 MODE
//	                      write the base64 content to /host-etc/REL with octal MODE and read
//	                      it back through /proc/1/root/etc
//	probe serve           run until SIGTERM, then exit 0 with "stopped by SIGTERM" as the
//	                      termination message (a pod the node's shutdown stops; the host
//	                      probe pod the other modes are exec'd in)
//	probe alloc MIB       allocate and touch MIB MiB, a MiB at a time (past its memory limit,
//	                      the kernel's OOM killer ends it); exit 0 only if it got them all
//	probe fserror         make a 16 MiB ext4 file system on a loop device on the node, mount it
//	                      errors=remount-ro at /run/drover-smoke-fs and make ext4 report an error
//	                      (/sys/fs/ext4/<dev>/trigger_fs_error); report whether a file could be
//	                      written on it before and after, and its superblock's options
//	probe storage         where /var/lib/containerd, /var/lib/kubelet/pods and /var are mounted
//	                      (device, major:minor, the filesystem's directory, type), the UUID
//	                      the node's blkid -p reads there, statfs size and use, the names inside
//	probe prestop URL     GET URL (any answer will do: the harness's server logs the request),
//	                      up to 10 tries a second apart; a preStop hook's side effect
//	probe daemons         MainPID and NRestarts of kubelet, containerd and drover-agent, as
//	                      the node's systemctl shows them
//	probe kill-containerd N
//	                      SIGKILL containerd's main process N times, each time once systemd
//	                      has restarted it (a new MainPID, active); report the PIDs killed
//	probe cis             what the CIS benchmark's node checks audit (harness/cis): the
//	                      kubelet's command line and unit files, the modes and owners of the
//	                      files they and its loaded configuration name, /configz (with the
//	                      pod's service account token), the TLS 1.2 suites 10250 accepts
//	probe images          containerd's image records in the CRI's namespace (name, target
//	                      digest, labels), asked of its images service on the node's socket
//	probe post-journal URL  POSTs this boot's whole journal (journalctl -o export) and every file in
//	                      /run/drover to URL?name=…, for the harness to scan: nothing of it on the node's disk
//	probe journal UNIT [N [TEXT]]  the node's journal of UNIT this boot (its last N lines, 60;
//	                      with TEXT only the last three of them holding it)
//	probe pressure SECS MIB
//	                      start a transient unit on the node, outside the pods' cgroup, that
//	                      after 10 s fills a private tmpfs until MIB MiB are left of what the
//	                      kubelet counts as available (MemFree + Inactive(file)) and holds it
//	                      SECS seconds; report its unit name and the daemons before
//
// units and chain run the node's own systemctl, journalctl and
// systemd-analyze chrooted into /host (the hostPath mount is recursive, so
// /host/run holds systemd's and the journal's sockets).
//
// The probe reports facts; the harness (harness/smoke) judges them.
// Standard library only: it is built in a throwaway module.
package main

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// EditFile is the file edit-etc writes, relative to /etc.
const EditFile = "drover-smoke-edit"

// hostRoot is the node's root as PID 1 sees it (hostPID).
const hostRoot = "/proc/1/root"

// socket is a TCP listener or an unconnected UDP socket of the node.
type socket struct {
	Proto   string `json:"proto"` // tcp, tcp6, udp, udp6
	Local   string `json:"local"` // ip:port
	Inode   uint64 `json:"inode"`
	PID     int    `json:"pid,omitempty"`     // 0: no process holds the socket
	Process string `json:"process,omitempty"` // /proc/<pid>/comm
}

type report struct {
	Sockets     []socket `json:"sockets"`
	SocketFiles []string `json:"socketFiles"` // the /proc/net tables that were read
	SSHD        bool     `json:"sshd"`        // an sshd binary or process exists
	RootRO      bool     `json:"rootReadOnly"`
	UsrRO       bool     `json:"usrReadOnly"`
	Bootstrap   bool     `json:"bootstrapKubeconfig"` // /etc/kubernetes/bootstrap-kubelet.conf exists
	EtcVisible  bool     `json:"etcVisible"`          // the node's /etc/os-release was readable
	EtcEdit     *string  `json:"etcEdit"`             // content of /etc/drover-smoke-edit; null: absent
	VarSource   string   `json:"varSource"`           // the device mounted at /var
	Errors      []string `json:"errors,omitempty"`
}

func main() {
	mode := "inspect"
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	var out []byte
	code := 0
	switch mode {
	case "edit-etc":
		text := "edited by the smoke test"
		if len(os.Args) > 2 {
			text = os.Args[2]
		}
		got, err := editEtc(text)
		res := map[string]any{"edited": err == nil, "readBack": got}
		if err != nil {
			res["error"] = err.Error()
			code = 1
		}
		out, _ = json.Marshal(res)
	case "inspect":
		out, _ = json.Marshal(inspect())
	case "units":
		out, _ = json.Marshal(failedUnits())
	case "chain":
		out, _ = json.Marshal(criticalChain())
	case "storage":
		out, _ = json.Marshal(containerStorage())
	case "time":
		out, _ = json.Marshal(timeSync())
	case "evidence":
		out, _ = json.Marshal(evidence(os.Args[2], os.Args[3:]))
	case "security":
		out, _ = json.Marshal(security(os.Args[2]))
	case "put-etc":
		res := map[string]any{"written": true}
		if err := putEtc(os.Args[2], os.Args[3], os.Args[4]); err != nil {
			res = map[string]any{"written": false, "error": err.Error()}
			code = 1
		}
		out, _ = json.Marshal(res)
	case "plant-stored", "plant-contents":
		plant := func() (map[string]any, error) {
			return plantStored(os.Args[2], os.Args[3], len(os.Args) > 4 && os.Args[4] == "delete-digest")
		}
		if mode == "plant-contents" {
			plant = func() (map[string]any, error) { return plantContents(os.Args[2], os.Args[3]) }
		}
		res, err := plant()
		if err != nil {
			res = map[string]any{"planted": false, "error": err.Error()}
			code = 1
		}
		out, _ = json.Marshal(res)
	case "exists":
		out, _ = json.Marshal(exists(os.Args[2]))
	case "read":
		out, _ = json.Marshal(readFile(os.Args[2]))
	case "post-journal":
		res, err := postJournal(os.Args[2])
		if err != nil {
			res["error"] = err.Error()
			code = 1
		}
		out, _ = json.Marshal(res)
	case "alloc":
		mib, _ := strconv.Atoi(os.Args[2])
		var hold [][]byte
		for i := 0; i < mib; i++ {
			b := make([]byte, 1<<20)
			for j := 0; j < len(b); j += 4096 {
				b[j] = 1
			}
			hold = append(hold, b)
		}
		out = []byte(fmt.Sprintf("allocated %d MiB", len(hold)))
	case "fserror":
		res, err := fsError()
		if err != nil {
			res["error"] = err.Error()
			code = 1
		}
		out, _ = json.Marshal(res)
	case "cis":
		// What the CIS benchmark's node checks audit (harness/cis).
		r := cisEvidence()
		out, _ = json.Marshal(r)
		if len(out) > terminationLimit {
			out = []byte(fmt.Sprintf(`{"errors":["the cis report is %d bytes, more than a termination message holds"]}`, len(out)))
			code = 1
		}
	case "images":
		// containerd's own list of the CRI's images (name, digest,
		// labels), from its images service on the node.
		imgs, err := containerdImages(containerdSocket, "k8s.io")
		res := map[string]any{"images": imgs}
		if err != nil {
			res["error"] = err.Error()
			code = 1
		}
		out, _ = json.Marshal(res)
	case "serve":
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM)
		fmt.Println("serving until SIGTERM")
		<-sig
		out = []byte("stopped by SIGTERM")
	case "daemons":
		res, err := daemons()
		if err != nil {
			res["error"] = err.Error()
			code = 1
		}
		out, _ = json.Marshal(res)
	case "kill-containerd":
		n, _ := strconv.Atoi(os.Args[2])
		killed, err := killContainerd(n)
		res := map[string]any{"killed": killed}
		if err != nil {
			res["error"] = err.Error()
			code = 1
		}
		out, _ = json.Marshal(res)
	case "inhibitors":
		// logind's own list of inhibitor locks (who, what, mode), and the
		// kubelet's lines about its node shutdown manager.
		o, err := hostCommand("/usr/bin/systemd-inhibit", "--list", "--no-pager")
		res := map[string]any{"inhibitors": o}
		if j, jerr := hostCommand("/usr/bin/journalctl", "-b", "-u", "kubelet.service", "--no-pager", "-o", "short-monotonic", "--grep", "(?i)shutdown|inhibit"); jerr == nil {
			res["kubelet"] = j
		}
		if err != nil {
			res["error"] = err.Error()
			code = 1
		}
		out, _ = json.Marshal(res)
	case "journal":
		lines := "60"
		if len(os.Args) > 3 {
			lines = os.Args[3]
		}
		o, err := hostCommand("/usr/bin/journalctl", "-b", "-u", os.Args[2], "-n", lines, "--no-pager", "-o", "short-monotonic")
		if len(os.Args) > 4 {
			// Only the last lines holding the text: a termination
			// message is at most 4 KiB.
			o = lastMatching(o, os.Args[4], 3)
		}
		res := map[string]any{"journal": o}
		if err != nil {
			res["error"] = err.Error()
			code = 1
		}
		out, _ = json.Marshal(res)
	case "pressure":
		res, err := daemons()
		if err == nil {
			res["unit"] = pressureUnit
			_, err = hostCommand(pressureCommand(os.Args[2], os.Args[3])...)
		}
		if err != nil {
			res["error"] = err.Error()
			code = 1
		}
		out, _ = json.Marshal(res)
	case "prestop":
		status, err := getOnce(os.Args[2])
		res := map[string]any{"url": os.Args[2], "status": status}
		if err != nil {
			res["error"] = err.Error()
			code = 1
		}
		out, _ = json.Marshal(res)
	default:
		out = []byte(fmt.Sprintf(`{"error":"unknown mode %q: want inspect, edit-etc, units, chain, time, evidence, security, put-etc, plant-stored, plant-contents, exists, read, post-journal, alloc, fserror, images, cis, serve, prestop, daemons, kill-containerd, journal or pressure"}`, mode))
		code = 2
	}
	fmt.Println(string(out))
	_ = os.WriteFile("/dev/termination-log", out, 0o644)
	os.Exit(code)
}

// editEtc writes text into the node's /etc and reads it back through PID 1's
// root, proving that the write reached the /etc the node runs with.
func editEtc(text string) (string, error) {
	f, err := os.OpenFile(filepath.Join("/host-etc", EditFile), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return "", err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	p := filepath.Join(hostRoot, "etc", EditFile)
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("reading the edit back: %w", err)
	}
	if string(b) != text {
		return string(b), fmt.Errorf("%s holds %q, want %q", p, b, text)
	}
	return string(b), nil
}

func inspect() report {
	var r report
	owners, err := socketOwners("/proc")
	if err != nil {
		r.Errors = append(r.Errors, err.Error())
	}
	for _, proto := range []string{"tcp", "tcp6", "udp", "udp6"} {
		p := "/proc/net/" + proto
		data, err := os.ReadFile(p)
		if err != nil {
			r.Errors = append(r.Errors, err.Error())
			continue
		}
		socks, err := parseNet(proto, data)
		if err != nil {
			r.Errors = append(r.Errors, fmt.Sprintf("%s: %v", p, err))
			continue
		}
		r.SocketFiles = append(r.SocketFiles, p)
		for _, s := range socks {
			if pid, ok := owners[s.Inode]; ok {
				s.PID = pid
				comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
				s.Process = strings.TrimSpace(string(comm))
			}
			r.Sockets = append(r.Sockets, s)
		}
	}
	for _, p := range []string{"/usr/sbin/sshd", "/usr/bin/sshd", "/sbin/sshd"} {
		if _, err := os.Stat(hostRoot + p); err == nil {
			r.SSHD = true
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == "sshd" {
			r.SSHD = true
		}
	}
	mounts, err := os.ReadFile("/proc/1/mountinfo")
	if err != nil {
		r.Errors = append(r.Errors, err.Error())
	}
	r.RootRO, _ = mountRO(mounts, "/")
	r.UsrRO, _ = mountRO(mounts, "/usr")
	r.VarSource = mountSource(mounts, "/var")
	_, err = os.Stat(hostRoot + "/etc/kubernetes/bootstrap-kubelet.conf")
	r.Bootstrap = err == nil
	_, err = os.ReadFile(hostRoot + "/etc/os-release")
	r.EtcVisible = err == nil
	if b, err := os.ReadFile(filepath.Join(hostRoot, "etc", EditFile)); err == nil {
		s := string(b)
		r.EtcEdit = &s
	} else if !os.IsNotExist(err) {
		r.Errors = append(r.Errors, err.Error())
	}
	return r
}

// socketOwners maps socket inodes to the PID holding them, from the
// /proc/<pid>/fd links ("socket:[inode]").
func socketOwners(proc string) (map[uint64]int, error) {
	fds, err := filepath.Glob(filepath.Join(proc, "[0-9]*", "fd", "*"))
	if err != nil {
		return nil, err
	}
	if len(fds) == 0 {
		return nil, fmt.Errorf("no file descriptors under %s/*/fd: is the probe running with hostPID and privileged?", proc)
	}
	owners := map[uint64]int{}
	for _, fd := range fds {
		link, err := os.Readlink(fd)
		if err != nil {
			continue // the process or descriptor went away
		}
		num, ok := strings.CutPrefix(link, "socket:[")
		if !ok {
			continue
		}
		inode, err := strconv.ParseUint(strings.TrimSuffix(num, "]"), 10, 64)
		if err != nil {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(fd))))
		if old, ok := owners[inode]; !ok || pid < old {
			owners[inode] = pid // a socket shared by fork: report the parent
		}
	}
	return owners, nil
}

// Kernel socket states (include/net/tcp_states.h).
const (
	stateListen = "0A" // TCP_LISTEN
	stateClose  = "07" // TCP_CLOSE: what an unconnected UDP socket shows
)

// parseNet reads a /proc/net/{tcp,tcp6,udp,udp6} table and returns the
// sockets that accept connections or datagrams from anyone: TCP in LISTEN,
// UDP not connected to a peer. Loopback ones are included; the harness
// decides what is allowed.
func parseNet(proto string, data []byte) ([]socket, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	if !sc.Scan() || !strings.Contains(sc.Text(), "local_address") {
		return nil, fmt.Errorf("no header line")
	}
	var out []socket
	udp := strings.HasPrefix(proto, "udp")
	for n := 2; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) < 10 {
			return nil, fmt.Errorf("line %d: %d fields, want at least 10", n, len(f))
		}
		local, err := decodeAddr(f[1])
		if err != nil {
			return nil, fmt.Errorf("line %d: local address: %w", n, err)
		}
		remote, err := decodeAddr(f[2])
		if err != nil {
			return nil, fmt.Errorf("line %d: remote address: %w", n, err)
		}
		switch {
		case !udp && f[3] == stateListen:
		case udp && f[3] == stateClose && remote.Port == 0:
		default:
			continue
		}
		inode, err := strconv.ParseUint(f[9], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: inode %q: %w", n, f[9], err)
		}
		out = append(out, socket{Proto: proto, Local: local.String(), Inode: inode})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Local < out[j].Local })
	return out, sc.Err()
}

// decodeAddr reads the kernel's "HEXIP:HEXPORT": the address as 32-bit words
// in host (little endian) order, the port big endian.
func decodeAddr(s string) (*net.TCPAddr, error) {
	ipHex, portHex, ok := strings.Cut(s, ":")
	if !ok {
		return nil, fmt.Errorf("%q: no port", s)
	}
	b, err := hex.DecodeString(ipHex)
	if err != nil || (len(b) != 4 && len(b) != 16) {
		return nil, fmt.Errorf("%q: not a 4- or 16-byte hex address", s)
	}
	ip := make(net.IP, len(b))
	for i := 0; i < len(b); i += 4 {
		ip[i], ip[i+1], ip[i+2], ip[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	port, err := strconv.ParseUint(portHex, 16, 16)
	if err != nil {
		return nil, fmt.Errorf("%q: port: %w", s, err)
	}
	return &net.TCPAddr{IP: ip, Port: int(port)}, nil
}

// mountRO reports whether the mount covering path in PID 1's mountinfo is
// read-only, and whether any mount covers it.
func mountRO(mountinfo []byte, path string) (ro, found bool) {
	best := ""
	for _, line := range strings.Split(string(mountinfo), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 6 {
			continue
		}
		mp := fields[4]
		if (path == mp || strings.HasPrefix(path, strings.TrimSuffix(mp, "/")+"/")) && len(mp) >= len(best) {
			best, found = mp, true
			ro = strings.Split(fields[5], ",")[0] == "ro"
		}
	}
	return ro, found
}

// mountSource is the source (device) of the last mount exactly at path.
func mountSource(mountinfo []byte, path string) string {
	src := ""
	for _, line := range strings.Split(string(mountinfo), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(tail) < 2 || fields[4] != path {
			continue
		}
		src = tail[1]
	}
	return src
}

// terminationLimit is what the kubelet keeps of a termination message.
const terminationLimit = 4096

// hostCommand runs one of the node's own programs chrooted into /host;
// args[0] is an absolute path inside /host (the container has no PATH
// lookup for it: the chroot happens in the child, after the lookup).
// pressureUnit is the transient unit the pressure mode starts.
const pressureUnit = "drover-smoke-pressure.service"

// pressureCommand is the systemd-run command line of the pressure mode.
// The memory is files on a tmpfs of the unit's own (TemporaryFileSystem):
// shmem, which the kernel cannot reclaim without swap, charged to the
// unit's cgroup in system.slice, not to the pods' (whose limit would end
// it first); the tmpfs goes with the unit's mount namespace when it stops.
// The kubelet counts as available MemFree and the inactive file cache,
// and the kernel refills the latter from the active list as the fill goes
// on: so the unit tops up every second until at most target MiB is left
// by that count, then holds it hold seconds. The 10 s wait lets this pod
// finish first.
func pressureCommand(hold, target string) []string {
	script := `sleep 10
avail() { awk '/^MemFree:/{f=$2} /^Inactive\(file\):/{i=$2} END{print int((f+i)/1024)}' /proc/meminfo; }
up() { cut -d. -f1 /proc/uptime; }
k=0; end=
while [ -z "$end" ] || [ "$(up)" -lt "$end" ]; do
  step=$(( $(avail) - ` + target + ` ))
  if [ "$step" -gt 8 ]; then k=$((k+1)); fallocate -l "${step}M" /run/drover-smoke-pressure/fill$k || exit 1
  elif [ -z "$end" ]; then end=$(( $(up) + ` + hold + ` )); echo "held from $(up)s: $(grep -E '^(MemFree|Inactive.file.|Shmem):' /proc/meminfo | tr -s ' ' | tr '\n' ' ')"
  fi
  sleep 1
done`
	// systemd expands $VAR and ${VAR} in a command line itself ("n" would
	// be empty): $$ is its escape for the shell's $.
	return []string{"/usr/bin/systemd-run", "--unit=" + pressureUnit, "--collect",
		"-p", "TemporaryFileSystem=/run/drover-smoke-pressure:size=100%", "-p", "RuntimeMaxSec=400",
		"-p", "OOMScoreAdjust=1000",
		"/usr/bin/dash", "-c", strings.ReplaceAll(script, "$", "$$")}
}

// killContainerd kills containerd n times, waiting each time for systemd
// to have restarted it (Restart=always, RestartSec=5), the last time too:
// the probe's own exit is then seen by a running containerd, and the pod
// ends Succeeded. The pod's container lives on meanwhile: its shim is not
// containerd's child (KillMode=process).
func killContainerd(n int) ([]int, error) {
	var killed []int
	pid := 0
	for {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			o, err := hostCommand("/usr/bin/systemctl", "show", "-p", "MainPID,ActiveState", "containerd.service")
			if err != nil {
				return killed, err
			}
			p, active := 0, strings.Contains(o, "ActiveState=active")
			for _, l := range strings.Fields(o) {
				if v, ok := strings.CutPrefix(l, "MainPID="); ok {
					p, _ = strconv.Atoi(v)
				}
			}
			if active && p != 0 && p != pid {
				pid = p
				break
			}
			if time.Now().After(deadline) {
				return killed, fmt.Errorf("containerd not active again 2m after kill %d: %s", len(killed), strings.Join(strings.Fields(o), " "))
			}
			time.Sleep(500 * time.Millisecond)
		}
		if len(killed) == n {
			return killed, nil
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return killed, fmt.Errorf("kill %d: %w", pid, err)
		}
		killed = append(killed, pid)
	}
}

// daemons reads MainPID and NRestarts of the node's own daemons.
func daemons() (map[string]any, error) {
	res := map[string]any{}
	for _, u := range []string{"kubelet.service", "containerd.service", "drover-agent.service"} {
		o, err := hostCommand("/usr/bin/systemctl", "show", "-p", "MainPID,NRestarts", u)
		if err != nil {
			return res, err
		}
		res[u] = strings.Join(strings.Fields(o), " ")
	}
	return res, nil
}

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

// TimesyncdDropIn is the drop-in drover-agent renders (agent/nodeconfig).
const TimesyncdDropIn = "/etc/systemd/timesyncd.conf.d/80-drover.conf"

type timeReport struct {
	DropIn *string `json:"dropIn"` // the drop-in's content; null: absent
	Active string  `json:"active"` // systemd-timesyncd.service ActiveState
	Sub    string  `json:"sub"`    // and SubState
	// Synced: timesyncd has synchronised the clock this boot (it creates
	// /run/systemd/timesync/synchronized then).
	Synced bool   `json:"synchronized"`
	Error  string `json:"error,omitempty"`
}

func timeSync() timeReport {
	var r timeReport
	if b, err := os.ReadFile(filepath.Join(hostRoot, TimesyncdDropIn)); err == nil {
		s := string(b)
		r.DropIn = &s
	} else if !os.IsNotExist(err) {
		r.Error = err.Error()
	}
	_, err := os.Stat(filepath.Join(hostRoot, "/run/systemd/timesync/synchronized"))
	r.Synced = err == nil
	st, err := showUnit("systemd-timesyncd.service")
	if err != nil {
		r.Error = err.Error()
		return r
	}
	r.Active, r.Sub = st.Active, st.Sub
	return r
}

// getOnce GETs url until an HTTP answer comes back (10 tries, a second
// apart) and gives its status code.
func getOnce(url string) (int, error) {
	c := &http.Client{Timeout: 3 * time.Second}
	var err error
	for try := 0; try < 10; try++ {
		var resp *http.Response
		if resp, err = c.Get(url); err == nil {
			resp.Body.Close()
			return resp.StatusCode, nil
		}
		time.Sleep(time.Second)
	}
	return 0, err
}

// fsError makes a real ext4 error on a scratch file system of the node's
// (never /var): a loop device over a file in /var/lib/drover-smoke,
// mounted errors=remount-ro, and ext4's trigger_fs_error, which calls the
// same ext4_error the kernel calls on corruption. The node's own tools do
// the work, in its mount namespace.
func fsError() (map[string]any, error) {
	res := map[string]any{}
	script := `set -e
mkdir -p /var/lib/drover-smoke-fs /run/drover-smoke-fs
truncate -s 16M /var/lib/drover-smoke-fs/fs.img
mkfs.ext4 -q -F /var/lib/drover-smoke-fs/fs.img
mount -o loop,errors=remount-ro /var/lib/drover-smoke-fs/fs.img /run/drover-smoke-fs
dev=$(findmnt -n -o SOURCE /run/drover-smoke-fs)
echo "device=$dev"
writable() { if echo x 2>/dev/null >/run/drover-smoke-fs/$1; then echo yes; else echo no; fi; }
echo "before=$(writable before)"
echo "drover smoke" > /sys/fs/ext4/$(basename $dev)/trigger_fs_error
sleep 1
echo "after=$(writable after)"
echo "superblock=$(findmnt -n -o FS-OPTIONS /run/drover-smoke-fs)"
`
	// The node's nsenter (from /host) into PID 1's mount namespace and
	// root: the loop mount is the node's, not this container's.
	out, err := hostCommand("/usr/bin/nsenter", "-t", "1", "-m", "-r", "--", "/bin/sh", "-c", script)
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			res[k] = v
		} else if l != "" {
			res["output"] = strings.TrimSpace(fmt.Sprint(res["output"], " ", l))
		}
	}
	return res, err
}

// lastMatching is the last n entries of out (journalctl's short output,
// "[ts] host unit[pid]: message") whose first line contains text. An
// entry is a line and the klog continuation lines after it: a
// multi-line value (an error from a plugin) is written as key=<,
// tab-indented lines and " >", and journald keeps each as its own line,
// so the keys after the value (the kubelet's image="...") are only on
// the entry's last line. What precedes a continuation line's text is
// not the tab klog wrote: on a drover node journalctl's short output
// shows it as spaces (make smoke of cf1d9cb), and other journald
// versions strip a stream line's leading whitespace. So a continuation
// line is told by what it is not: inside an open value, any line but a
// new klog header ("E1205 21:58:32.735070 ...") belongs to the entry,
// and one starting with ">" closes the value.
func lastMatching(out, text string, n int) string {
	var keep [][]string
	open := false // inside a multi-line value of a kept entry
	for _, l := range strings.Split(out, "\n") {
		_, msg, _ := strings.Cut(l, "]: ")
		msg = strings.TrimLeft(msg, " \t")
		switch {
		case open && !klogHeader.MatchString(msg):
			keep[len(keep)-1] = append(keep[len(keep)-1], l)
			// A value closes with ">", after which the next key may
			// open another.
			if strings.HasPrefix(msg, ">") {
				open = strings.HasSuffix(l, "=<")
			}
		case strings.Contains(l, text):
			keep = append(keep, []string{l})
			open = strings.HasSuffix(l, "=<")
		default:
			open = false
		}
	}
	if len(keep) > n {
		keep = keep[len(keep)-n:]
	}
	var lines []string
	for _, e := range keep {
		lines = append(lines, e...)
	}
	return strings.Join(lines, "\n")
}

// klogHeader is the start of a klog entry: severity, date, time.
var klogHeader = regexp.MustCompile(`^[IWEF][0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]+ `)

// postJournal sends the node's journal of this boot (journald keeps it in
// /run on a drover node) and the files in /run/drover (the agent's and
// the credential provider's status) to url, each as one POST.
func postJournal(url string) (map[string]any, error) {
	res := map[string]any{}
	journal, err := hostCommand("/usr/bin/journalctl", "-b", "-o", "export", "--no-pager")
	if err != nil {
		return res, err
	}
	bodies := map[string]string{"journal": journal}
	ents, err := os.ReadDir(filepath.Join(hostRoot, "run", "drover"))
	if err != nil {
		return res, err
	}
	for _, e := range ents {
		if e.Type().IsRegular() {
			b, err := os.ReadFile(filepath.Join(hostRoot, "run", "drover", e.Name()))
			if err != nil {
				return res, err
			}
			bodies["/run/drover/"+e.Name()] = string(b)
		}
	}
	c := &http.Client{Timeout: 60 * time.Second}
	for name, body := range bodies {
		resp, err := c.Post(url+"?name="+name, "application/octet-stream", strings.NewReader(body))
		if err != nil {
			return res, err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			return res, fmt.Errorf("POST %s: %s", name, resp.Status)
		}
		res[name] = len(body)
	}
	return res, nil
}
