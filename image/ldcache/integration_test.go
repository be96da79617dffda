//go:build integration

package ldcache

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-os/drover/image/tree"
)

// hostLibs are real libraries (and their links and linker scripts) copied
// from the host into the test tree, so the check covers what Debian ships,
// not only the synthetic objects.
var hostLibs = []string{"libc.so*", "libm.so*", "libz.so*", "libzstd.so*", "libsystemd.so*", "libcrypto.so*", "libssl.so*",
	"libstdc++.so*", "libgcc_s.so*", "libselinux.so*", "libpcre2-8.so*", "ld-linux-x86-64.so*", "libmvec.so*", "libresolv.so*"}

// writeTree puts t on disk under root, as the image would hold it.
func writeTree(t *testing.T, tr *tree.Tree, root string) {
	t.Helper()
	err := tr.Walk(func(n *tree.Node) error {
		p := filepath.Join(root, n.Path)
		switch n.Kind {
		case tree.Dir:
			return os.MkdirAll(p, 0o755)
		case tree.Symlink:
			return os.Symlink(n.Target, p)
		case tree.Regular:
			return os.WriteFile(p, n.Data, 0o644)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestMatchesLdconfig builds a cache from a tree of real and synthetic
// libraries, runs the host's ldconfig on the same tree written to disk, and
// requires the same bytes (with ldconfig's generator string, the one field
// that names the tool) and the same `ldconfig -p` listing.
func TestMatchesLdconfig(t *testing.T) {
	// Without /etc/ld.so.conf (a drover image has no libc-bin) only the
	// system directories are scanned, so their order decides.
	t.Run("system directories only", func(t *testing.T) { matchLdconfig(t, false) })
	t.Run("ld.so.conf with include", func(t *testing.T) { matchLdconfig(t, true) })
}

// ldconfigCache writes tr to a directory and has the host's ldconfig build
// its cache there (root/ref.cache); it returns the ldconfig binary, the
// directory, the cache's bytes and the decoded cache.
func ldconfigCache(t *testing.T, tr *tree.Tree) (ldconfig, root string, ref []byte, refc *Cache) {
	t.Helper()
	ldconfig, err := exec.LookPath("ldconfig")
	if err != nil {
		t.Fatalf("ldconfig (libc-bin) is needed to check the cache format: %v", err)
	}
	if os.Geteuid() != 0 {
		// make integration (and CI) run as root.
		t.Skip("ldconfig -r chroots into the tree: needs root")
	}
	root = t.TempDir()
	writeTree(t, tr, root)
	if out, err := exec.Command(ldconfig, "-X", "-r", root, "-C", "/ref.cache").CombinedOutput(); err != nil {
		t.Fatalf("ldconfig: %v\n%s", err, out)
	}
	ref, err = os.ReadFile(filepath.Join(root, "ref.cache"))
	if err != nil {
		t.Fatal(err)
	}
	refc, err = Decode(ref)
	if err != nil {
		t.Fatalf("decoding ldconfig's cache: %v", err)
	}
	return ldconfig, root, ref, refc
}

func matchLdconfig(t *testing.T, conf bool) {
	tr := hostTree(t, conf)
	ldconfig, root, ref, refc := ldconfigCache(t, tr)
	entries, dirs, err := Build(tr, "amd64")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("scanned %v: %d entries (ldconfig: %d), generator %q", dirs, len(entries), len(refc.Entries), refc.Generator)
	ours := (&Cache{Entries: entries, Generator: refc.Generator}).Encode()
	ourPath := filepath.Join(root, "ours.cache")
	if err := os.WriteFile(ourPath, ours, 0o644); err != nil {
		t.Fatal(err)
	}
	list := func(file string) string {
		out, err := exec.Command(ldconfig, "-p", "-C", file).CombinedOutput()
		if err != nil {
			t.Fatalf("ldconfig -p -C %s: %v\n%s", file, err, out)
		}
		return strings.ReplaceAll(string(out), file, "CACHE")
	}
	if a, b := list(filepath.Join(root, "ref.cache")), list(ourPath); a != b {
		t.Errorf("ldconfig -p differs:\n--- ldconfig's\n%s\n--- ours\n%s", a, b)
	}
	if !bytes.Equal(ours, ref) {
		for i := range min(len(ours), len(ref)) {
			if ours[i] != ref[i] {
				t.Fatalf("cache differs from ldconfig's at byte %d of %d (ours %d bytes)", i, len(ref), len(ours))
			}
		}
		t.Fatalf("cache is %d bytes, ldconfig's %d", len(ours), len(ref))
	}
}

// hostTree is sampleTree plus the host's real libraries (and, with conf,
// an ld.so.conf with an include) in the amd64 layout.
func hostTree(t *testing.T, conf bool) *tree.Tree {
	tr := sampleTree(t)
	hostDir := "/usr/lib/x86_64-linux-gnu"
	var copied int
	for _, pat := range hostLibs {
		matches, _ := filepath.Glob(filepath.Join(hostDir, pat))
		for _, m := range matches {
			fi, err := os.Lstat(m)
			if err != nil {
				t.Fatal(err)
			}
			n := &tree.Node{Path: "/usr/lib/x86_64-linux-gnu/" + filepath.Base(m), Owner: "host"}
			if fi.Mode()&os.ModeSymlink != 0 {
				n.Kind = tree.Symlink
				if n.Target, err = os.Readlink(m); err != nil {
					t.Fatal(err)
				}
			} else if n.Data, err = os.ReadFile(m); err != nil {
				t.Fatal(err)
			}
			if err := tr.Set(n); err != nil {
				t.Fatal(err)
			}
			copied++
		}
	}
	if copied < 10 {
		t.Fatalf("only %d host libraries found in %s: is this a Debian amd64 host?", copied, hostDir)
	}
	// An ld.so.conf with an include, a comment and a directory that exists.
	if conf {
		tr.Set(&tree.Node{Path: "/etc/ld.so.conf", Kind: tree.Regular, Data: []byte("include /etc/ld.so.conf.d/*.conf\n"), Owner: "t"})
		tr.Set(&tree.Node{Path: "/etc/ld.so.conf.d/x.conf", Kind: tree.Regular, Data: []byte("# extra\n/opt/lib\n/usr/local/lib/x86_64-linux-gnu\n/lib/x86_64-linux-gnu\n"), Owner: "t"})
		tr.Set(&tree.Node{Path: "/opt/lib/libopt.so.3", Kind: tree.Regular, Data: FakeLibrary(elf.EM_X86_64, elf.ET_DYN, "libopt.so.3"), Owner: "t"})
		tr.Set(&tree.Node{Path: "/opt/lib/libz.so.1", Kind: tree.Regular, Data: FakeLibrary(elf.EM_X86_64, elf.ET_DYN, "libz.so.1"), Owner: "t"})
	}

	return tr
}

// TestArm64MatchesLdconfig checks the arm64 cache without an arm64
// ldconfig (nothing of arm64 runs during a build, nor here): the amd64 test
// tree is mirrored into the arm64 layout — every path and link target under
// aarch64-linux-gnu, every ELF object's e_machine swapped between x86-64
// and AArch64 — and the cache built from it must be ldconfig's amd64 cache
// of the original tree with exactly those substitutions and every entry's
// flags FLAG_ELF_LIBC6|FLAG_AARCH64_LIB64 (0x0a03, glibc's ldconfig.h; the
// aarch64 dynamic linker accepts no other: sysdeps/unix/sysv/linux/aarch64/
// dl-cache.h). The host's `ldconfig -p` must then read the arm64 cache
// and list each library as "libc6,AArch64".
func TestArm64MatchesLdconfig(t *testing.T) {
	amd := hostTree(t, false)
	ldconfig, root, _, refc := ldconfigCache(t, amd)
	toArm := strings.NewReplacer("x86_64-linux-gnu", "aarch64-linux-gnu")
	arm := tree.New()
	err := amd.Walk(func(n *tree.Node) error {
		c := *n
		c.Path, c.Target = toArm.Replace(n.Path), toArm.Replace(n.Target)
		if n.Kind == tree.Regular {
			c.Data = swapMachine(n.Data)
		}
		return arm.Set(&c)
	})
	if err != nil {
		t.Fatal(err)
	}
	entries, dirs, err := Build(arm, "arm64")
	if err != nil {
		t.Fatal(err)
	}
	var want []Entry
	for _, e := range refc.Entries {
		if e.Flags != FlagELFLibc6|FlagX8664Lib64 {
			t.Fatalf("ldconfig's amd64 entry %s has flags %#x", e.Soname, e.Flags)
		}
		want = append(want, Entry{Soname: e.Soname, Path: toArm.Replace(e.Path), Flags: 0x0a03})
	}
	t.Logf("scanned %v: %d entries (ldconfig's amd64 cache: %d)", dirs, len(entries), len(want))
	if len(entries) != len(want) {
		t.Fatalf("arm64 cache has %d entries, the mirrored amd64 cache %d:\n%v\n%v", len(entries), len(want), entries, want)
	}
	for i := range want {
		if entries[i] != want[i] {
			t.Errorf("entry %d: %+v, want %+v", i, entries[i], want[i])
		}
	}
	ours := filepath.Join(root, "arm64.cache")
	if err := os.WriteFile(ours, (&Cache{Entries: entries, Generator: refc.Generator}).Encode(), 0o644); err != nil {
		t.Fatal(err)
	}
	list := func(file string) string {
		out, err := exec.Command(ldconfig, "-p", "-C", file).CombinedOutput()
		if err != nil {
			t.Fatalf("ldconfig -p -C %s: %v\n%s", file, err, out)
		}
		return strings.ReplaceAll(string(out), file, "CACHE")
	}
	got := list(ours)
	wantList := strings.NewReplacer("x86_64-linux-gnu", "aarch64-linux-gnu", "(libc6,x86-64)", "(libc6,AArch64)").Replace(list(filepath.Join(root, "ref.cache")))
	if got != wantList {
		t.Errorf("ldconfig -p of the arm64 cache:\n%s\nwant:\n%s", got, wantList)
	}
	if n := strings.Count(got, "(libc6,AArch64)"); n != len(entries) {
		t.Errorf("ldconfig -p lists %d libc6,AArch64 entries, want %d:\n%s", n, len(entries), got)
	}
}

// swapMachine returns an ELF object's bytes with e_machine x86-64 and
// AArch64 exchanged; anything else is returned as is.
func swapMachine(b []byte) []byte {
	if len(b) < 20 || string(b[:4]) != "\x7fELF" {
		return b
	}
	c := append([]byte(nil), b...)
	switch elf.Machine(binary.LittleEndian.Uint16(c[18:])) {
	case elf.EM_X86_64:
		binary.LittleEndian.PutUint16(c[18:], uint16(elf.EM_AARCH64))
	case elf.EM_AARCH64:
		binary.LittleEndian.PutUint16(c[18:], uint16(elf.EM_X86_64))
	}
	return c
}
