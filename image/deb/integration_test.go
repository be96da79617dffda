//go:build integration

package deb

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/image/debian"
	"github.com/drover-os/drover/image/debian/debiantest"
	"github.com/drover-os/drover/image/rootfs"
	"github.com/drover-os/drover/image/tree"
)

// trixie returns the configured mirror's trixie main index, with a client
// whose store is the project's verified cache.
func trixie(t *testing.T, ctx context.Context) (*debian.Client, *debian.Index) {
	r := debiantest.Trixie(t)
	return r.Client, r.Index
}

func fetch(t *testing.T, ctx context.Context, c *debian.Client, p debian.Package) string {
	path, err := c.Store.Fetch(ctx, p.Name+".deb", p.URL(c.Mirror), p.SHA256, p.Size)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

func TestIntegrationDash(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, idx := trixie(t, ctx)
	cands := idx.Lookup("dash")
	if len(cands) == 0 {
		t.Fatal("trixie has no dash")
	}
	p := cands[0]
	path := fetch(t, ctx, c, p)

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctl, err := Control(f)
	if err != nil {
		t.Fatal(err)
	}
	if ctl["Package"] != "dash" || ctl["Version"] != p.Version || ctl["Architecture"] != p.Architecture {
		t.Errorf("control %v does not match the index entry %s %s %s", ctl, p.Name, p.Version, p.Architecture)
	}

	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	tr := tree.New()
	st, err := Extract(f, "dash", tr, Options{Skip: func(p string) bool { return strings.HasPrefix(p, "/usr/share/man/") }})
	if err != nil {
		t.Fatal(err)
	}
	logged := *st
	logged.Control = nil
	t.Logf("dash %s: %+v", p.Version, logged)
	if st.Skipped == 0 {
		t.Error("no man page skipped")
	}
	dash := tr.Get("/usr/bin/dash")
	if dash == nil || dash.Kind != tree.Regular || dash.Mode != 0o755 || dash.UID != 0 || dash.GID != 0 ||
		!strings.HasPrefix(string(dash.Data), "\x7fELF") || dash.Owner != "dash" {
		t.Fatalf("/usr/bin/dash: %+v", dash)
	}
	// Every symlink dash ships, /bin/sh-style ones included, is stored
	// under /usr and resolves inside the tree.
	links := 0
	err = tr.Walk(func(n *tree.Node) error {
		if n.Owner != "dash" || n.Kind != tree.Symlink {
			return nil
		}
		links++
		if tree.Canonical(n.Path) != n.Path {
			t.Errorf("symlink %s is not at its merged-/usr path", n.Path)
		}
		target := n.Target
		if !strings.HasPrefix(target, "/") {
			target = filepath.Join(filepath.Dir(n.Path), target)
		}
		if tr.Get(target) == nil && !strings.HasPrefix(n.Path, "/usr/share/man/") {
			t.Errorf("symlink %s -> %s dangles", n.Path, n.Target)
		}
		t.Logf("symlink %s -> %s", n.Path, n.Target)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if links == 0 {
		t.Error("dash shipped no symlink")
	}
	if sh := tr.Get("/bin/sh"); sh != nil && (sh.Kind != tree.Symlink || sh.Path != "/usr/bin/sh") {
		t.Errorf("/bin/sh resolves to %+v", sh)
	}
}

// TestIntegrationClosure extracts a real closure (systemd's) in parallel,
// writes it as EROFS and checks it with fsck.erofs: the path the builder
// takes, with sizes and times logged for tuning.
func TestIntegrationClosure(t *testing.T) {
	if _, err := exec.LookPath("fsck.erofs"); err != nil {
		t.Fatal("fsck.erofs not found: apt-get install erofs-utils")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	c, idx := trixie(t, ctx)
	cl, err := debian.Resolve(idx, runtime.GOARCH, []string{"systemd", "kmod", "iproute2"})
	if err != nil {
		t.Fatal(err)
	}
	paths := map[string]string{}
	var order []string
	var download int64
	for _, p := range cl.Packages {
		paths[p.Name] = fetch(t, ctx, c, p)
		order = append(order, p.Name)
		download += p.Size
	}
	skip := func(p string) bool {
		return strings.HasPrefix(p, "/usr/share/doc/") || strings.HasPrefix(p, "/usr/share/man/") || strings.HasPrefix(p, "/usr/share/locale/")
	}
	start := time.Now()
	tr := tree.New()
	if err := ExtractAll(paths, order, tr, Options{Skip: skip}, 0); err != nil {
		t.Fatal(err)
	}
	extracted := time.Since(start)

	img := filepath.Join(t.TempDir(), "root.erofs")
	out, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	start = time.Now()
	st, err := rootfs.Write(out, tr, time.Unix(1735689600, 0), rootfs.Options{Label: "root"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d packages (%.1f MiB of .debs) extracted in %s on %d CPUs; %d nodes, %.1f MiB of data",
		len(order), float64(download)/(1<<20), extracted.Round(time.Millisecond), runtime.GOMAXPROCS(0), tr.Len(), float64(tr.Size())/(1<<20))
	t.Logf("erofs written in %s: %+v (image/data %.3f)", time.Since(start).Round(time.Millisecond), *st, float64(st.Size)/float64(st.DataBytes))
	if res, err := exec.Command("fsck.erofs", img).CombinedOutput(); err != nil {
		t.Fatalf("fsck.erofs: %v\n%s", err, res)
	}
	if n := tr.Get("/usr/lib/systemd/systemd"); n == nil || n.Mode != 0o755 {
		t.Errorf("/usr/lib/systemd/systemd: %+v", n)
	}
}
