package deb

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/drover-os/drover/image/deb/debtest"
	"github.com/drover-os/drover/image/tree"
)

// sampleEntries exercise every kind of entry a .deb can carry.
func sampleEntries() []debtest.Entry {
	ping := debtest.File("./usr/bin/ping", 0o755, "ping")
	ping.Header.PAXRecords = map[string]string{"SCHILY.xattr.security.capability": "\x01\x00\x00\x02 raw"}
	null := debtest.Entry{Header: tar.Header{Name: "./dev/null", Typeflag: tar.TypeChar, Mode: 0o666, Devmajor: 1, Devminor: 3}}
	disk := debtest.Entry{Header: tar.Header{Name: "./dev/sdb", Typeflag: tar.TypeBlock, Mode: 0o660, Gid: 6, Devmajor: 8, Devminor: 300}}
	fifo := debtest.Entry{Header: tar.Header{Name: "./run/initctl", Typeflag: tar.TypeFifo, Mode: 0o600}}
	return []debtest.Entry{
		debtest.Dir("./", 0o755),
		debtest.Dir("./usr/", 0o755),
		debtest.Dir("./usr/bin/", 0o755),
		debtest.File("./usr/bin/su", 0o4755, "su binary"),
		debtest.Link("./usr/bin/su-link", "./usr/bin/su"),
		debtest.Symlink("./usr/bin/sh", "dash"),
		ping,
		debtest.Dir("./tmp/", 0o1777),
		debtest.Dir("./etc/", 0o755),
		debtest.File("./etc/shadow", 0o640, "root:*:1::::::\n").Owned(0, 42),
		debtest.File("./usr/bin/wall", 0o2755, "wall").Owned(0, 5),
		debtest.Dir("./lib/", 0o755),
		debtest.Dir("./lib/x86_64-linux-gnu/", 0o755),
		debtest.File("./lib/x86_64-linux-gnu/libfoo.so.1.2", 0o644, "ELF"),
		debtest.Symlink("./lib/x86_64-linux-gnu/libfoo.so.1", "libfoo.so.1.2"),
		debtest.File("./usr/share/doc/foo/copyright", 0o644, "GPL"),
		debtest.File("./etc/empty", 0o600, ""),
		null, disk, fifo,
	}
}

func buildDeb(t testing.TB, pkg, comp string, entries []debtest.Entry) []byte {
	t.Helper()
	b, err := debtest.Build(debtest.Deb{
		Control:     map[string]string{"Package": pkg, "Version": "1.0-1", "Architecture": "amd64", "Description": "test\n package"},
		Compression: comp,
		Entries:     entries,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestExtract(t *testing.T) {
	for _, comp := range []string{"xz", "zst", "gz", "none"} {
		t.Run(comp, func(t *testing.T) {
			tr := tree.New()
			st, err := Extract(bytes.NewReader(buildDeb(t, "foo", comp, sampleEntries())), "foo", tr, Options{})
			if err != nil {
				t.Fatal(err)
			}
			want := Stats{
				Package: "foo", Compression: comp, Files: 8, HardLinks: 1, Dirs: 7, Symlinks: 2, Specials: 3,
				Bytes:   int64(len("su binary") + len("ping") + len("root:*:1::::::\n") + len("wall") + len("ELF") + len("GPL")),
				Control: map[string]string{"Package": "foo", "Version": "1.0-1", "Architecture": "amd64", "Description": "test\npackage"},
			}
			if !reflect.DeepEqual(*st, want) {
				t.Errorf("stats:\n got %+v\nwant %+v", *st, want)
			}
			checkNode(t, tr, tree.Node{Path: "/usr/bin/su", Kind: tree.Regular, Mode: 0o4755, Data: []byte("su binary")})
			checkNode(t, tr, tree.Node{Path: "/usr/bin/su-link", Kind: tree.Regular, Mode: 0o4755, Data: []byte("su binary")})
			checkNode(t, tr, tree.Node{Path: "/usr/bin/wall", Kind: tree.Regular, Mode: 0o2755, GID: 5, Data: []byte("wall")})
			checkNode(t, tr, tree.Node{Path: "/usr/bin/sh", Kind: tree.Symlink, Mode: 0o777, Target: "dash"})
			checkNode(t, tr, tree.Node{Path: "/usr/bin/ping", Kind: tree.Regular, Mode: 0o755, Data: []byte("ping"),
				Xattrs: map[string][]byte{"security.capability": []byte("\x01\x00\x00\x02 raw")}})
			checkNode(t, tr, tree.Node{Path: "/tmp", Kind: tree.Dir, Mode: 0o1777})
			checkNode(t, tr, tree.Node{Path: "/etc/shadow", Kind: tree.Regular, Mode: 0o640, GID: 42, Data: []byte("root:*:1::::::\n")})
			checkNode(t, tr, tree.Node{Path: "/etc/empty", Kind: tree.Regular, Mode: 0o600, Data: []byte{}})
			checkNode(t, tr, tree.Node{Path: "/usr/lib/x86_64-linux-gnu/libfoo.so.1.2", Kind: tree.Regular, Mode: 0o644, Data: []byte("ELF")})
			checkNode(t, tr, tree.Node{Path: "/usr/lib/x86_64-linux-gnu/libfoo.so.1", Kind: tree.Symlink, Mode: 0o777, Target: "libfoo.so.1.2"})
			checkNode(t, tr, tree.Node{Path: "/dev/null", Kind: tree.CharDev, Mode: 0o666, Rdev: 0x103})
			checkNode(t, tr, tree.Node{Path: "/dev/sdb", Kind: tree.BlockDev, Mode: 0o660, GID: 6, Rdev: mkdev(8, 300)})
			checkNode(t, tr, tree.Node{Path: "/run/initctl", Kind: tree.FIFO, Mode: 0o600})
			// The merged-/usr alias stays the symlink tree.New made.
			checkNode(t, tr, tree.Node{Path: "/lib", Kind: tree.Symlink, Mode: 0o777, Target: "usr/lib"})
			if n := tr.Get("/usr/bin/su-link"); n != nil && &n.Data[0] != &tr.Get("/usr/bin/su").Data[0] {
				t.Error("hard link does not share its target's content")
			}
		})
	}
}

// checkNode compares every field but Owner, which must be "foo".
func checkNode(t *testing.T, tr *tree.Tree, want tree.Node) {
	t.Helper()
	got := tr.Get(want.Path)
	if got == nil {
		t.Errorf("%s missing", want.Path)
		return
	}
	g := *got
	if g.Owner != "foo" && g.Owner != "drover" {
		t.Errorf("%s owned by %q", want.Path, g.Owner)
	}
	g.Owner = ""
	if !reflect.DeepEqual(g, want) {
		t.Errorf("%s:\n got %+v\nwant %+v", want.Path, g, want)
	}
}

func TestExtractSkip(t *testing.T) {
	tr := tree.New()
	skip := func(p string) bool { return strings.HasPrefix(p, "/usr/share/doc") || p == "/dev/sdb" }
	st, err := Extract(bytes.NewReader(buildDeb(t, "foo", "gz", sampleEntries())), "foo", tr, Options{Skip: skip})
	if err != nil {
		t.Fatal(err)
	}
	if st.Skipped != 2 {
		t.Errorf("skipped %d entries, want 2", st.Skipped)
	}
	for _, p := range []string{"/usr/share/doc/foo/copyright", "/usr/share/doc", "/dev/sdb"} {
		if tr.Get(p) != nil {
			t.Errorf("%s extracted despite Skip", p)
		}
	}
	if tr.Get("/usr/bin/su") == nil {
		t.Error("/usr/bin/su missing")
	}
}

func TestExtractErrors(t *testing.T) {
	good := buildDeb(t, "foo", "gz", sampleEntries())
	cases := []struct {
		name string
		deb  []byte
		opt  Options
		want string
	}{
		{"not ar", []byte("PK\x03\x04 zip file"), Options{}, "not an ar archive"},
		{"truncated", good[:len(good)-40], Options{}, "unexpected EOF"},
		{"link to skipped", good, Options{Skip: func(p string) bool { return p == "/usr/bin/su" }}, "usr/bin/su-link: hard link to /usr/bin/su, which Options.Skip dropped"},
		{"link to nothing", buildDeb(t, "foo", "gz", []debtest.Entry{debtest.Link("./a", "./b")}), Options{}, "hard link to /b, which the package does not ship"},
		{"unknown type", buildDeb(t, "foo", "gz", []debtest.Entry{{Header: tar.Header{Name: "./x", Typeflag: '9'}}}), Options{}, `./x: unsupported tar entry type '9'`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Extract(bytes.NewReader(c.deb), "foo", tree.New(), c.opt)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "foo") {
				t.Fatalf("got error %v, want one naming foo and containing %q", err, c.want)
			}
		})
	}
}

func TestConflictNamesBothPackages(t *testing.T) {
	tr := tree.New()
	a := buildDeb(t, "alpha", "zst", []debtest.Entry{debtest.File("./usr/bin/tool", 0o755, "alpha's tool")})
	b := buildDeb(t, "beta", "xz", []debtest.Entry{debtest.File("./bin/tool", 0o755, "beta's tool")})
	if _, err := Extract(bytes.NewReader(a), "alpha", tr, Options{}); err != nil {
		t.Fatal(err)
	}
	_, err := Extract(bytes.NewReader(b), "beta", tr, Options{})
	if err == nil || !strings.Contains(err.Error(), "/usr/bin/tool is shipped by both alpha and beta") {
		t.Fatalf("got %v, want a conflict naming both packages", err)
	}
}

func TestControl(t *testing.T) {
	got, err := Control(bytes.NewReader(buildDeb(t, "dash", "xz", sampleEntries())))
	if err != nil {
		t.Fatal(err)
	}
	if got["Package"] != "dash" || got["Version"] != "1.0-1" || got["Architecture"] != "amd64" {
		t.Errorf("control fields: %v", got)
	}
	if _, err := Control(strings.NewReader("!<arch>\n")); err == nil {
		t.Error("Control accepted an archive without debian-binary")
	}
}

func TestParseControl(t *testing.T) {
	got, err := parseControl("Package: x\nDepends: a,\n b\nDescription: short\n long line\n .\n more\n\nPackage: ignored\n")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"Package": "x", "Depends": "a,\nb", "Description": "short\nlong line\n.\nmore"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	for _, bad := range []string{"", " leading continuation\n", "no colon here\n"} {
		if _, err := parseControl(bad); err == nil {
			t.Errorf("parseControl(%q) succeeded", bad)
		}
	}
}

func TestArReader(t *testing.T) {
	// GNU ar style names with a trailing slash and an odd-sized member
	// followed by its padding byte.
	ar := "!<arch>\n" +
		fmt.Sprintf("%-16s%-12d%-6d%-6d%-8s%-10d`\n", "odd/", 0, 0, 0, "644", 3) + "abc\n" +
		fmt.Sprintf("%-16s%-12d%-6d%-6d%-8s%-10d`\n", "even/", 0, 0, 0, "644", 2) + "de"
	r, err := newArReader(strings.NewReader(ar))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		name, size, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if name == "even" {
			body, _ := io.ReadAll(r)
			got = append(got, fmt.Sprintf("%s:%d:%s", name, size, body))
			continue
		}
		got = append(got, fmt.Sprintf("%s:%d", name, size)) // body left unread: Next must skip it
	}
	if want := []string{"odd:3", "even:2:de"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestMkdev(t *testing.T) {
	// Values of glibc makedev(3).
	for _, c := range []struct{ major, minor, want uint64 }{
		{1, 3, 0x103}, {8, 16, 0x810}, {259, 0x12345, 0x12310345}, {4096, 0, 0x100000000000},
	} {
		if got := mkdev(c.major, c.minor); got != c.want {
			t.Errorf("mkdev(%d, %d) = %#x, want %#x", c.major, c.minor, got, c.want)
		}
	}
}

// writeDebs writes n packages sharing directories with different modes,
// so the order in which they land decides the tree.
func writeDebs(t testing.TB, dir string, n int) (map[string]string, []string) {
	paths := map[string]string{}
	var order []string
	comps := []string{"xz", "zst", "gz", "none"}
	for i := range n {
		pkg := fmt.Sprintf("pkg%02d", i)
		entries := []debtest.Entry{
			debtest.Dir("./usr/share/shared/", int64(0o700+i)),
			debtest.File(fmt.Sprintf("./usr/share/shared/%s", pkg), 0o644, strings.Repeat(pkg, 1000+i)),
			debtest.File(fmt.Sprintf("./lib/%s.so", pkg), 0o644, pkg),
			debtest.File("./etc/same.conf", 0o644, "identical in every package\n"),
		}
		p := filepath.Join(dir, pkg+".deb")
		if err := os.WriteFile(p, buildDeb(t, pkg, comps[i%len(comps)], entries), 0o644); err != nil {
			t.Fatal(err)
		}
		paths[pkg] = p
		order = append(order, pkg)
	}
	return paths, order
}

func dump(t *testing.T, tr *tree.Tree) []tree.Node {
	var out []tree.Node
	if err := tr.Walk(func(n *tree.Node) error { out = append(out, *n); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestExtractAllDeterministic(t *testing.T) {
	paths, order := writeDebs(t, t.TempDir(), 12)
	// Reverse the order so it differs from the sorted map keys.
	for i, j := 0, len(order)-1; i < j; i, j = i+1, j-1 {
		order[i], order[j] = order[j], order[i]
	}
	seq := tree.New()
	for _, pkg := range order {
		f, err := os.Open(paths[pkg])
		if err != nil {
			t.Fatal(err)
		}
		_, err = Extract(f, pkg, seq, Options{})
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	want := dump(t, seq)
	for run := range 2 {
		tr := tree.New()
		if err := ExtractAll(paths, order, tr, Options{}, 4); err != nil {
			t.Fatal(err)
		}
		if got := dump(t, tr); !reflect.DeepEqual(got, want) {
			t.Fatalf("run %d: ExtractAll(parallel=4) differs from sequential extraction in order", run)
		}
	}
	// The first package in the order owns the shared directory.
	if n := seq.Get("/usr/share/shared"); n.Owner != order[0] || n.Mode != 0o700+11 {
		t.Errorf("shared dir: owner %s mode %o, want %s 0713", n.Owner, n.Mode, order[0])
	}
}

func TestExtractAllErrors(t *testing.T) {
	dir := t.TempDir()
	paths, order := writeDebs(t, dir, 3)
	bad := filepath.Join(dir, "bad.deb")
	if err := os.WriteFile(bad, []byte("!<arch>\ngarbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		paths map[string]string
		order []string
		want  string
	}{
		{"missing path", paths, append(order[:3:3], "ghost"), "no .deb path for ghost"},
		{"missing from order", paths, order[:2], "pkg02 has a .deb but is missing from the order"},
		{"twice", paths, append(order[:3:3], "pkg00"), "pkg00 is listed twice"},
		{"corrupt", map[string]string{"pkg00": paths["pkg00"], "bad": bad}, []string{"pkg00", "bad"}, "extracting bad: "},
		{"absent file", map[string]string{"gone": filepath.Join(dir, "gone.deb")}, []string{"gone"}, "extracting gone: open "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := ExtractAll(c.paths, c.order, tree.New(), Options{}, 2)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// memUnpacked keeps decompressed data.tar streams in memory.
type memUnpacked struct {
	mu   sync.Mutex
	kept map[string][]byte
	hits int
}

func (m *memUnpacked) Get(p string) (io.ReadCloser, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.kept[p]
	if ok {
		m.hits++
	}
	return io.NopCloser(bytes.NewReader(b)), ok
}

func (m *memUnpacked) Put(p string) (io.Writer, func(bool)) {
	var buf bytes.Buffer
	return &buf, func(ok bool) {
		if ok {
			m.mu.Lock()
			m.kept[p] = buf.Bytes()
			m.mu.Unlock()
		}
	}
}

// TestExtractAllFromUnpacked: the second extraction reads the kept plain
// data.tar streams and gives the same tree.
func TestExtractAllFromUnpacked(t *testing.T) {
	paths, order := writeDebs(t, t.TempDir(), 6)
	u := &memUnpacked{kept: map[string][]byte{}}
	first := tree.New()
	if err := ExtractAll(paths, order, first, Options{Unpacked: u}, 4); err != nil {
		t.Fatal(err)
	}
	if len(u.kept) != len(paths) || u.hits != 0 {
		t.Fatalf("kept %d of %d, %d hits", len(u.kept), len(paths), u.hits)
	}
	second := tree.New()
	if err := ExtractAll(paths, order, second, Options{Unpacked: u}, 4); err != nil {
		t.Fatal(err)
	}
	if u.hits != len(paths) {
		t.Errorf("second run used %d kept copies, want %d", u.hits, len(paths))
	}
	if !reflect.DeepEqual(dump(t, first), dump(t, second)) {
		t.Fatal("the tree from kept copies differs")
	}
	// A damaged kept copy is ignored, not trusted.
	for k := range u.kept {
		u.kept[k] = []byte("garbage")
	}
	third := tree.New()
	if err := ExtractAll(paths, order, third, Options{Unpacked: u}, 4); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(dump(t, first), dump(t, third)) {
		t.Fatal("damaged kept copies changed the tree")
	}
}

// memAside keeps the files an Aside is handed, by "package path".
type memAside struct {
	mu    sync.Mutex
	files map[string]string
}

func (m *memAside) Want(p string) bool { return strings.HasPrefix(path.Base(p), "changelog") }

func (m *memAside) Put(pkg, p string, data []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[pkg+" "+p] = string(data)
}

// TestExtractAside: the files Aside wants reach it whether Skip drops them
// or not, from the .deb and from a kept data.tar alike; nothing else does.
func TestExtractAside(t *testing.T) {
	entries := append(sampleEntries(),
		debtest.File("./usr/share/doc/foo/changelog.Debian.gz", 0o644, "skipped changelog"),
		debtest.File("./usr/share/foo/changelog", 0o644, "kept changelog"),
		debtest.Symlink("./usr/share/doc/foo/changelog.gz", "changelog.Debian.gz"),
	)
	dir := t.TempDir()
	p := filepath.Join(dir, "foo.deb")
	if err := os.WriteFile(p, buildDeb(t, "foo", "xz", entries), 0o644); err != nil {
		t.Fatal(err)
	}
	skip := func(p string) bool {
		return strings.HasPrefix(p, "/usr/share/doc/") && !strings.HasSuffix(p, "/copyright")
	}
	want := map[string]string{
		"foo /usr/share/doc/foo/changelog.Debian.gz": "skipped changelog",
		"foo /usr/share/foo/changelog":               "kept changelog",
	}
	u := &memUnpacked{kept: map[string][]byte{}}
	for run := range 2 { // the second run reads the kept data.tar
		a := &memAside{files: map[string]string{}}
		tr := tree.New()
		if err := ExtractAll(map[string]string{"foo": p}, []string{"foo"}, tr, Options{Skip: skip, Aside: a, Unpacked: u}, 1); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a.files, want) {
			t.Errorf("run %d: set aside %q, want %q", run, a.files, want)
		}
		if tr.Get("/usr/share/doc/foo/changelog.Debian.gz") != nil || tr.Get("/usr/share/foo/changelog") == nil {
			t.Errorf("run %d: Aside changed what is extracted", run)
		}
	}
	if u.hits != 1 {
		t.Errorf("the second run read %d kept copies, want 1", u.hits)
	}
}
