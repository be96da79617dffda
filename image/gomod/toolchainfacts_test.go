package gomod

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDescribeToolchain: a toolchain the go command fetched is named by its
// module, with the go binary's and the module zip's sha256; one installed
// on the host by its GOROOT. Nothing names a download site it did not come
// from.
func TestDescribeToolchain(t *testing.T) {
	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	cache := t.TempDir()
	const mod = "v0.0.1-go1.26.8.linux-amd64"
	root := filepath.Join(cache, "golang.org", "toolchain@"+mod)
	zip := filepath.Join(cache, "cache", "download", "golang.org", "toolchain", "@v", mod+".zip")
	for path, data := range map[string]string{filepath.Join(root, "bin", "go"): "go binary", zip: "zip"} {
		must(t, os.MkdirAll(filepath.Dir(path), 0o755))
		must(t, os.WriteFile(path, []byte(data), 0o755))
	}
	got, err := describeToolchain("go1.26.8", root, cache)
	must(t, err)
	want := Toolchain{Version: "go1.26.8", URI: "pkg:golang/golang.org/toolchain@" + mod, GoSHA256: sum([]byte("go binary")), ZipSHA256: sum([]byte("zip"))}
	if *got != want {
		t.Errorf("fetched toolchain: %+v\nwant %+v", *got, want)
	}

	local := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(local, "bin"), 0o755))
	must(t, os.WriteFile(filepath.Join(local, "bin", "go"), []byte("host go"), 0o755))
	got, err = describeToolchain("go1.26.8", local, cache)
	must(t, err)
	want = Toolchain{Version: "go1.26.8", URI: "file://" + filepath.ToSlash(local), GoSHA256: sum([]byte("host go"))}
	if *got != want {
		t.Errorf("host toolchain: %+v\nwant %+v", *got, want)
	}

	if _, err := describeToolchain("go1.26.8", t.TempDir(), cache); err == nil || !strings.Contains(err.Error(), "Go toolchain go1.26.8") {
		t.Errorf("no bin/go: %v", err)
	}
}

// TestToolchainFacts: the digest is of the go binary the go command runs
// from, as `go env GOROOT` names it.
func TestToolchainFacts(t *testing.T) {
	ctx := context.Background()
	tc, err := ToolchainFacts(ctx, Env{WorkDir: t.TempDir()})
	must(t, err)
	out, err := exec.Command("go", "env", "GOROOT").Output()
	must(t, err)
	data, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "bin", "go"))
	must(t, err)
	if s := sha256.Sum256(data); tc.GoSHA256 != hex.EncodeToString(s[:]) || !strings.HasPrefix(tc.Version, "go1.") {
		t.Errorf("facts %+v, want the sha256 of %s/bin/go", tc, strings.TrimSpace(string(out)))
	}
	t.Logf("%+v", tc)
}
