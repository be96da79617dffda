//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/harness/qemu"
	"github.com/drover-os/drover/image/build"
)

// repo is the repository root; bin holds drover, drover-agent, drover-init
// built by `make build`.
var repo, _ = filepath.Abs("..")

func bin(name string) string { return filepath.Join(repo, "bin", name) }

// run runs a command, failing the test with its output on error.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out.String())
	}
	t.Logf("%s %s (%s)", filepath.Base(name), strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	return out.String()
}

func fileSHA(t *testing.T, p string) string {
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	io.Copy(h, f)
	return hex.EncodeToString(h.Sum(nil))
}

func readManifest(t *testing.T, p string) *build.Manifest {
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m build.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return &m
}

// extract copies n bytes at off of src into a new file.
func extract(t *testing.T, src string, off, n int64, dst string) {
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := io.Copy(out, io.NewSectionReader(in, off, n)); err != nil {
		t.Fatal(err)
	}
}

// boot starts the image in stateDir and waits for one of the patterns.
func boot(t *testing.T, image, stateDir string, nvme bool, timeout time.Duration, patterns ...string) (*qemu.VM, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	vm, err := qemu.Start(ctx, &qemu.Config{Image: image, StateDir: stateDir, NVMe: nvme, DiskSize: 2 << 30})
	if err != nil {
		t.Fatal(err)
	}
	got, err := vm.WaitFor(ctx, patterns...)
	if err != nil {
		vm.Stop()
		t.Fatalf("%v\n--- serial console (last 60 lines) ---\n%s", err, tail(vm.Log(), 60))
	}
	return vm, got
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
