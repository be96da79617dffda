//go:build integration

package kmod

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// initrdModules is what the builder asks for; on the cloud kernel some are
// built in.
var initrdModules = strings.Fields("virtio_blk virtio_pci nvme dm_verity erofs overlay ext4")

// TestIntegrationTrixieCloudKernel builds the index of trixie's cloud kernel
// and checks it with real kmod tools: trixie's own depmod (kmod 34, run from
// the archive) must write the same bytes; the host's depmod (bookworm's
// kmod 30 on the build machines) the same text files and the same tries in
// its older layout; modprobe and modinfo of both must read our index.
func TestIntegrationTrixieCloudKernel(t *testing.T) {
	host := func(tool string, args ...string) *exec.Cmd { return exec.Command(kmodTool(t, tool), args...) }
	trixieTool := trixieKmod(t)
	kt := trixieCloudKernel(t)

	var before, after syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	start := time.Now()
	idx, err := Build(kt.files, kt.files["modules.builtin"], kt.files["modules.builtin.modinfo"], 0)
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Since(start)
	syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
	t.Logf("Build of %s: %d modules in %s (%s CPU on %d CPUs)", kt.kver, len(idx.modules), wall.Round(time.Millisecond), cpu.Round(time.Millisecond), runtime.GOMAXPROCS(0))
	ours := idx.Files()

	oursRoot := t.TempDir()
	oursDir := writeTree(t, oursRoot, kt.kver, kt.files)
	writeTree(t, oursRoot, kt.kver, ours)
	noConf := t.TempDir() // -C: no host depmod.d or modprobe.d

	compareWithDepmod(t, "trixie", trixieTool, kt, ours, noConf, true)
	hostVersion := kmodVersion(t, host("depmod", "--version"))
	// kmod 34 writes the tries in pre-order; older depmods write the same
	// tries children first, so only their content can be compared.
	compareWithDepmod(t, "host kmod "+strconv.Itoa(hostVersion), host, kt, ours, noConf, hostVersion >= 34)

	for _, tool := range []struct {
		name string
		run  func(string, ...string) *exec.Cmd
	}{{"host", host}, {"trixie", trixieTool}} {
		for _, name := range append(strings.Fields("dm_verity overlay br_netfilter nf_tables erofs"), initrdModules...) {
			out, err := tool.run("modprobe", "-C", noConf, "-d", oursRoot, "-S", kt.kver, "--show-depends", name).CombinedOutput()
			if err != nil {
				t.Errorf("%s modprobe --show-depends %s: %v\n%s", tool.name, name, err, out)
				continue
			}
			want := showDepends(t, string(out), oursDir)
			got, err := idx.LoadOrder([]string{name})
			if err != nil {
				t.Errorf("LoadOrder(%s): %v", name, err)
			} else if !reflect.DeepEqual(got, want) {
				t.Errorf("LoadOrder(%s) =\n%q\n%s modprobe:\n%q", name, got, tool.name, want)
			}
		}
		checkModinfo(t, tool.name, tool.run, kt, oursRoot, oursDir)
	}

	order, err := idx.LoadOrder(initrdModules)
	if err != nil {
		t.Fatal(err)
	}
	var builtin []string
	for _, name := range initrdModules {
		if idx.IsBuiltin(name) {
			builtin = append(builtin, name)
		}
	}
	t.Logf("initrd %s: built in: %s; load order:\n  %s", strings.Join(initrdModules, " "), strings.Join(builtin, " "), strings.Join(order, "\n  "))
}

// compareWithDepmod runs a depmod on the package's files alone and compares
// every file it writes with ours: byte for byte, or (exact false) the text
// files byte for byte and the .bin tries by content.
func compareWithDepmod(t *testing.T, which string, run func(string, ...string) *exec.Cmd, kt *kernelTree, ours map[string][]byte, noConf string, exact bool) {
	t.Helper()
	root := t.TempDir()
	dir := writeTree(t, root, kt.kver, kt.files)
	if out, err := run("depmod", "-C", noConf, "-b", root, kt.kver).CombinedOutput(); err != nil {
		t.Fatalf("%s depmod: %v\n%s", which, err, out)
	}
	written, _ := filepath.Glob(filepath.Join(dir, "modules.*"))
	seen := map[string]bool{}
	for _, p := range written {
		name := filepath.Base(p)
		if _, input := kt.files[name]; input {
			continue // modules.order, modules.builtin, modules.builtin.modinfo
		}
		seen[name] = true
		want, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := ours[name]
		switch {
		case !ok:
			t.Errorf("%s depmod writes %s, we do not", which, name)
		case bytes.Equal(got, want):
			t.Logf("%s: identical to %s depmod's (%d bytes)", name, which, len(got))
		case exact || !strings.HasSuffix(name, ".bin"):
			t.Errorf("%s differs from %s depmod's: %d bytes, depmod %d bytes (%s)", name, which, len(got), len(want), firstDiff(got, want))
		default:
			g, err1 := decodeIndex(got)
			w, err2 := decodeIndex(want)
			if err1 != nil || err2 != nil || !reflect.DeepEqual(g, w) {
				t.Errorf("%s: content differs from %s depmod's (%v, %v)", name, which, err1, err2)
			} else {
				t.Logf("%s: same %d keys as %s depmod's, in its older layout", name, len(g), which)
			}
		}
	}
	for name := range ours {
		if !seen[name] {
			t.Logf("%s: not written by %s depmod (%d bytes from us)", name, which, len(ours[name]))
		}
	}
}

// checkModinfo looks erofs up through our index and compares with ModInfo.
func checkModinfo(t *testing.T, which string, run func(string, ...string) *exec.Cmd, kt *kernelTree, root, dir string) {
	t.Helper()
	out, err := run("modinfo", "-b", root, "-k", kt.kver, "erofs").CombinedOutput()
	if err != nil {
		t.Errorf("%s modinfo erofs: %v\n%s", which, err, out)
		return
	}
	fields := map[string][]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = append(fields[k], strings.TrimSpace(v))
		}
	}
	if want := filepath.Join(dir, "kernel/fs/erofs/erofs.ko.xz"); !slices.Equal(fields["filename"], []string{want}) {
		t.Errorf("%s modinfo erofs: filename %q, want %q", which, fields["filename"], want)
	}
	info, err := ModInfo(kt.files["kernel/fs/erofs/erofs.ko.xz"])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(fields["alias"], info.Aliases) || !slices.Equal(fields["name"], []string{info.Name}) ||
		strings.Join(fields["depends"], ",") != strings.Join(info.Depends, ",") {
		t.Errorf("%s modinfo erofs says name %q alias %q depends %q; ModInfo: %+v", which, fields["name"], fields["alias"], fields["depends"], info)
	}
}

// kmodTool finds a host kmod program; CI installs the Debian package.
func kmodTool(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/sbin"} {
		if p := filepath.Join(dir, name); fileExists(p) {
			return p
		}
	}
	t.Fatalf("%s not found: install the Debian package kmod", name)
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func kmodVersion(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("depmod --version: %v", err)
	}
	m := regexp.MustCompile(`kmod version (\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("depmod --version says %q", out)
	}
	v, _ := strconv.Atoi(string(m[1]))
	return v
}

// showDepends turns `modprobe --show-depends` output into module paths
// relative to dir, each once (modprobe may repeat a module that is both a
// dependency and a soft dependency); "builtin" lines are dropped.
func showDepends(t *testing.T, out, dir string) []string {
	t.Helper()
	var paths []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 0 || f[0] == "builtin":
		case f[0] == "insmod" && len(f) >= 2:
			rel, ok := strings.CutPrefix(f[1], dir+"/")
			if !ok {
				t.Fatalf("modprobe: %q is outside %s", f[1], dir)
			}
			if !slices.Contains(paths, rel) {
				paths = append(paths, rel)
			}
		default:
			t.Fatalf("modprobe: unexpected line %q", line)
		}
	}
	return paths
}

func firstDiff(a, b []byte) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			lo := max(0, i-40)
			return "first difference at byte " + strconv.Itoa(i) + ": ours …" + strings.ToValidUTF8(string(a[lo:min(len(a), i+40)]), "?") +
				"… depmod …" + strings.ToValidUTF8(string(b[lo:min(len(b), i+40)]), "?") + "…"
		}
	}
	return "one is a prefix of the other"
}
