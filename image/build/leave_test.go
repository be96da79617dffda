package build

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-os/drover/image/cache"
	"github.com/drover-os/drover/image/deb/debtest"
	"github.com/drover-os/drover/image/debian/debiantest"
	"github.com/drover-os/drover/image/sources"

	"github.com/drover-os/drover/image/lock"
	"github.com/drover-os/drover/image/recipe"
	"github.com/drover-os/drover/image/tree"
)

func TestSetuidFiles(t *testing.T) {
	files := []FileEntry{
		{Path: "/tmp", Kind: "dir", Mode: "1777"},
		{Path: "/usr/bin/ls", Kind: "file", Mode: "0755"},
		{Path: "/usr/bin/mount", Kind: "file", Mode: "4755", Owner: "0:0", From: "mount"},
		{Path: "/usr/sbin/unix_chkpwd", Kind: "file", Mode: "2755", Owner: "0:42", From: "libpam-modules-bin"},
	}
	got := SetuidFiles(files)
	if len(got) != 2 || got[0].Path != "/usr/bin/mount" || got[1].Path != "/usr/sbin/unix_chkpwd" || got[1].Owner != "0:42" {
		t.Errorf("setuid files: %+v", got)
	}
	if got := SetuidFiles(nil); got == nil || len(got) != 0 {
		t.Errorf("no setuid files must be an empty list (the manifest says so), got %#v", got)
	}
}

func TestRemovePaths(t *testing.T) {
	tr := tree.New()
	for _, p := range []string{"/usr/bin/su", "/usr/bin/mount", "/usr/lib/modules/6.1/kernel/drivers/gpu/a.ko", "/usr/lib/modules/6.1/kernel/drivers/gpu/b/c.ko", "/usr/lib/modules/6.1/kernel/drivers/net/n.ko"} {
		if err := tr.Set(&tree.Node{Path: p, Kind: tree.Regular, Mode: 0o644, Data: []byte("12345"), Owner: "p"}); err != nil {
			t.Fatal(err)
		}
	}
	r := &recipe.Recipe{Path: "r.yaml", Arch: "amd64", Remove: []recipe.Remove{
		{Glob: "/usr/lib/modules/*/kernel/drivers/gpu", Why: "no GPU", Line: 3},
		{Glob: "/bin/su", Why: "no logins", Line: 5}, // the merged-/usr alias
		// another architecture's entry: neither applied nor stale
		{Glob: "/usr/lib/modules/*/kernel/drivers/net", Why: "arm64 only", Arch: "arm64", Line: 7},
		{Glob: "/usr/lib/modules/*/kernel/drivers/sound", Why: "arm64 only", Arch: "arm64", Line: 9},
	}}
	b := &builder{p: &Plan{Recipe: r}, tree: tr, man: &Manifest{}, leftOut: map[string]string{}}
	if err := b.removePaths(); err != nil {
		t.Fatal(err)
	}
	if tr.Get("/usr/bin/su") != nil || tr.Get("/usr/lib/modules/6.1/kernel/drivers/gpu/b/c.ko") != nil || tr.Get("/usr/lib/modules/6.1/kernel/drivers/net/n.ko") == nil {
		t.Errorf("wrong paths removed: %v", tr.Paths())
	}
	m := b.man.Removed
	if len(m) != 2 || m[0].Bytes != 10 || len(m[0].Paths) != 4 || m[1].Paths[0] != "/usr/bin/su" {
		t.Errorf("manifest: %+v", m)
	}
	if b.leftOut["/usr/bin/su"] != "remove[1] /bin/su" {
		t.Errorf("left out: %v", b.leftOut)
	}
	// Applied again, both entries match nothing: a stale recipe.
	err := b.removePaths()
	want := "r.yaml:3: remove[0]: /usr/lib/modules/*/kernel/drivers/gpu matches nothing in the image: remove the entry or fix the glob\n" +
		"r.yaml:5: remove[1]: /bin/su matches nothing in the image: remove the entry or fix the glob"
	if err == nil || err.Error() != want {
		t.Errorf("stale entries: %v\nwant %s", err, want)
	}
}

func TestExcludedMustBeInTheLock(t *testing.T) {
	r := &recipe.Recipe{Path: "r.yaml", Exclude: []recipe.Exclude{{Package: "cpio", Why: "w", Line: 4}, {Package: "gone", Why: "w", Line: 6}}}
	l := &lock.Lock{Debs: []lock.Deb{{Name: "cpio", Version: "2.15"}}}
	_, err := excludedDebs(r, l)
	if err == nil || !strings.Contains(err.Error(), "r.yaml:6: exclude[1]: gone is not in the closure of r.yaml.lock: remove the entry") || strings.Contains(err.Error(), "cpio") {
		t.Errorf("got %v", err)
	}
}

// TestExcludedPackageIsLeftOutAndChecked: an excluded package's files stay
// out of the tree and the manifest's packages, it is listed as excluded,
// and a script of a kept package whose interpreter only it ships fails
// the needs check, naming both.
func TestExcludedPackageIsLeftOutAndChecked(t *testing.T) {
	dir := t.TempDir()
	c, err := cache.Open(filepath.Join(dir, "cache"))
	if err != nil {
		t.Fatal(err)
	}
	var debs []lock.Deb
	var published []debiantest.Package
	for _, d := range []struct {
		name    string
		entries []debtest.Entry
	}{
		{"app", []debtest.Entry{debtest.Dir("./", 0o755), debtest.File("./usr/bin/app", 0o755, "#!/usr/bin/gone-sh\n")}},
		{"gone", []debtest.Entry{debtest.Dir("./", 0o755), debtest.File("./usr/bin/gone-sh", 0o755, "\x7fELF not really"), debtest.Dir("./usr/share/", 0o755)}},
	} {
		data, err := debtest.Build(debtest.Deb{Control: map[string]string{"Package": d.name, "Version": "1.0", "Architecture": "amd64"}, Compression: "gz", Entries: d.entries})
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		sha := hex.EncodeToString(sum[:])
		if _, err := c.Put(sha, bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		path := fmt.Sprintf("pool/main/%c/%s/%s_1.0_amd64.deb", d.name[0], d.name, d.name)
		debs = append(debs, lock.Deb{Name: d.name, Version: "1.0", Arch: "amd64", Size: int64(len(data)), SHA256: sha, Suite: "trixie", Path: path})
		published = append(published, debiantest.Package{Name: d.name, Version: "1.0", Data: data})
	}
	r, err := recipe.Parse(filepath.Join(dir, "r.yaml"), []byte("name: x\npackages: [app]\nexclude:\n  - package: gone\n    why: test\n"))
	if err != nil {
		t.Fatal(err)
	}
	suite, so := signedTrixie(t, c, r, published)
	l := &lock.Lock{Inputs: r.InputsDigest(), Epoch: 1795252544, Debs: debs, Suites: []lock.Suite{suite}}
	p, err := NewPlan(r, l, filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := sources.Fetch(context.Background(), r, l, so)
	if err != nil {
		t.Fatal(err)
	}
	b := &builder{p: p, o: Options{Sources: so}, tree: tree.New(), man: newManifest(p, "test")}
	if err := b.assemble(f); err != nil {
		t.Fatal(err)
	}
	if b.tree.Get("/usr/bin/gone-sh") != nil || b.tree.Get("/usr/bin/app") == nil {
		t.Errorf("tree: %v", b.tree.Paths())
	}
	if len(b.man.Packages) != 1 || b.man.Packages[0].Name != "app" {
		t.Errorf("manifest packages: %+v", b.man.Packages)
	}
	if ex := b.man.Excluded; len(ex) != 1 || ex[0].Name != "gone" || ex[0].Version != "1.0" || ex[0].Why != "test" || ex[0].Paths != 1 {
		t.Errorf("manifest excluded: %+v", ex)
	}
	err = b.checkNeeds()
	want := "/usr/bin/app (from app) needs /usr/bin/gone-sh (#! interpreter), which only excluded package gone (exclude[0]) at /usr/bin/gone-sh provided"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("needs: %v\nwant it to contain: %s", err, want)
	}
}
