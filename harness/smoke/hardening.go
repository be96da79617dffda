package smoke

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path"
	"strconv"
	"strings"
)

// Socket is a TCP listener or unconnected UDP socket the probe found on the
// node, with the process holding it (PID 0: none found).
type Socket struct {
	Proto   string `json:"proto"` // tcp, tcp6, udp, udp6
	Local   string `json:"local"` // ip:port
	Inode   uint64 `json:"inode"`
	PID     int    `json:"pid,omitempty"`
	Process string `json:"process,omitempty"`
}

func (s Socket) String() string {
	owner := fmt.Sprintf("no process holds socket inode %d", s.Inode)
	if s.PID != 0 {
		owner = fmt.Sprintf("pid %d %s", s.PID, s.Process)
	}
	return fmt.Sprintf("%s %s (%s)", s.Proto, s.Local, owner)
}

// ProbeResult is what the probe image (harness/registry/programs/probe)
// reports about the node: facts, judged by Hardening and EtcEditGone.
type ProbeResult struct {
	Sockets     []Socket `json:"sockets"`
	SocketFiles []string `json:"socketFiles"` // the /proc/net tables read
	SSHD        bool     `json:"sshd"`
	RootRO      bool     `json:"rootReadOnly"`
	UsrRO       bool     `json:"usrReadOnly"`
	Bootstrap   bool     `json:"bootstrapKubeconfig"`
	EtcVisible  bool     `json:"etcVisible"` // the node's /etc could be read at all
	EtcEdit     *string  `json:"etcEdit"`    // the /etc edit's content; nil: absent
	VarSource   string   `json:"varSource"`  // device mounted at /var
	Errors      []string `json:"errors,omitempty"`
}

// Probe runs the probe image on the node.
func (e *Env) Probe(ctx context.Context, in *Instance, name string) (*ProbeResult, error) {
	msg, err := e.probe(ctx, in, name, []string{"inspect"})
	if err != nil {
		return nil, err
	}
	return ParseProbe(msg)
}

// ParseProbe reads the probe's termination message.
func ParseProbe(msg string) (*ProbeResult, error) {
	var r ProbeResult
	if err := json.Unmarshal([]byte(msg), &r); err != nil {
		return nil, fmt.Errorf("probe report %q: %w", msg, err)
	}
	return &r, nil
}

// KubeletPort is the kubelet's API port, the one port a node may serve on a
// non-loopback address.
const KubeletPort = 10250

// socketTables are the /proc/net tables the probe must have read: a
// listener list is only evidence if nothing was left unread.
var socketTables = []string{"/proc/net/tcp", "/proc/net/tcp6", "/proc/net/udp", "/proc/net/udp6"}

// allowed says whether a non-loopback socket is one the node needs, and why.
func allowed(s Socket) (bool, string) {
	port := socketPort(s)
	switch {
	case strings.HasPrefix(s.Proto, "tcp") && port == KubeletPort && s.Process == "kubelet":
		return true, "kubelet API"
	// systemd-networkd's DHCP client binds a UDP socket to the leased
	// address, port 68, to renew the lease: a client, not a service.
	// (comm is cut to 15 characters: "systemd-network".)
	case strings.HasPrefix(s.Proto, "udp") && port == 68 && strings.HasPrefix(s.Process, "systemd-network"):
		return true, "DHCP client"
	// systemd-timesyncd's SNTP client binds a socket of the server's
	// family to the wildcard address and port 0 (an ephemeral port) and
	// sends with sendto, so the socket is unconnected; it drops every
	// datagram whose source is not the server it asked, and closes the
	// socket on the first valid reply (src/timesync/timesyncd-manager.c:
	// manager_listen_setup, manager_receive_response, manager_listen_stop).
	// It stays open only while a server is slow or silent. A client, not a
	// service: never port 123.
	case strings.HasPrefix(s.Proto, "udp") && s.Process == "systemd-timesyn" && port >= 1024:
		return true, "SNTP client"
	}
	return false, ""
}

func socketPort(s Socket) int {
	_, p, err := net.SplitHostPort(s.Local)
	if err != nil {
		return -1
	}
	n, _ := strconv.Atoi(p)
	return n
}

func loopback(s Socket) bool {
	h, _, err := net.SplitHostPort(s.Local)
	if err != nil {
		return false
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// Hardening checks a probe result: the probe read every socket table and
// found the kubelet on :10250; nothing else accepts TCP connections or UDP
// datagrams on a non-loopback address (an offender is named with the
// process holding it); no sshd; / and /usr read-only; the bootstrap
// kubeconfig gone.
func (r *ProbeResult) Hardening() error {
	var probs []string
	for _, e := range r.Errors {
		probs = append(probs, "probe: "+e)
	}
	read := map[string]bool{}
	for _, f := range r.SocketFiles {
		read[f] = true
	}
	for _, f := range socketTables {
		if !read[f] {
			probs = append(probs, f+" was not read: the socket list is incomplete")
		}
	}
	kubelet := false
	for _, s := range r.Sockets {
		if loopback(s) {
			continue
		}
		if ok, _ := allowed(s); ok {
			kubelet = kubelet || socketPort(s) == KubeletPort
			continue
		}
		what := "listens on"
		if strings.HasPrefix(s.Proto, "udp") {
			what = "receives on"
		}
		probs = append(probs, what+" "+s.String())
	}
	if !kubelet {
		probs = append(probs, fmt.Sprintf("no kubelet listening on a non-loopback :%d (%d sockets reported)", KubeletPort, len(r.Sockets)))
	}
	if r.SSHD {
		probs = append(probs, "sshd present")
	}
	if !r.RootRO {
		probs = append(probs, "/ is writable")
	}
	if !r.UsrRO {
		probs = append(probs, "/usr is writable")
	}
	if r.Bootstrap {
		probs = append(probs, "bootstrap kubeconfig still present")
	}
	return errIf(probs)
}

// EtcEditGone checks, after a reboot, that the probe could read the node's
// /etc and found no trace of the edit made before the reboot.
func (r *ProbeResult) EtcEditGone() error {
	var probs []string
	for _, e := range r.Errors {
		probs = append(probs, "probe: "+e)
	}
	if !r.EtcVisible {
		probs = append(probs, "the probe could not read the node's /etc/os-release, so an absent edit proves nothing")
	}
	if r.EtcEdit != nil {
		probs = append(probs, fmt.Sprintf("the /etc edit survived the reboot: /etc/drover-smoke-edit holds %q", *r.EtcEdit))
	}
	return errIf(probs)
}

// EtcEdited checks the "probe edit-etc TEXT" termination message: the write
// succeeded and reading the node's /etc back gave TEXT.
func EtcEdited(msg, text string) error {
	var res struct {
		Edited   bool   `json:"edited"`
		ReadBack string `json:"readBack"`
		Error    string `json:"error"`
	}
	if err := json.Unmarshal([]byte(msg), &res); err != nil {
		return fmt.Errorf("edit-etc report %q: %w", msg, err)
	}
	switch {
	case !res.Edited:
		return fmt.Errorf("the /etc edit failed: %s", res.Error)
	case res.ReadBack != text:
		return fmt.Errorf("the /etc edit read back %q, want %q", res.ReadBack, text)
	}
	return nil
}

// DiskBus checks that /var is on the controller the instance was given: an
// NVMe namespace (nvme0n1p4) or a virtio-blk disk (vda4).
func DiskBus(varSource string, nvme bool) error {
	base := path.Base(varSource)
	want, prefix := "virtio-blk", "vd"
	if nvme {
		want, prefix = "NVMe", "nvme"
	}
	if varSource == "" || !strings.HasPrefix(base, prefix) {
		return fmt.Errorf("/var is mounted from %q, want a %s device (/dev/%s…)", varSource, want, prefix)
	}
	return nil
}
