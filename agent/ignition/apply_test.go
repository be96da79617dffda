package ignition

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// replacing touches every kind of existing node: a file replaced, a file
// appended to, a kept file chmodded, an existing directory chmodded, a
// symlink replaced, a symlink removed (disable), plus new nodes of every
// kind in new directories.
const replacing = `{"ignition":{"version":"3.5.0"},
 "storage":{
  "directories":[{"path":"/var/lib/existing","mode":448,"group":{"id":1000}},{"path":"/var/lib/new/deep","mode":488}],
  "files":[
   {"path":"/etc/opt/hostname","contents":{"source":"data:,node-1%0A"}},
   {"path":"/etc/hosts","append":[{"source":"data:,10.0.0.5%20registry%0A"}]},
   {"path":"/etc/opt/image/default.toml","mode":384,"user":{"name":"app"}},
   {"path":"/etc/opt/new/dir/file","contents":{"source":"data:,new"},"mode":493}],
  "links":[
   {"path":"/etc/systemd/system/multi-user.target.wants/old.service","target":"/etc/systemd/system/old.service"},
   {"path":"/var/lib/new/hard","target":"/etc/opt/new/dir/file","hard":true}]},
 "systemd":{"units":[
  {"name":"gone.service","enabled":false},
  {"name":"old.service","contents":"[Service]\nExecStart=/bin/true\n"},
  {"name":"masked.service","mask":true},
  {"name":"app.service","enabled":true,"contents":"[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n",
   "dropins":[{"name":"a.conf","contents":"[Service]\n"}]}]}}`

func preparePlan(t *testing.T, data string) *NodePlan {
	t.Helper()
	plan, err := Prepare(context.Background(), []byte(data), testOptions)
	must(t, err)
	return plan
}

// TestApplyRollback fails the apply before each step in turn (and after
// the last) and checks that the node is left exactly as it was.
func TestApplyRollback(t *testing.T) {
	plan := preparePlan(t, replacing)
	for failAt := 0; failAt <= len(plan.Steps); failAt++ {
		root := newRoot(t)
		// a second enable link for the disable step to remove
		must(t, os.MkdirAll(filepath.Join(root, "etc/systemd/system/sockets.target.wants"), 0o755))
		must(t, os.Symlink("/usr/lib/systemd/system/gone.service", filepath.Join(root, "etc/systemd/system/sockets.target.wants/gone.service")))
		before := snapshot(t, root)
		_, err := apply(plan, root, applyHooks{failAt: failAt, chown: os.Geteuid() == 0})
		if !errors.Is(err, errInjected) {
			t.Fatalf("failAt %d: got %v", failAt, err)
		}
		assertSame(t, before, snapshot(t, root))
	}
}

// TestApplyEffects checks the node after a successful apply.
func TestApplyEffects(t *testing.T) {
	plan := preparePlan(t, replacing)
	root := newRoot(t)
	must(t, os.MkdirAll(filepath.Join(root, "etc/systemd/system/sockets.target.wants"), 0o755))
	must(t, os.Symlink("/usr/lib/systemd/system/gone.service", filepath.Join(root, "etc/systemd/system/sockets.target.wants/gone.service")))
	applied, err := Apply(plan, root)
	must(t, err)
	checkApplied(t, root, plan, applied)

	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(root, p))
		must(t, err)
		return string(b)
	}
	mode := func(p string) fs.FileMode {
		fi, err := os.Lstat(filepath.Join(root, p))
		must(t, err)
		return fi.Mode()
	}
	if got := read("etc/hosts"); got != "127.0.0.1 localhost\n10.0.0.5 registry\n" {
		t.Errorf("/etc/hosts = %q", got)
	}
	if got := read("etc/opt/hostname"); got != "node-1\n" {
		t.Errorf("/etc/opt/hostname = %q", got)
	}
	if got := read("etc/opt/image/default.toml"); got != "image default\n" || mode("etc/opt/image/default.toml").Perm() != 0o600 {
		t.Errorf("kept file: %q %v", got, mode("etc/opt/image/default.toml"))
	}
	for p, want := range map[string]fs.FileMode{
		"var/lib/existing":               fs.ModeDir | 0o700,
		"var/lib/new":                    fs.ModeDir | 0o755, // implicit parent
		"var/lib/new/deep":               fs.ModeDir | 0o750,
		"etc/opt/new/dir/file":           0o755,
		"etc/systemd/system/app.service": 0o644,
	} {
		if got := mode(p); got != want {
			t.Errorf("%s mode %v, want %v", p, got, want)
		}
	}
	for _, gone := range []string{"etc/systemd/system/sockets.target.wants/gone.service"} {
		if _, err := os.Lstat(filepath.Join(root, gone)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s still there (%v)", gone, err)
		}
	}
	a, err := os.Stat(filepath.Join(root, "etc/opt/new/dir/file"))
	must(t, err)
	b, err := os.Stat(filepath.Join(root, "var/lib/new/hard"))
	must(t, err)
	if !os.SameFile(a, b) {
		t.Error("hard link is not the same file")
	}
	for link, target := range map[string]string{
		"etc/systemd/system/multi-user.target.wants/old.service": "/etc/systemd/system/old.service",
		"etc/systemd/system/masked.service":                      "/dev/null",
		"etc/systemd/system/multi-user.target.wants/app.service": "/etc/systemd/system/app.service",
	} {
		if got, err := os.Readlink(filepath.Join(root, link)); err != nil || got != target {
			t.Errorf("%s -> %q (%v), want %q", link, got, err, target)
		}
	}
}

// TestApplyTwice is the /var case: the stored config is applied again at
// the next boot over what the first apply left, and must give the same
// node without error.
func TestApplyTwice(t *testing.T) {
	data, err := os.ReadFile("../../testdata/ignition/35-links.ign")
	must(t, err)
	plan, err := Prepare(context.Background(), data, testOptions)
	must(t, err)
	root := newRoot(t)
	first, err := Apply(plan, root)
	must(t, err)
	after := snapshot(t, root)
	second, err := Apply(plan, root)
	must(t, err)
	assertSame(t, after, snapshot(t, root))
	if managedString(first.Managed) != managedString(second.Managed) {
		t.Errorf("second apply differs:\n%s\n%s", managedString(first.Managed), managedString(second.Managed))
	}
}

func managedString(ms []Managed) string { return strings.Join(managedLines(ms), "\n") }

// TestApplyDirectoryModes checks that a directory entry without a mode
// leaves an image directory's mode alone (the sticky /var/tmp) and that a
// sticky mode is applied as the POSIX bit.
func TestApplyDirectoryModes(t *testing.T) {
	data, err := os.ReadFile("../../testdata/ignition/36-directory-modes.ign")
	must(t, err)
	plan, err := Prepare(context.Background(), data, testOptions)
	must(t, err)
	root := newRoot(t)
	_, err = Apply(plan, root)
	must(t, err)
	for p, want := range map[string]fs.FileMode{
		"var/tmp":          fs.ModeDir | fs.ModeSticky | 0o777,
		"var/lib/shared":   fs.ModeDir | fs.ModeSticky | 0o777,
		"var/lib/private":  fs.ModeDir | 0o700,
		"var/lib/existing": fs.ModeDir | 0o711,
	} {
		fi, err := os.Lstat(filepath.Join(root, p))
		must(t, err)
		if fi.Mode() != want {
			t.Errorf("%s mode %v, want %v", p, fi.Mode(), want)
		}
	}
	if os.Geteuid() == 0 {
		fi, err := os.Lstat(filepath.Join(root, "var/lib/owned"))
		must(t, err)
		if uid, gid := ownerOf(fi); uid != 1000 || gid != 1000 {
			t.Errorf("/var/lib/owned owned by %d:%d, want 1000:1000", uid, gid)
		}
	}
}

func TestApplyBadRoot(t *testing.T) {
	plan := preparePlan(t, `{"ignition":{"version":"3.5.0"}}`)
	if _, err := Apply(plan, filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("apply into a missing root succeeded")
	}
	if _, err := Apply(nil, t.TempDir()); err == nil {
		t.Error("apply of a nil plan succeeded")
	}
}

// TestApplyUnprivileged takes the path of an apply that cannot chown (the
// tests may run as root in CI): owners are skipped, everything else holds.
func TestApplyUnprivileged(t *testing.T) {
	plan := preparePlan(t, replacing)
	root := newRoot(t)
	owner := func(p string) [2]int {
		fi, err := os.Lstat(filepath.Join(root, p))
		must(t, err)
		uid, gid := ownerOf(fi)
		return [2]int{uid, gid}
	}
	before := owner("var/lib/existing")
	applied, err := apply(plan, root, applyHooks{failAt: -1, chown: false})
	must(t, err)
	checkApplied(t, root, plan, applied)
	if after := owner("var/lib/existing"); after != before {
		t.Errorf("owner changed without chown: %v -> %v", before, after)
	}
}

// TestApplyOwners checks owners by name and id when the test can chown.
func TestApplyOwners(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown (CI runs as root); TestApplyUnprivileged covers the non-root path")
	}
	plan := preparePlan(t, replacing)
	root := newRoot(t)
	_, err := Apply(plan, root)
	must(t, err)
	for p, want := range map[string][2]int{
		"etc/opt/image/default.toml": {1000, 0},
		"var/lib/existing":           {0, 1000},
		"etc/opt/hostname":           {0, 0},
	} {
		fi, err := os.Lstat(filepath.Join(root, p))
		must(t, err)
		if uid, gid := ownerOf(fi); uid != want[0] || gid != want[1] {
			t.Errorf("%s owned by %d:%d, want %d:%d", p, uid, gid, want[0], want[1])
		}
	}
}
