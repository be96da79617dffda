//go:build integration

package ldcache

import (
	"bytes"
	"debug/elf"
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

func matchLdconfig(t *testing.T, conf bool) {
	ldconfig, err := exec.LookPath("ldconfig")
	if err != nil {
		t.Fatalf("ldconfig (libc-bin) is needed to check the cache format: %v", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("ldconfig -r chroots: needs root")
	}
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

	root := t.TempDir()
	writeTree(t, tr, root)
	out, err := exec.Command(ldconfig, "-X", "-r", root, "-C", "/ref.cache").CombinedOutput()
	if err != nil {
		t.Fatalf("ldconfig: %v\n%s", err, out)
	}
	ref, err := os.ReadFile(filepath.Join(root, "ref.cache"))
	if err != nil {
		t.Fatal(err)
	}
	refc, err := Decode(ref)
	if err != nil {
		t.Fatalf("decoding ldconfig's cache: %v", err)
	}
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
