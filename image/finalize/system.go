package finalize

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/drover-os/drover/image/tree"
)

// alternatives points the commands Debian manages with update-alternatives
// at one implementation, with direct symlinks (there is no
// /var/lib/dpkg/alternatives on a node to manage them with).
type alternatives struct{}

func (alternatives) String() string { return "alternatives" }
func (alternatives) Why() string {
	return "postinst would run update-alternatives; iptables must use the nft backend, awk one implementation"
}

// altTable: link -> candidate targets, first present wins.
var altTable = []struct {
	link    string
	targets []string
}{
	{"/usr/bin/awk", []string{"/usr/bin/mawk", "/usr/bin/gawk", "/usr/bin/original-awk"}},
	{"/usr/sbin/iptables", []string{"/usr/sbin/iptables-nft"}},
	{"/usr/sbin/iptables-save", []string{"/usr/sbin/iptables-nft-save"}},
	{"/usr/sbin/iptables-restore", []string{"/usr/sbin/iptables-nft-restore"}},
	{"/usr/sbin/ip6tables", []string{"/usr/sbin/ip6tables-nft"}},
	{"/usr/sbin/ip6tables-save", []string{"/usr/sbin/ip6tables-nft-save"}},
	{"/usr/sbin/ip6tables-restore", []string{"/usr/sbin/ip6tables-nft-restore"}},
	{"/usr/sbin/ebtables", []string{"/usr/sbin/ebtables-nft"}},
	{"/usr/sbin/arptables", []string{"/usr/sbin/arptables-nft"}},
}

func (alternatives) Run(t *tree.Tree, env *Env) error {
	for _, a := range altTable {
		if n := t.Get(a.link); n != nil && n.Kind != tree.Symlink {
			continue // a real file: nothing to choose
		}
		for _, target := range a.targets {
			if t.Get(target) != nil {
				if err := t.Set(symlink(a.link, target)); err != nil {
					return err
				}
				break
			}
		}
	}
	return nil
}

// caBundle concatenates the certificates ca-certificates ships into
// /etc/ssl/certs/ca-certificates.crt, as update-ca-certificates would. Go
// programs (containerd, kubelet, the agent) read only the bundle, so the
// OpenSSL hash symlinks are not made.
type caBundle struct{}

func (caBundle) String() string { return "ca-bundle" }
func (caBundle) Why() string {
	return "update-ca-certificates would build the bundle that TLS clients read"
}

func (caBundle) Run(t *tree.Tree, env *Env) error {
	certs := t.Glob("/usr/share/ca-certificates/*/*.crt")
	if len(certs) == 0 {
		return nil
	}
	var b bytes.Buffer
	for _, p := range certs {
		data := t.Get(p).Data
		b.Write(data)
		if !bytes.HasSuffix(data, []byte("\n")) {
			b.WriteByte('\n')
		}
	}
	return t.Set(file("/etc/ssl/certs/ca-certificates.crt", 0o644, b.String()))
}

// osRelease stamps the image's identity into os-release, so a node (and
// `hostnamectl`, the kubelet's node info) says which drover image it runs.
type osRelease struct{}

func (osRelease) String() string { return "os-release" }
func (osRelease) Why() string {
	return "identify the image on the node: IMAGE_ID, IMAGE_VERSION, BUILD_ID"
}

func (osRelease) Run(t *tree.Tree, env *Env) error {
	base := ""
	if n := t.Get("/usr/lib/os-release"); n != nil && n.Kind == tree.Regular {
		base = string(n.Data)
	}
	var out strings.Builder
	for _, line := range strings.Split(base, "\n") {
		k, _, _ := strings.Cut(line, "=")
		switch k {
		case "", "PRETTY_NAME", "IMAGE_ID", "IMAGE_VERSION", "BUILD_ID", "VARIANT", "VARIANT_ID", "DROVER_SOURCE":
			continue
		}
		out.WriteString(line + "\n")
	}
	fmt.Fprintf(&out, "PRETTY_NAME=\"drover %s %s (Debian based)\"\nVARIANT=\"drover\"\nVARIANT_ID=drover\nIMAGE_ID=%s\nIMAGE_VERSION=%s\nBUILD_ID=%s\n",
		env.Name, env.Version, env.Name, env.Version, env.BuildID)
	if env.Source != "" {
		// A node built from a modified checkout says so: its agent and init
		// are not those of any commit.
		fmt.Fprintf(&out, "DROVER_SOURCE=%q\n", env.Source)
	}
	if err := t.Set(file("/usr/lib/os-release", 0o644, out.String())); err != nil {
		return err
	}
	return t.Set(symlink("/etc/os-release", "../usr/lib/os-release"))
}

// machineID leaves /etc/machine-id empty: an image must not carry an
// identity. drover-init fills it on every boot from the copy kept in /var.
type machineID struct{}

func (machineID) String() string { return "machine-id" }
func (machineID) Why() string {
	return "an image carries no identity; drover-init keeps one per instance in /var"
}
func (machineID) Run(t *tree.Tree, env *Env) error {
	return t.Set(file("/etc/machine-id", 0o444, ""))
}

// fstab documents that drover-init mounts everything; systemd must not try
// to remount / read-write.
type fstab struct{}

func (fstab) String() string { return "fstab" }
func (fstab) Why() string {
	return "drover-init mounts /, /var and /etc; nothing for systemd to mount from fstab"
}
func (fstab) Run(t *tree.Tree, env *Env) error {
	return t.Set(file("/etc/fstab", 0o644, "# drover: / is a read-only dm-verity erofs, /var the persistent var partition and\n# /etc a tmpfs overlay, all mounted by drover-init before systemd starts.\n"))
}

// strip removes what a node never reads: documentation (the copyright files
// stay), man and info pages, locales, lintian and bug-reporting data, and
// the kernel and initrd in /boot (they live on the ESP).
type strip struct{}

func (strip) String() string { return "strip" }
func (strip) Why() string {
	return "smaller image, smaller attack surface: docs, man pages, locales and /boot are not used on a node"
}

func (strip) Run(t *tree.Tree, env *Env) error {
	for _, p := range t.Glob("/usr/share/doc/*/*") {
		if !strings.HasSuffix(p, "/copyright") {
			t.Remove(p)
		}
	}
	for _, p := range []string{"/usr/share/man", "/usr/share/info", "/usr/share/locale", "/usr/share/lintian",
		"/usr/share/bug", "/usr/share/doc-base", "/usr/share/gtk-doc", "/usr/share/help", "/usr/share/initramfs-tools",
		"/etc/initramfs-tools", "/usr/share/bash-completion", "/usr/share/zsh"} {
		t.Remove(p)
	}
	for _, p := range t.Glob("/boot/*") {
		t.Remove(p)
	}
	return nil
}

// emptyVar empties /var, /tmp and /run in the image: they are mount points
// (the persistent var partition, tmpfs). Anything a package shipped there
// would be hidden anyway and is recreated by systemd-tmpfiles.
type emptyVar struct{}

func (emptyVar) String() string { return "mount-points" }
func (emptyVar) Why() string {
	return "/var, /tmp, /run, /proc, /sys, /dev are mount points; package content under them would be hidden"
}

func (emptyVar) Run(t *tree.Tree, env *Env) error {
	for _, d := range []string{"/var", "/tmp", "/run", "/proc", "/sys", "/dev"} {
		t.Remove(d)
	}
	for _, n := range []*tree.Node{dir("/var", 0o755), dir("/tmp", 0o1777), dir("/run", 0o755), dir("/proc", 0o555),
		dir("/sys", 0o555), dir("/dev", 0o755), dir("/root", 0o700), dir("/sysroot", 0o755)} {
		if err := t.Set(n); err != nil {
			return err
		}
	}
	return nil
}

// networkFiles writes what the installer and postinst scripts would leave
// in /etc for name resolution: /etc/hosts (containerd copies it into every
// pod sandbox and fails without it), nsswitch.conf from libc-bin's
// template, and /etc/resolv.conf pointing at systemd-resolved's stub when
// the image has resolved (its postinst would make that link).
type networkFiles struct{}

func (networkFiles) String() string { return "network-files" }
func (networkFiles) Why() string {
	return "the installer writes /etc/hosts, libc-bin's postinst nsswitch.conf, resolved's postinst the resolv.conf link"
}

func (networkFiles) Run(t *tree.Tree, env *Env) error {
	if t.Get("/etc/hosts") == nil {
		if err := t.Set(file("/etc/hosts", 0o644, "127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\nff02::1\t\tip6-allnodes\nff02::2\t\tip6-allrouters\n")); err != nil {
			return err
		}
	}
	if n := t.Get("/usr/share/libc-bin/nsswitch.conf"); n != nil && t.Get("/etc/nsswitch.conf") == nil {
		if err := t.Set(file("/etc/nsswitch.conf", 0o644, string(n.Data))); err != nil {
			return err
		}
	}
	if t.Get("/usr/lib/systemd/systemd-resolved") != nil {
		return t.Set(symlink("/etc/resolv.conf", "../run/systemd/resolve/stub-resolv.conf"))
	}
	return nil
}
