//go:build e2e

package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cavaliergopher/cpio"

	droverinit "github.com/drover-os/drover/agent/boot"
	"github.com/drover-os/drover/harness/qemu"
	"github.com/drover-os/drover/image/build"
	"github.com/drover-os/drover/image/esp"
	"github.com/drover-os/drover/image/initrd"
)

// guestTools are the host programs the guest tests call, copied into the
// guest with their shared libraries.
var guestTools = []string{"losetup", "veritysetup"}

// guestModules are kernel modules the tests need beyond the initrd's own.
var guestModules = []string{"kernel/drivers/block/loop.ko.xz"}

// guestTests boots the minimal image's kernel and initrd (not its disk)
// under QEMU with an extra initrd layer holding the vmtest test binaries,
// runs them as root in the guest and fails on any failure, skip or missing
// test. The last test corrupts a block under drover-init's own verity table:
// the kernel's corruption line and its restart must follow.
func guestTests(t *testing.T, raw string, mf *build.Manifest) {
	start := time.Now()
	dir := t.TempDir()
	ukiFile := espFile(t, raw, mf, esp.UKIPath)
	kernel, imageInitrd := ukiSection(t, ukiFile, ".linux"), ukiSection(t, ukiFile, ".initrd")
	root := rootFS(t, raw, mf)

	var files []initrd.File
	add := func(p string, mode uint32, data []byte) {
		files = append(files, initrd.File{Path: p, Mode: mode, Data: data})
	}
	cfg := initrdConfig(t, imageInitrd)
	for _, rel := range moduleClosure(t, root, cfg.Kernel, guestModules) {
		if contains(cfg.Modules, rel) {
			continue
		}
		data, err := fs.ReadFile(root, path.Join("usr/lib/modules", cfg.Kernel, rel))
		if err != nil {
			t.Fatalf("reading module %s from the image's root: %v", rel, err)
		}
		add(path.Join("/lib/modules", cfg.Kernel, rel), 0o644, data)
		cfg.Modules = append(cfg.Modules, rel)
	}
	cj, err := cfg.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	add(droverinit.ConfigPath, 0o644, cj)

	goBuild(t, "build", "-o", filepath.Join(dir, "guest-init"), "./agent/boot/testdata/vm/guest")
	add("/guest-init", 0o755, readFile(t, filepath.Join(dir, "guest-init")))
	var plan []string
	expect := map[string][]string{}
	for _, p := range guestPackages {
		bin := filepath.Join(dir, p.name+".test")
		goBuild(t, "test", "-c", "-tags", "vmtest", "-o", bin, p.pkg)
		add("/guest/tests/"+p.name+".test", 0o755, readFile(t, bin))
		list := run(t, bin, "-test.list", p.run)
		expect[p.name] = strings.Fields(list)
		if len(expect[p.name]) == 0 {
			t.Fatalf("%s has no tests matching %s", p.pkg, p.run)
		}
		if len(expect[p.name]) == 1 && expect[p.name][0] == p.restart {
			continue // nothing for the first pass
		}
		args := "-test.v -test.count=1 -test.run " + p.run
		if p.restart != "" {
			args += " -test.skip ^" + p.restart + "$"
		}
		plan = append(plan, fmt.Sprintf("%s 1 /guest/tests/%s.test %s", p.name, p.name, args))
	}
	for _, p := range guestPackages {
		if p.restart != "" {
			plan = append(plan, fmt.Sprintf("restart 4 /guest/tests/%s.test -test.v -test.run ^%s$", p.name, p.restart))
		}
	}
	add("/guest/plan", 0o644, []byte(strings.Join(plan, "\n")+"\n"))
	for _, tool := range guestTools {
		files = append(files, hostProgram(t, tool)...)
	}

	var layer bytes.Buffer
	if err := initrd.Write(&layer, dedupe(files), time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	// The kernel unpacks concatenated archives in order, later files
	// replacing earlier ones: the image's initrd, then the test layer.
	initrdPath, kernelPath := filepath.Join(dir, "initrd"), filepath.Join(dir, "vmlinuz")
	writeFile(t, initrdPath, append(append([]byte(nil), imageInitrd...), layer.Bytes()...))
	writeFile(t, kernelPath, kernel)
	t.Logf("guest: kernel %s, initrd %d KiB + test layer %d KiB (prepared in %s)", cfg.Kernel,
		len(imageInitrd)>>10, layer.Len()>>10, time.Since(start).Round(time.Second))

	console := bootGuest(t, kernelPath, initrdPath, mf.Cmdline+" rdinit=/guest-init loglevel=4 panic=-1")
	if problems := checkGuestConsole(console, expect); len(problems) > 0 {
		// The reasons last, after the console, where a log's tail shows them.
		t.Errorf("--- guest console ---\n%s\n--- guest: %d problem(s) ---\n%s", console, len(problems), strings.Join(problems, "\n"))
	} else {
		_, last, _ := strings.Cut(console, "GUEST-RUN restart")
		t.Logf("guest: every test passed; the restart run:\n%s", tail(last, 12))
	}
	t.Logf("guest tests done in %s", time.Since(start).Round(time.Second))
}

// bootGuest boots kernel and initrd directly (no firmware, no disk) and
// returns the console once QEMU exits.
func bootGuest(t *testing.T, kernel, initrdPath, cmdline string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	accel, cpu := "tcg,thread=multi", "max"
	if ok, _ := qemu.KVMUsable(); ok {
		accel, cpu = "kvm", "host"
	}
	cmd := exec.CommandContext(ctx, "qemu-system-x86_64", "-machine", "q35", "-accel", accel, "-cpu", cpu,
		"-smp", "2", "-m", "1024", "-nographic", "-no-reboot", "-nodefaults", "-serial", "stdio",
		"-kernel", kernel, "-initrd", initrdPath, "-append", cmdline)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	console := strings.ReplaceAll(out.String(), "\r", "")
	if err != nil {
		t.Fatalf("qemu (%s): %v\n--- console (last 80 lines) ---\n%s", accel, err, tail(console, 80))
	}
	t.Logf("guest boot and tests: %s under %s", time.Since(start).Round(time.Second), accel)
	return console
}

// initrdConfig reads drover-init's config out of the image's initrd.
func initrdConfig(t *testing.T, img []byte) *droverinit.Config {
	t.Helper()
	c, err := droverinit.Parse(initrdFile(t, img, droverinit.ConfigPath).Data)
	if err != nil {
		t.Fatalf("%s in the image's initrd: %v", droverinit.ConfigPath, err)
	}
	return c
}

// initrdEntry is one entry of the initrd's cpio archive.
type initrdEntry struct {
	Data   []byte
	Mode   os.FileMode
	Target string // a symlink's target
}

// initrdFile reads one entry out of the image's initrd (gzip'd newc cpio,
// read with the cpio library, not drover's writer).
func initrdFile(t *testing.T, img []byte, name string) initrdEntry {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(img))
	if err != nil {
		t.Fatalf("the image's initrd: %v", err)
	}
	r := cpio.NewReader(zr)
	for {
		h, err := r.Next()
		if err != nil {
			t.Fatalf("the image's initrd has no %s: %v", name, err)
		}
		if "/"+strings.TrimPrefix(h.Name, "/") == name {
			b, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			return initrdEntry{Data: b, Mode: h.FileInfo().Mode(), Target: h.Linkname}
		}
	}
}

// moduleClosure returns mods with the modules they depend on first, from
// the image's modules.dep.
func moduleClosure(t *testing.T, root fs.FS, kernel string, mods []string) []string {
	t.Helper()
	dep, err := fs.ReadFile(root, path.Join("usr/lib/modules", kernel, "modules.dep"))
	if err != nil {
		t.Fatalf("reading modules.dep from the image's root: %v", err)
	}
	deps := map[string][]string{}
	for _, line := range strings.Split(string(dep), "\n") {
		if m, d, ok := strings.Cut(line, ":"); ok {
			deps[m] = strings.Fields(d)
		}
	}
	var out []string
	for _, m := range mods {
		d, ok := deps[m]
		if !ok {
			t.Fatalf("module %s is not in the image's modules.dep", m)
		}
		// modules.dep lists the full closure, the module's direct needs first.
		for i := len(d) - 1; i >= 0; i-- {
			if !contains(out, d[i]) {
				out = append(out, d[i])
			}
		}
		out = append(out, m)
	}
	return out
}

// hostProgram returns a host program (by its Debian path) and the shared
// libraries ldd says it loads, at their own paths, for the guest's /guest/bin.
func hostProgram(t *testing.T, name string) []initrd.File {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found: run scripts/host-setup.sh", name)
	}
	files := []initrd.File{{Path: "/guest/bin/" + name, Mode: 0o755, Data: readFile(t, p)}}
	for _, line := range strings.Split(run(t, "ldd", p), "\n") {
		f := strings.Fields(line)
		var lib string
		switch {
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			lib = f[2]
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			lib = f[0]
		default:
			continue
		}
		files = append(files, initrd.File{Path: lib, Mode: 0o755, Data: readFile(t, lib)})
	}
	return files
}

// dedupe keeps the first of files with the same path (libraries shared by
// two programs).
func dedupe(files []initrd.File) []initrd.File {
	seen := map[string]bool{}
	var out []initrd.File
	for _, f := range files {
		if !seen[path.Clean(f.Path)] {
			seen[path.Clean(f.Path)] = true
			out = append(out, f)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// goBuild runs go build or go test -c in the repository, static.
func goBuild(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
