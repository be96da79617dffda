package network

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A modules.dep as depmod writes it for a Debian kernel: each line lists the
// whole dependency closure, most basic last.
const testModulesDep = `kernel/net/llc/llc.ko.xz:
kernel/net/802/stp.ko.xz: kernel/net/llc/llc.ko.xz
kernel/net/bridge/bridge.ko.xz: kernel/net/802/stp.ko.xz kernel/net/llc/llc.ko.xz
kernel/net/bridge/br_netfilter.ko.xz: kernel/net/bridge/bridge.ko.xz kernel/net/802/stp.ko.xz kernel/net/llc/llc.ko.xz
kernel/fs/overlayfs/overlay.ko.xz:
kernel/drivers/net/dummy-test.ko:

kernel/net/netfilter/x_tables.ko.xz:
`

const testModulesBuiltin = `kernel/fs/ext4/ext4.ko
kernel/net/ipv4/tcp_cubic.ko
`

func TestModuleName(t *testing.T) {
	for p, want := range map[string]string{
		"kernel/net/bridge/br_netfilter.ko.xz": "br_netfilter",
		"kernel/fs/overlayfs/overlay.ko":       "overlay",
		"kernel/drivers/net/dummy-test.ko.zst": "dummy_test",
		"dummy-test":                           "dummy_test",
		"br_netfilter":                         "br_netfilter",
	} {
		if got := ModuleName(p); got != want {
			t.Errorf("ModuleName(%q) = %q, want %q", p, got, want)
		}
	}
}

func TestLoadOrder(t *testing.T) {
	ix, err := ParseModuleIndex(strings.NewReader(testModulesDep), strings.NewReader(testModulesBuiltin))
	if err != nil {
		t.Fatal(err)
	}
	order, err := ix.LoadOrder("br_netfilter", "overlay", "ext4", "bridge", "dummy-test")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range order {
		s := f.Name + " for " + f.For
		if f.Builtin {
			s += " (builtin)"
		} else {
			s += " " + f.Path
		}
		got = append(got, s)
	}
	want := []string{
		"llc for br_netfilter kernel/net/llc/llc.ko.xz",
		"stp for br_netfilter kernel/net/802/stp.ko.xz",
		"bridge for br_netfilter kernel/net/bridge/bridge.ko.xz",
		"br_netfilter for br_netfilter kernel/net/bridge/br_netfilter.ko.xz",
		"overlay for overlay kernel/fs/overlayfs/overlay.ko.xz",
		"ext4 for ext4 (builtin)",
		"dummy_test for dummy_test kernel/drivers/net/dummy-test.ko",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("load order:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestLoadOrderFollowsEachDependencysLine(t *testing.T) {
	// A modules.dep listing only direct dependencies still loads everything,
	// deepest first.
	dep := "a.ko: b.ko\nb.ko: c.ko\nc.ko:\n"
	ix, err := ParseModuleIndex(strings.NewReader(dep), nil)
	if err != nil {
		t.Fatal(err)
	}
	order, err := ix.LoadOrder("a")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range order {
		names = append(names, f.Name)
	}
	if strings.Join(names, " ") != "c b a" {
		t.Errorf("order %v, want c b a", names)
	}
}

func TestLoadOrderErrors(t *testing.T) {
	for _, tc := range []struct{ dep, name, want string }{
		{testModulesDep, "nf_tables", "kernel module nf_tables is in neither modules.dep nor modules.builtin"},
		{"a.ko: missing.ko\n", "a", "kernel module a needs missing, which is in neither modules.dep nor modules.builtin"},
		{"a.ko: b.ko\nb.ko: a.ko\n", "a", "kernel module a: modules.dep has a dependency cycle through a"},
	} {
		ix, err := ParseModuleIndex(strings.NewReader(tc.dep), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ix.LoadOrder(tc.name); err == nil || err.Error() != tc.want {
			t.Errorf("LoadOrder(%s) = %v, want %s", tc.name, err, tc.want)
		}
	}
}

func TestParseModuleIndexRejectsGarbage(t *testing.T) {
	_, err := ParseModuleIndex(strings.NewReader("a.ko:\nthis is not a dep line\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "modules.dep line 2") {
		t.Fatalf("err = %v", err)
	}
}

// fakeKernel stands in for finit_module: it records what was inserted and
// answers EEXIST for modules already loaded.
type fakeKernel struct {
	root     string
	loaded   map[string]bool
	inserted []string
	fail     map[string]error
}

func (k *fakeKernel) insert(p string) error {
	rel, _ := filepath.Rel(k.root, p)
	if _, err := os.Stat(p); err != nil {
		return err
	}
	name := ModuleName(p)
	if err := k.fail[name]; err != nil {
		return err
	}
	if k.loaded[name] {
		return fmt.Errorf("finit_module: %w", unix.EEXIST)
	}
	k.loaded[name] = true
	k.inserted = append(k.inserted, rel)
	return nil
}

// moduleRoot lays out a kernel's module directory in a temporary root.
func moduleRoot(t *testing.T, libDir, release string, builtin bool) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, libDir, release)
	for _, line := range strings.Split(testModulesDep, "\n") {
		p, _, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("not really a module"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "modules.dep"), []byte(testModulesDep), 0o644); err != nil {
		t.Fatal(err)
	}
	if builtin {
		if err := os.WriteFile(filepath.Join(dir, "modules.builtin"), []byte(testModulesBuiltin), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestModulesLoad(t *testing.T) {
	const release = "6.12.48+deb13-amd64"
	root := moduleRoot(t, "usr/lib/modules", release, true)
	k := &fakeKernel{root: root, loaded: map[string]bool{"stp": true}}
	var log []string
	m := Modules{Root: root, Release: release, Insert: k.insert,
		Logf: func(f string, a ...any) { log = append(log, fmt.Sprintf(f, a...)) }}
	if err := m.Load("br_netfilter", "overlay", "ext4"); err != nil {
		t.Fatal(err)
	}
	// Loading again is a no-op that succeeds.
	if err := m.Load(RequiredModules()...); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("usr/lib/modules", release)
	want := []string{
		filepath.Join(dir, "kernel/net/llc/llc.ko.xz"),
		filepath.Join(dir, "kernel/net/bridge/bridge.ko.xz"),
		filepath.Join(dir, "kernel/net/bridge/br_netfilter.ko.xz"),
		filepath.Join(dir, "kernel/fs/overlayfs/overlay.ko.xz"),
	}
	if !reflect.DeepEqual(k.inserted, want) {
		t.Errorf("inserted:\n%s\nwant:\n%s", strings.Join(k.inserted, "\n"), strings.Join(want, "\n"))
	}
	wantLog := []string{
		"network: loaded kernel module llc (needed by br_netfilter)",
		"network: kernel module stp (needed by br_netfilter) already loaded",
		"network: loaded kernel module bridge (needed by br_netfilter)",
		"network: loaded kernel module br_netfilter",
		"network: loaded kernel module overlay",
		"network: kernel module ext4 is built in",
	}
	if got := strings.Join(log[:len(wantLog)], "\n"); got != strings.Join(wantLog, "\n") {
		t.Errorf("log:\n%s\nwant:\n%s", got, strings.Join(wantLog, "\n"))
	}
}

func TestModulesLoadFromLibModulesWithoutBuiltin(t *testing.T) {
	const release = "6.1.0-30-amd64"
	root := moduleRoot(t, "lib/modules", release, false)
	k := &fakeKernel{root: root, loaded: map[string]bool{}}
	if err := (Modules{Root: root, Release: release, Insert: k.insert}).Load("overlay"); err != nil {
		t.Fatal(err)
	}
	if len(k.inserted) != 1 || !strings.HasSuffix(k.inserted[0], "overlay.ko.xz") {
		t.Errorf("inserted %v", k.inserted)
	}
	// Without modules.builtin, a built-in module cannot be told from a missing one.
	err := (Modules{Root: root, Release: release, Insert: k.insert}).Load("ext4")
	if err == nil || !strings.Contains(err.Error(), "kernel module ext4 is in neither modules.dep nor modules.builtin") {
		t.Errorf("err = %v", err)
	}
}

func TestModulesLoadErrorsNameTheModule(t *testing.T) {
	const release = "6.12.48+deb13-amd64"
	root := moduleRoot(t, "usr/lib/modules", release, true)
	k := &fakeKernel{root: root, loaded: map[string]bool{}, fail: map[string]error{"bridge": unix.ENOEXEC}}
	err := (Modules{Root: root, Release: release, Insert: k.insert}).Load("br_netfilter")
	if !errors.Is(err, unix.ENOEXEC) || !strings.Contains(err.Error(), "network: loading kernel module bridge (needed by br_netfilter) from "+root) {
		t.Errorf("err = %v", err)
	}

	err = (Modules{Root: root, Release: "5.10.0-other", Insert: k.insert}).Load("overlay")
	if err == nil || !strings.Contains(err.Error(), "network: loading kernel modules overlay: no modules.dep for kernel 5.10.0-other under "+root) {
		t.Errorf("err = %v", err)
	}
}
