package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Tables as the kernel prints them (trimmed to the fields the probe reads).
const (
	tcpTable = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:2818 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 21373 1 0000000000000000 100 0 0 10 0
   1: 0F004064:A3C2 02004064:1A0B 01 00000000:00000000 02:00000A9F 00000000     0        0 22814 2 0000000000000000 20 4 30 10 -1
   2: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 30001 1 0000000000000000 100 0 0 10 0
`
	tcp6Table = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:280A 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 24000 1 0000000000000000 100 0 0 10 0
`
	udpTable = `   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
  100: 3500007F:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000   991        0 19010 2 0000000000000000 0
  101: 0F004064:0044 00000000:0000 07 00000000:00000000 00:00000000 00000000   998        0 20001 2 0000000000000000 0
  102: 0F004064:D431 0A000064:007B 01 00000000:00000000 00:00000000 00000000   997        0 20002 2 0000000000000000 0
`
)

func TestParseNet(t *testing.T) {
	for _, tc := range []struct {
		proto, table string
		want         []socket
	}{
		{"tcp", tcpTable, []socket{ // the established connection is left out
			{Proto: "tcp", Local: "0.0.0.0:22", Inode: 30001},
			{Proto: "tcp", Local: "127.0.0.1:10264", Inode: 21373},
		}},
		{"tcp6", tcp6Table, []socket{{Proto: "tcp6", Local: "[::]:10250", Inode: 24000}}},
		{"udp", udpTable, []socket{ // the socket connected to an NTP server is left out
			{Proto: "udp", Local: "100.64.0.15:68", Inode: 20001},
			{Proto: "udp", Local: "127.0.0.53:53", Inode: 19010},
		}},
	} {
		got, err := parseNet(tc.proto, []byte(tc.table))
		if err != nil {
			t.Fatalf("%s: %v", tc.proto, err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.proto, got, tc.want)
		}
	}
}

func TestParseNetRejectsGarbage(t *testing.T) {
	for name, table := range map[string]string{
		"no header":     "   0: 0100007F:2818 00000000:0000 0A 0 0 0 0 0 21373\n",
		"short line":    "  sl  local_address\n   0: 0100007F:2818 00000000:0000 0A\n",
		"bad address":   "  sl  local_address\n   0: 01007F:2818 00000000:0000 0A 0 0 0 0 0 21373\n",
		"bad inode":     "  sl  local_address\n   0: 0100007F:2818 00000000:0000 0A 0 0 0 0 0 x\n",
		"empty content": "",
	} {
		if _, err := parseNet("tcp", []byte(table)); err == nil {
			t.Errorf("%s: parsed without error", name)
		}
	}
}

func TestSocketOwners(t *testing.T) {
	proc := t.TempDir()
	for pid, links := range map[string][]string{
		"1":   {"socket:[100]", "/dev/null"},
		"42":  {"socket:[200]", "socket:[100]", "pipe:[7]"},
		"700": {"socket:[300]"},
	} {
		dir := filepath.Join(proc, pid, "fd")
		os.MkdirAll(dir, 0o755)
		for i, l := range links {
			if err := os.Symlink(l, filepath.Join(dir, string(rune('3'+i)))); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := socketOwners(proc)
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64]int{100: 1, 200: 42, 300: 700}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("owners %v, want %v", got, want)
	}
	if _, err := socketOwners(t.TempDir()); err == nil {
		t.Error("an empty /proc gave no error: the probe would report sockets without owners")
	}
}

func TestMounts(t *testing.T) {
	mi := []byte(`22 1 254:0 / / ro,relatime shared:1 - erofs /dev/mapper/root ro
23 22 0:21 / /etc rw,relatime shared:2 - overlay overlay rw,lowerdir=/etc
24 22 259:4 / /var rw,relatime shared:3 - ext4 /dev/nvme0n1p4 rw
25 24 0:30 / /var/lib/kubelet/pods/x rw - tmpfs tmpfs rw
`)
	if ro, ok := mountRO(mi, "/usr"); !ro || !ok {
		t.Errorf("/usr: ro=%v found=%v, want read-only (on /)", ro, ok)
	}
	if ro, _ := mountRO(mi, "/etc/kubernetes"); ro {
		t.Error("/etc/kubernetes: read-only, want the rw /etc overlay")
	}
	if got := mountSource(mi, "/var"); got != "/dev/nvme0n1p4" {
		t.Errorf("source of /var = %q, want /dev/nvme0n1p4", got)
	}
	if got := mountSource(mi, "/srv"); got != "" {
		t.Errorf("source of /srv = %q, want none", got)
	}
}

// TestLastMatching: an entry the kubelet wrote with a multi-line value
// (klog's key=<, tab-indented lines, " >") is kept whole, so the keys
// after the value reach the judge; the lines of other entries are not.
func TestLastMatching(t *testing.T) {
	j := "[ 1.0] n kubelet[7]: I1205 00:00:01.0 7 a.go:1] \"Started\"\n" +
		"[ 2.0] n kubelet[7]: E1205 00:00:02.0 7 plugin.go:418] \"Failed to provide credentials for image\" err=<\n" +
		"[ 2.0] n kubelet[7]: \texit status 1: no RAM role (first)\n" +
		"[ 2.0] n kubelet[7]:  > provider=\"acr\" image=\"r/one\"\n" +
		"[ 3.0] n kubelet[7]: I1205 00:00:03.0 7 a.go:1] \"Other\"\n" +
		"[ 4.0] n kubelet[7]: E1205 00:00:04.0 7 plugin.go:418] \"Failed to provide credentials for image\" err=<\n" +
		"[ 4.0] n kubelet[7]: \texit status 1: no RAM role (second)\n" +
		"[ 4.0] n kubelet[7]:  > provider=\"acr\" image=\"r/two\"\n" +
		"[ 5.0] n kubelet[7]: \tnot a continuation of anything kept"
	got := lastMatching(j, "Failed to provide credentials for image", 1)
	want := "[ 4.0] n kubelet[7]: E1205 00:00:04.0 7 plugin.go:418] \"Failed to provide credentials for image\" err=<\n" +
		"[ 4.0] n kubelet[7]: \texit status 1: no RAM role (second)\n" +
		"[ 4.0] n kubelet[7]:  > provider=\"acr\" image=\"r/two\""
	if got != want {
		t.Errorf("last entry:\n%s\nwant:\n%s", got, want)
	}
	if got := lastMatching(j, "Failed to provide credentials for image", 3); !strings.Contains(got, "r/one") || strings.Contains(got, "Other") || strings.Contains(got, "Started") {
		t.Errorf("both entries and nothing else:\n%s", got)
	}
	// The tab does not survive: a drover node's journalctl shows it as
	// spaces (make smoke of cf1d9cb), and journald versions that strip a
	// stream line's leading whitespace leave nothing.
	stripped := "[ 569.7] n kubelet[3672]: E1205 21:58:32.735070    3672 plugin.go:418] \"Failed to provide credentials for image\" err=<\n" +
		"[ 569.7] n kubelet[3672]:         error running credential provider plugin: exit status 1\n" +
		"[ 569.7] n kubelet[3672]: the instance has no RAM role attached\n" +
		"[ 569.7] n kubelet[3672]: > provider=\"acr\" image=\"r/one\"\n" +
		"[ 570.1] n kubelet[3672]: I1205 21:58:33.0 3672 a.go:1] \"Other\"\n" +
		"[ 570.2] n kubelet[3672]: not kept"
	got = lastMatching(stripped, "Failed to provide credentials for image", 3)
	if want := strings.Join(strings.Split(stripped, "\n")[:4], "\n"); got != want {
		t.Errorf("entry with stripped continuation lines:\n%s\nwant:\n%s", got, want)
	}
}

func TestCISHelpers(t *testing.T) {
	got := flagValues([]string{"/usr/bin/kubelet", "--config=/etc/k.yaml", "--cert-dir", "/var/lib/kubelet/pki", "-v=2"})
	if got["config"] != "/etc/k.yaml" || got["cert-dir"] != "/var/lib/kubelet/pki" || got["v"] != "2" {
		t.Errorf("flagValues: %v", got)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), nil, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "f"), os.ModeSetgid|0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("f", filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	if f := statFile(dir, "/l"); f.Mode != 0o2640 || f.Link != "f" || f.Missing || f.UID != uint32(os.Getuid()) {
		t.Errorf("statFile: %+v", f)
	}
	if f := statFile(dir, "/none"); !f.Missing {
		t.Errorf("statFile of a missing file: %+v", f)
	}
}
