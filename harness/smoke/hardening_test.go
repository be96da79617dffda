package smoke

import (
	"strings"
	"testing"
)

// good is what a hardened node reports: the kubelet on :10250, resolved's
// stub on loopback, networkd's DHCP lease socket.
func good() *ProbeResult {
	return &ProbeResult{
		Sockets: []Socket{
			{Proto: "tcp6", Local: "[::]:10250", Inode: 1, PID: 900, Process: "kubelet"},
			{Proto: "tcp", Local: "127.0.0.1:10248", Inode: 2, PID: 900, Process: "kubelet"},
			{Proto: "tcp", Local: "127.0.0.53:53", Inode: 3, PID: 300, Process: "systemd-resolve"},
			{Proto: "udp", Local: "127.0.0.53:53", Inode: 4, PID: 300, Process: "systemd-resolve"},
			{Proto: "udp", Local: "100.64.0.15:68", Inode: 5, PID: 250, Process: "systemd-network"},
			{Proto: "tcp6", Local: "[::1]:8080", Inode: 6, PID: 901, Process: "containerd"},
		},
		SocketFiles: []string{"/proc/net/tcp", "/proc/net/tcp6", "/proc/net/udp", "/proc/net/udp6"},
		RootRO:      true, UsrRO: true, EtcVisible: true, VarSource: "/dev/vda4",
	}
}

func TestHardeningRules(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(r *ProbeResult)
		want   string // "" = passes
	}{
		{"hardened node", func(*ProbeResult) {}, ""},
		{"kubelet on an IPv4 wildcard", func(r *ProbeResult) { r.Sockets[0].Proto, r.Sockets[0].Local = "tcp", "0.0.0.0:10250" }, ""},
		{"empty socket list", func(r *ProbeResult) { r.Sockets = nil }, "no kubelet listening on a non-loopback :10250 (0 sockets reported)"},
		{"kubelet only on loopback", func(r *ProbeResult) { r.Sockets[0].Local = "[::1]:10250" }, "no kubelet listening"},
		{"10250 held by another process", func(r *ProbeResult) { r.Sockets[0].Process = "nc" },
			"listens on tcp6 [::]:10250 (pid 900 nc)"},
		{"extra TCP listener, named with its owner", func(r *ProbeResult) {
			r.Sockets = append(r.Sockets, Socket{Proto: "tcp", Local: "0.0.0.0:22", Inode: 7, PID: 812, Process: "sshd"})
		}, "listens on tcp 0.0.0.0:22 (pid 812 sshd)"},
		{"listener on the node address", func(r *ProbeResult) {
			r.Sockets = append(r.Sockets, Socket{Proto: "tcp", Local: "100.64.0.15:10010", Inode: 8, PID: 901, Process: "containerd"})
		}, "listens on tcp 100.64.0.15:10010 (pid 901 containerd)"},
		{"UDP socket on a wildcard", func(r *ProbeResult) {
			r.Sockets = append(r.Sockets, Socket{Proto: "udp6", Local: "[::]:5353", Inode: 9, PID: 300, Process: "systemd-resolve"})
		}, "receives on udp6 [::]:5353 (pid 300 systemd-resolve)"},
		{"LLMNR on UDP", func(r *ProbeResult) {
			r.Sockets = append(r.Sockets, Socket{Proto: "udp", Local: "0.0.0.0:5355", Inode: 10, PID: 300, Process: "systemd-resolve"})
		}, "receives on udp 0.0.0.0:5355"},
		{"port 68 held by something other than networkd", func(r *ProbeResult) { r.Sockets[4].Process = "dhclient" },
			"receives on udp 100.64.0.15:68 (pid 250 dhclient)"},
		{"timesyncd's SNTP client socket", func(r *ProbeResult) {
			r.Sockets = append(r.Sockets, Socket{Proto: "udp", Local: "0.0.0.0:41234", Inode: 11, PID: 410, Process: "systemd-timesyn"})
		}, ""},
		{"timesyncd serving NTP", func(r *ProbeResult) {
			r.Sockets = append(r.Sockets, Socket{Proto: "udp", Local: "0.0.0.0:123", Inode: 12, PID: 410, Process: "systemd-timesyn"})
		}, "receives on udp 0.0.0.0:123 (pid 410 systemd-timesyn)"},
		{"ephemeral UDP socket of another process", func(r *ProbeResult) {
			r.Sockets = append(r.Sockets, Socket{Proto: "udp", Local: "0.0.0.0:41234", Inode: 13, PID: 411, Process: "chronyd"})
		}, "receives on udp 0.0.0.0:41234 (pid 411 chronyd)"},
		{"offender without an owner", func(r *ProbeResult) {
			r.Sockets = append(r.Sockets, Socket{Proto: "tcp", Local: "0.0.0.0:111", Inode: 4242})
		}, "listens on tcp 0.0.0.0:111 (no process holds socket inode 4242)"},
		{"a socket table unread", func(r *ProbeResult) { r.SocketFiles = r.SocketFiles[:3] },
			"/proc/net/udp6 was not read: the socket list is incomplete"},
		{"probe error", func(r *ProbeResult) { r.Errors = []string{"open /proc/1/mountinfo: permission denied"} },
			"probe: open /proc/1/mountinfo: permission denied"},
		{"sshd", func(r *ProbeResult) { r.SSHD = true }, "sshd present"},
		{"writable /", func(r *ProbeResult) { r.RootRO = false }, "/ is writable"},
		{"writable /usr", func(r *ProbeResult) { r.UsrRO = false }, "/usr is writable"},
		{"bootstrap kubeconfig left", func(r *ProbeResult) { r.Bootstrap = true }, "bootstrap kubeconfig still present"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := good()
			tc.break_(r)
			err := r.Hardening()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Hardening() = %v, want pass", err)
			case tc.want != "" && err == nil:
				t.Errorf("Hardening() passed, want %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("Hardening() = %v, want it to say %q", err, tc.want)
			}
		})
	}
}

func TestParseProbe(t *testing.T) {
	msg := `{"sockets":[{"proto":"tcp6","local":"[::]:10250","inode":1,"pid":900,"process":"kubelet"}],` +
		`"socketFiles":["/proc/net/tcp","/proc/net/tcp6","/proc/net/udp","/proc/net/udp6"],` +
		`"sshd":false,"rootReadOnly":true,"usrReadOnly":true,"bootstrapKubeconfig":false,"etcVisible":true,` +
		`"etcEdit":null,"varSource":"/dev/nvme0n1p4"}`
	r, err := ParseProbe(msg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Hardening(); err != nil {
		t.Errorf("Hardening() = %v", err)
	}
	if r.Sockets[0].Process != "kubelet" || r.VarSource != "/dev/nvme0n1p4" || r.EtcEdit != nil {
		t.Errorf("parsed %+v", r)
	}
	if _, err := ParseProbe("panic: runtime error"); err == nil {
		t.Error("a non-JSON termination message parsed")
	}
}

func TestEtcEditGone(t *testing.T) {
	edit := "drover smoke edit 1"
	for _, tc := range []struct {
		name string
		r    ProbeResult
		want string
	}{
		{"gone", ProbeResult{EtcVisible: true}, ""},
		{"survived", ProbeResult{EtcVisible: true, EtcEdit: &edit}, `survived the reboot: /etc/drover-smoke-edit holds "drover smoke edit 1"`},
		{"/etc not visible", ProbeResult{}, "could not read the node's /etc/os-release"},
		{"probe error", ProbeResult{EtcVisible: true, Errors: []string{"read /proc/1/root/etc/drover-smoke-edit: EIO"}}, "probe: read"},
	} {
		err := tc.r.EtcEditGone()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: EtcEditGone() = %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestEtcEdited(t *testing.T) {
	for _, tc := range []struct{ msg, want string }{
		{`{"edited":true,"readBack":"mark-1"}`, ""},
		{`{"edited":false,"readBack":"","error":"open /host-etc/drover-smoke-edit: read-only file system"}`, "the /etc edit failed: open /host-etc"},
		{`{"edited":true,"readBack":"mark-0"}`, `read back "mark-0", want "mark-1"`},
		{`{"edited":true}`, `read back "", want "mark-1"`},
		{`not json`, "edit-etc report"},
	} {
		err := EtcEdited(tc.msg, "mark-1")
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("EtcEdited(%s) = %v, want %q", tc.msg, err, tc.want)
		}
	}
}

func TestDiskBus(t *testing.T) {
	for _, tc := range []struct {
		src  string
		nvme bool
		ok   bool
	}{
		{"/dev/vda4", false, true},
		{"/dev/nvme0n1p4", true, true},
		{"/dev/vda4", true, false},
		{"/dev/nvme0n1p4", false, false},
		{"", false, false},
		{"/dev/sda4", false, false},
	} {
		if err := DiskBus(tc.src, tc.nvme); (err == nil) != tc.ok {
			t.Errorf("DiskBus(%q, nvme=%v) = %v, want ok=%v", tc.src, tc.nvme, err, tc.ok)
		}
	}
}
