package conformance

import (
	"debug/elf"
	"slices"
	"strings"
	"testing"

	"github.com/drover-os/drover/image/ldcache"
	"github.com/drover-os/drover/image/tree"
)

// glibcFixture is a tree as the locked packages give it, reduced to what
// glibcTree looks at: dash without the sh link, hostname, dig, the
// dynamic linker and libc.so.6, libc-bin's nsswitch.conf.
func glibcFixture(t *testing.T, skip string) *tree.Tree {
	t.Helper()
	tr := tree.New()
	nodes := []*tree.Node{
		{Path: "/usr/bin/dash", Kind: tree.Regular, Mode: 0o755, Data: []byte("\x7fELF dash")},
		{Path: "/usr/bin/hostname", Kind: tree.Regular, Mode: 0o755, Data: []byte("\x7fELF hostname")},
		{Path: "/usr/bin/dig", Kind: tree.Regular, Mode: 0o755, Data: []byte("\x7fELF dig")},
		{Path: "/usr/bin/nc.openbsd", Kind: tree.Regular, Mode: 0o755, Data: []byte("\x7fELF nc")},
		{Path: "/usr/bin/curl", Kind: tree.Regular, Mode: 0o755, Data: []byte("\x7fELF curl")},
		{Path: "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", Kind: tree.Regular, Mode: 0o755, Data: []byte("\x7fELF ld.so")},
		{Path: "/usr/lib64/ld-linux-x86-64.so.2", Kind: tree.Symlink, Target: "../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"},
		{Path: "/usr/lib/x86_64-linux-gnu/libc.so.6", Kind: tree.Regular, Mode: 0o755, Data: ldcache.FakeLibrary(elf.EM_X86_64, elf.ET_DYN, "libc.so.6")},
		{Path: "/usr/share/libc-bin/nsswitch.conf", Kind: tree.Regular, Mode: 0o644, Data: []byte("hosts: files dns\n")},
	}
	for _, n := range nodes {
		if n.Path == skip {
			continue
		}
		n.Owner = "fixture"
		if err := tr.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

// TestGlibcTree: the layer has /bin/sh reaching dash through the
// merged-/usr link, hostname and dig, the dynamic linker at its ELF
// interpreter path, libc-bin's nsswitch.conf at /etc, an ld.so.cache
// naming libc.so.6, /tmp, and root in /etc/passwd; a tree without
// hostname (or the linker) is refused by name.
func TestGlibcTree(t *testing.T) {
	es, err := glibcTree(glibcFixture(t, ""), "amd64")
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]entry{}
	for _, e := range es {
		byPath[e.path] = e
	}
	links := map[string]string{"bin": "usr/bin", "lib64": "usr/lib64", "usr/bin/sh": "dash", "usr/bin/nc": "nc.openbsd"}
	for p, target := range links {
		if e := byPath[p]; e.link != target {
			t.Errorf("%s: link %q, want %q", p, e.link, target)
		}
	}
	for _, p := range []string{"usr/bin/dash", "usr/bin/hostname", "usr/bin/dig"} {
		if e := byPath[p]; e.dir || e.link != "" || len(e.data) == 0 || e.mode != 0o755 {
			t.Errorf("%s: %+v, want an executable file", p, e)
		}
	}
	if e := byPath["etc/nsswitch.conf"]; string(e.data) != "hosts: files dns\n" {
		t.Errorf("/etc/nsswitch.conf = %q, want libc-bin's", e.data)
	}
	c, err := ldcache.Decode(byPath["etc/ld.so.cache"].data)
	if err != nil || !slices.ContainsFunc(c.Entries, func(e ldcache.Entry) bool { return e.Soname == "libc.so.6" }) {
		t.Errorf("ld.so.cache: %+v, %v: no libc.so.6", c, err)
	}
	if e := byPath["tmp"]; !e.dir || e.mode != 0o1777 {
		t.Errorf("/tmp: %+v", e)
	}
	if e := byPath["etc/passwd"]; !strings.HasPrefix(string(e.data), "root:x:0:0:") {
		t.Errorf("/etc/passwd = %q", e.data)
	}
	if _, err := layerTar(es); err != nil {
		t.Errorf("layer: %v", err)
	}

	for _, missing := range []string{"/usr/bin/hostname", "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "/usr/bin/nc.openbsd", "/usr/bin/curl"} {
		if _, err := glibcTree(glibcFixture(t, missing), "amd64"); err == nil || !strings.Contains(err.Error(), "no /usr/") {
			t.Errorf("without %s: %v", missing, err)
		}
	}
	empty := glibcFixture(t, "")
	empty.Get("/usr/bin/hostname").Data = nil
	if _, err := glibcTree(empty, "amd64"); err == nil || !strings.Contains(err.Error(), "no /usr/bin/hostname") {
		t.Errorf("an empty hostname: %v", err)
	}
	tr := glibcFixture(t, "")
	tr.Get("/usr/bin/dig").UID = 100
	if _, err := glibcTree(tr, "amd64"); err == nil || !strings.Contains(err.Error(), "/usr/bin/dig") {
		t.Errorf("a file not owned by root: %v", err)
	}
}

// TestGlibcLock: the embedded lock is the one of glibcPackages (its inputs
// digest), resolved from trixie alone, and holds each package asked for
// and libc6 at a pinned path and sha256; a package set changed without a
// re-lock is refused.
func TestGlibcLock(t *testing.T) {
	l, err := glibcLocked()
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Suites) != 1 || l.Suites[0].Name != "trixie" || l.Suites[0].InRelease == "" {
		t.Errorf("suites %+v, want trixie's pinned InRelease", l.Suites)
	}
	names := map[string]bool{}
	for _, d := range l.Debs {
		names[d.Name] = true
		if d.Suite != "trixie" || len(d.SHA256) != 64 || !strings.HasPrefix(d.Path, "pool/main/") {
			t.Errorf("deb line %+v", d)
		}
	}
	for _, want := range append([]string{"libc6"}, glibcPackages...) {
		if !names[want] {
			t.Errorf("the lock lacks %s", want)
		}
	}
	saved := glibcPackages
	defer func() { glibcPackages = saved }()
	glibcPackages = append(slices.Clone(saved), "less")
	if _, err := glibcLocked(); err == nil || !strings.Contains(err.Error(), "--lock-test-images") {
		t.Errorf("a changed package set: %v", err)
	}
}

// TestParseTags: the tags come from the framework's table, the previous
// agnhost's included; an image built here missing from it is an error
// naming it.
func TestParseTags(t *testing.T) {
	src := `
	configs[AgnhostPrev] = Config{list.PromoterE2eRegistry, "agnhost", "2.55"}
	configs[Agnhost] = Config{list.PromoterE2eRegistry, "agnhost", "2.66.1"}
	configs[BusyBox] = Config{list.PromoterE2eRegistry, "busybox", "1.37.0-2"}
	configs[GlibcDnsTesting] = Config{list.PromoterE2eRegistry, "glibc-dns-testing", "2.1.1"}
	configs[Nonewprivs] = Config{list.PromoterE2eRegistry, "nonewprivs", "1.4"}
	configs[NonRoot] = Config{list.PromoterE2eRegistry, "nonroot", "1.5"}
	configs[Pause] = Config{list.GcRegistry, "pause", "3.10.2"}
`
	tags, err := parseTags("manifest.go", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"GlibcDnsTesting": "2.1.1", "AgnhostPrev": "2.55", "Agnhost": "2.66.1", "Pause": "3.10.2"} {
		if tags[name] != want {
			t.Errorf("%s: %q, want %q", name, tags[name], want)
		}
	}
	noGlibc := strings.Replace(src, "configs[GlibcDnsTesting]", "configs[Other]", 1)
	if _, err := parseTags("manifest.go", []byte(noGlibc)); err == nil || !strings.Contains(err.Error(), "configs[GlibcDnsTesting]") {
		t.Errorf("a table without glibc-dns-testing: %v", err)
	}
}

// TestOverlay: the Debian userland's files replace busybox's of the same
// path, its merged-/usr links do not replace busybox's directories, and
// everything else of both is kept once.
func TestOverlay(t *testing.T) {
	base := []entry{{path: "bin", dir: true}, {path: "bin/sh", link: "busybox"}, {path: "usr/bin", dir: true},
		{path: "usr/bin/nc", link: "/bin/busybox"}, {path: "usr/bin/wget", link: "/bin/busybox"}}
	top := []entry{{path: "bin", link: "usr/bin"}, {path: "lib64", link: "usr/lib64"}, {path: "usr/bin", dir: true, mode: 0o755},
		{path: "usr/bin/nc", data: []byte("openbsd")}, {path: "usr/bin/curl", data: []byte("curl")},
		{path: "usr/bin/sh", link: "dash"}}
	got := map[string]entry{}
	for _, e := range overlay(base, top) {
		if _, dup := got[e.path]; dup {
			t.Errorf("%s twice", e.path)
		}
		got[e.path] = e
	}
	for p, want := range map[string]string{"bin": "dir", "bin/sh": "busybox", "lib64": "usr/lib64", "usr/bin/nc": "openbsd",
		"usr/bin/curl": "curl", "usr/bin/wget": "/bin/busybox", "usr/bin": "dir", "usr/bin/sh": "dash",
		// merged /usr under busybox's /bin: top's programs linked there,
		// busybox's own kept
		"bin/curl": "/usr/bin/curl", "bin/nc": "/usr/bin/nc"} {
		e, ok := got[p]
		g := e.link + string(e.data)
		if e.dir {
			g = "dir"
		}
		if !ok || g != want {
			t.Errorf("%s: %q (present %v), want %q", p, g, ok, want)
		}
	}
	if len(got) != 10 {
		t.Errorf("%d entries, want 10: %v", len(got), got)
	}
	if _, err := layerTar(overlay(base, top)); err != nil {
		t.Error(err)
	}
}

// TestDockerBin: every busybox applet also in /bin, as Docker's busybox
// image has it (a spec runs /bin/sysctl, which Debian puts in /sbin);
// Debian's own paths and /bin's existing entries kept, nothing twice.
func TestDockerBin(t *testing.T) {
	bb := []entry{{path: "bin", dir: true}, {path: "bin/busybox", data: []byte("bb")},
		{path: "bin/sh", link: "/bin/busybox"}, {path: "sbin/sysctl", link: "/bin/busybox"},
		{path: "usr/bin/env", link: "/bin/busybox"}, {path: "etc/passwd", data: []byte("root")}}
	got := map[string]string{}
	for _, e := range dockerBin(bb) {
		if _, dup := got[e.path]; dup {
			t.Errorf("%s twice", e.path)
		}
		got[e.path] = e.link + string(e.data)
	}
	for p, want := range map[string]string{"bin/sysctl": "/bin/busybox", "bin/env": "/bin/busybox", "sbin/sysctl": "/bin/busybox",
		"usr/bin/env": "/bin/busybox", "bin/sh": "/bin/busybox", "bin/busybox": "bb", "etc/passwd": "root"} {
		if got[p] != want {
			t.Errorf("%s: %q, want %q", p, got[p], want)
		}
	}
	if len(got) != 8 {
		t.Errorf("%d entries, want 8: %v", len(got), got)
	}
	if len(bb) != 6 {
		t.Errorf("dockerBin changed its argument: %d entries", len(bb))
	}
	if _, err := layerTar(dockerBin(bb)); err != nil {
		t.Error(err)
	}
}
