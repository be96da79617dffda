//go:build integration

package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestStaticCgoFree builds drover-agent as make build does and checks that it
// is a static ELF without cgo: the image has no toolchain libraries to count
// on beyond what its packages ship, and the agent must not depend on them.
func TestStaticCgoFree(t *testing.T) {
	out := filepath.Join(t.TempDir(), "drover-agent")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatal("drover-agent is dynamically linked (PT_INTERP): something pulled in cgo")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Fatalf("drover-agent imports %v", libs)
	}
	bi, err := exec.Command("go", "version", "-m", out).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"CGO_ENABLED=0"} {
		if !strings.Contains(string(bi), line) {
			t.Errorf("build info lacks %s", line)
		}
	}
	// The agent speaks containerd's API itself (agent/containerd): its
	// client would add 10.6 MB, its API module with grpc-go 6.9 MB. The
	// ACR credential provider is a program of its own: the agent renders
	// its configuration but never links the cloud SDK.
	for mod, why := range map[string]string{
		"github.com/containerd/": "agent/containerd is the agent's containerd client",
		"google.golang.org/grpc": "agent/containerd is the agent's containerd client",
		"github.com/aliyun/":     "the cloud SDK belongs to drover-acr-credential-provider",
	} {
		if strings.Contains(string(bi), "\tdep\t"+mod) {
			t.Errorf("drover-agent links %s (%s):\n%s", mod, why, bi)
		}
	}
	fi, _ := os.Stat(out)
	t.Logf("drover-agent: static, cgo-free ELF, %.1f MiB", float64(fi.Size())/(1<<20))
}
