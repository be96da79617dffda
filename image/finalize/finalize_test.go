package finalize

import (
	"debug/elf"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/image/ldcache"
	"github.com/drover-os/drover/image/tree"
)

func sampleTree(t *testing.T) *tree.Tree {
	tr := tree.New()
	add := func(n *tree.Node) {
		if err := tr.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	add(&tree.Node{Path: "/usr/lib/sysusers.d/systemd.conf", Kind: tree.Regular, Mode: 0o644, Owner: "systemd", Data: []byte(
		"# comment\ng systemd-journal 999\nu systemd-network - \"systemd Network Management\"\nu systemd-resolve - \"systemd Resolver\"\ng input -\nm systemd-network input\n")})
	add(&tree.Node{Path: "/usr/lib/systemd/system/systemd-networkd.service", Kind: tree.Regular, Mode: 0o644, Owner: "systemd",
		Data: []byte("[Unit]\nDescription=x\n[Install]\nWantedBy=multi-user.target\nAlso=systemd-networkd.socket\nAlias=dbus-org.freedesktop.network1.service\n")})
	add(&tree.Node{Path: "/usr/lib/systemd/system/systemd-networkd.socket", Kind: tree.Regular, Mode: 0o644, Owner: "systemd",
		Data: []byte("[Install]\nWantedBy=sockets.target\n")})
	add(&tree.Node{Path: "/usr/lib/systemd/system/static.service", Kind: tree.Regular, Mode: 0o644, Owner: "x", Data: []byte("[Unit]\n")})
	add(&tree.Node{Path: "/usr/bin/mawk", Kind: tree.Regular, Mode: 0o755, Owner: "mawk"})
	add(&tree.Node{Path: "/usr/sbin/iptables-nft", Kind: tree.Symlink, Target: "xtables-nft-multi", Owner: "iptables"})
	add(&tree.Node{Path: "/usr/share/ca-certificates/mozilla/A.crt", Kind: tree.Regular, Mode: 0o644, Owner: "ca", Data: []byte("A")})
	add(&tree.Node{Path: "/usr/share/ca-certificates/mozilla/B.crt", Kind: tree.Regular, Mode: 0o644, Owner: "ca", Data: []byte("B\n")})
	add(&tree.Node{Path: "/usr/lib/os-release", Kind: tree.Regular, Mode: 0o644, Owner: "base-files", Data: []byte("PRETTY_NAME=\"Debian GNU/Linux 13 (trixie)\"\nNAME=\"Debian GNU/Linux\"\nID=debian\n")})
	add(&tree.Node{Path: "/usr/share/doc/mawk/copyright", Kind: tree.Regular, Mode: 0o644, Owner: "mawk"})
	add(&tree.Node{Path: "/usr/share/doc/mawk/changelog.gz", Kind: tree.Regular, Mode: 0o644, Owner: "mawk"})
	add(&tree.Node{Path: "/usr/share/man/man1/mawk.1.gz", Kind: tree.Regular, Mode: 0o644, Owner: "mawk"})
	add(&tree.Node{Path: "/var/lib/dpkg/status", Kind: tree.Regular, Mode: 0o644, Owner: "x"})
	add(&tree.Node{Path: "/boot/vmlinuz-6.12", Kind: tree.Regular, Mode: 0o644, Owner: "linux"})
	add(&tree.Node{Path: "/usr/lib/x86_64-linux-gnu/libc.so.6", Kind: tree.Regular, Mode: 0o755, Owner: "libc6",
		Data: ldcache.FakeLibrary(elf.EM_X86_64, elf.ET_DYN, "libc.so.6")})
	add(&tree.Node{Path: "/usr/lib/udev/hwdb.d/20-pci-vendor-model.hwdb", Kind: tree.Regular, Mode: 0o644, Owner: "udev"})
	add(&tree.Node{Path: "/usr/lib/systemd/catalog/systemd.catalog", Kind: tree.Regular, Mode: 0o644, Owner: "systemd"})
	return tr
}

func env() *Env {
	return &Env{Name: "minimal", Version: "20261121", BuildID: "abc123", Epoch: time.Unix(1795252544, 0), Arch: "amd64",
		Enable: []string{"systemd-networkd.service"}, Mask: []string{"getty@.service"}}
}

func TestFinalize(t *testing.T) {
	tr := sampleTree(t)
	if err := Run(tr, env(), Steps()); err != nil {
		t.Fatal(err)
	}
	check := func(path, want string) {
		t.Helper()
		n := tr.Get(path)
		if n == nil {
			t.Errorf("%s missing", path)
			return
		}
		got := string(n.Data)
		if n.Kind == tree.Symlink {
			got = "-> " + n.Target
		}
		if got != want {
			t.Errorf("%s:\n got %q\nwant %q", path, got, want)
		}
	}
	check("/etc/passwd", "root:x:0:0:root:/root:/bin/sh\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\nbin:x:2:2:bin:/bin:/usr/sbin/nologin\nsys:x:3:3:sys:/dev:/usr/sbin/nologin\n"+
		"systemd-resolve:x:996:996:systemd Resolver:/:/usr/sbin/nologin\nsystemd-network:x:997:997:systemd Network Management:/:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
	if g := string(tr.Get("/etc/group").Data); !strings.Contains(g, "systemd-journal:x:999:\n") || !strings.Contains(g, "input:x:998:systemd-network\n") {
		t.Errorf("group:\n%s", g)
	}
	if s := string(tr.Get("/etc/shadow").Data); !strings.HasPrefix(s, "root:*:") || tr.Get("/etc/shadow").Mode != 0o640 {
		t.Errorf("root must be locked:\n%s", s)
	}
	check("/etc/systemd/system/multi-user.target.wants/systemd-networkd.service", "-> /usr/lib/systemd/system/systemd-networkd.service")
	check("/etc/systemd/system/sockets.target.wants/systemd-networkd.socket", "-> /usr/lib/systemd/system/systemd-networkd.socket")
	check("/etc/systemd/system/dbus-org.freedesktop.network1.service", "-> /usr/lib/systemd/system/systemd-networkd.service")
	check("/etc/systemd/system/getty@.service", "-> /dev/null")
	check("/etc/systemd/system/default.target", "-> /usr/lib/systemd/system/multi-user.target")
	check("/usr/bin/awk", "-> /usr/bin/mawk")
	check("/usr/sbin/iptables", "-> /usr/sbin/iptables-nft")
	check("/etc/ssl/certs/ca-certificates.crt", "A\nB\n")
	check("/etc/machine-id", "")
	check("/usr/lib/os-release", "NAME=\"Debian GNU/Linux\"\nID=debian\nPRETTY_NAME=\"drover minimal 20261121 (Debian based)\"\nVARIANT=\"drover\"\nVARIANT_ID=drover\nIMAGE_ID=minimal\nIMAGE_VERSION=20261121\nBUILD_ID=abc123\n")
	check("/etc/.updated", "# This file was created by systemd-update-done. The timestamp below is the\n"+
		"# modification time of /usr/ for which the most recent updates of /etc/ and\n"+
		"# /var/ have been applied. See man:systemd-update-done.service(8) for details.\nTIMESTAMP_NSEC=1795252544000000000\n")
	check("/etc/systemd/system/systemd-hwdb-update.service", "-> /dev/null")
	check("/etc/systemd/system/systemd-journal-catalog-update.service", "-> /dev/null")
	if n := tr.Get("/etc/ld.so.cache"); n == nil {
		t.Error("/etc/ld.so.cache missing")
	} else if c, err := ldcache.Decode(n.Data); err != nil || len(c.Entries) != 1 || c.Entries[0].Path != "/lib/x86_64-linux-gnu/libc.so.6" {
		t.Errorf("/etc/ld.so.cache: %+v, %v", c, err)
	}
	for _, gone := range []string{"/usr/share/doc/mawk/changelog.gz", "/usr/share/man", "/var/lib/dpkg/status", "/boot/vmlinuz-6.12",
		"/usr/lib/udev/hwdb.d", "/usr/lib/systemd/catalog"} {
		if tr.Get(gone) != nil {
			t.Errorf("%s should be stripped", gone)
		}
	}
	if tr.Get("/usr/share/doc/mawk/copyright") == nil || tr.Get("/var") == nil || tr.Get("/tmp").Mode != 0o1777 {
		t.Error("copyright files and mount points must stay")
	}
}

func TestFinalizeIsDeterministic(t *testing.T) {
	a, b := sampleTree(t), sampleTree(t)
	Run(a, env(), Steps())
	Run(b, env(), Steps())
	for _, p := range a.Paths() {
		if string(a.Get(p).Data) != string(b.Get(p).Data) {
			t.Fatalf("%s differs between runs", p)
		}
	}
}

func TestEnableErrors(t *testing.T) {
	for _, tc := range []struct{ unit, want string }{
		{"sshd.service", "finalize step units: unit sshd.service to enable is in no package of the image (looked in /etc/systemd/system, /usr/lib/systemd/system): add the package that ships it, or remove it from units.enable"},
		{"static.service", "finalize step units: unit static.service has no [Install] section: it is static and cannot be enabled; remove it from units.enable"},
	} {
		e := env()
		e.Enable = []string{tc.unit}
		err := Run(sampleTree(t), e, Steps())
		if err == nil || err.Error() != tc.want {
			t.Errorf("got %v\nwant %s", err, tc.want)
		}
	}
}
