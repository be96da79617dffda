//go:build integration

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLockEcsNodeIsReproducible resolves the default recipe against the
// configured mirror and the Go module proxy twice, from scratch, and
// requires byte-identical lock files.
func TestLockEcsNodeIsReproducible(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "recipes", "ecs-node.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cacheDir := filepath.Join(t.TempDir(), "cache")
	var locks [][]byte
	for i := 0; i < 2; i++ {
		dir := t.TempDir()
		r := filepath.Join(dir, "ecs-node.yaml")
		os.WriteFile(r, src, 0o644)
		_, errOut, code := drover(t, "lock", r, "--cache", cacheDir)
		if code != 0 {
			t.Fatalf("lock run %d failed:\n%s", i+1, errOut)
		}
		data, err := os.ReadFile(r + ".lock")
		if err != nil {
			t.Fatal(err)
		}
		// The header names the recipe path, which differs between the temp dirs.
		data = bytes.ReplaceAll(data, []byte(r), []byte("ecs-node.yaml"))
		locks = append(locks, data)
		t.Logf("run %d:\n%s", i+1, errOut)
	}
	if !bytes.Equal(locks[0], locks[1]) {
		t.Fatalf("two lock runs differ")
	}
	text := string(locks[0])
	for _, want := range []string{"\ndeb runc ", "\ndeb systemd ", "\ndeb libc6 ", "\ndeb linux-image-cloud-amd64 ",
		"\ngo kubelet k8s.io/kubernetes@v1.37.2 k8s.io/kubernetes/cmd/kubelet ", "\ngosum kubelet k8s.io/api v0.37.2 h1:",
		"\ngomod kubelet replace k8s.io/api => k8s.io/api v0.37.2\n",
		"\ngo containerd github.com/containerd/containerd/v2@v2.4.2 github.com/containerd/containerd/v2/cmd/containerd "} {
		if !strings.Contains(text, want) {
			t.Errorf("lock lacks %q", strings.TrimSpace(want))
		}
	}
	if strings.Contains(text, "\ndeb containerd ") {
		t.Error("lock has Debian's containerd: the recipe builds containerd 2.x from source")
	}
	t.Logf("lock: %d lines", strings.Count(text, "\n"))
}
