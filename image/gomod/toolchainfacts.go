package gomod

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/drover-os/drover/internal/filehash"
)

// Toolchain is what a provenance says about the Go toolchain that built: its
// version, where it came from and the digest of the go binary that ran.
type Toolchain struct {
	Version string `json:"version"`
	// URI is where the toolchain came from: the toolchain module the go
	// command fetched (pkg:golang/golang.org/toolchain@v0.0.1-go1.26.8.linux-amd64,
	// checked by the go command against go.sum's database), or, for one
	// installed on the build host, file:// and its GOROOT.
	URI string `json:"uri"`
	// GoSHA256 is the sha256 of $GOROOT/bin/go, the go binary that ran.
	GoSHA256 string `json:"goSHA256"`
	// ZipSHA256 is the sha256 of the toolchain module's zip in the module
	// cache, when the go command fetched it and the zip is still there.
	ZipSHA256 string `json:"zipSHA256,omitempty"`
}

// toolchainModule is the module path the go command fetches toolchains as.
const toolchainModule = "golang.org/toolchain"

// ToolchainFacts asks the toolchain env selects (the lock's, through
// GOTOOLCHAIN) where it lives, and describes it.
func ToolchainFacts(ctx context.Context, env Env) (*Toolchain, error) {
	g, err := env.prepare(ctx)
	if err != nil {
		return nil, err
	}
	vals, err := g.env(ctx, env.workDir(), "GOROOT", "GOMODCACHE")
	if err != nil {
		return nil, fmt.Errorf("asking the go command where toolchain %s lives: %w", g.version, err)
	}
	return describeToolchain(g.version, vals["GOROOT"], vals["GOMODCACHE"])
}

// describeToolchain reads the facts of the toolchain at goroot.
func describeToolchain(version, goroot, modcache string) (*Toolchain, error) {
	sum, err := fileSHA256(filepath.Join(goroot, "bin", "go"))
	if err != nil {
		return nil, fmt.Errorf("Go toolchain %s: %w", version, err)
	}
	t := &Toolchain{Version: version, URI: "file://" + filepath.ToSlash(goroot), GoSHA256: sum}
	// A fetched toolchain is the module's directory in the cache:
	// $GOMODCACHE/golang.org/toolchain@v0.0.1-go1.26.8.linux-amd64.
	if _, modVersion, ok := strings.Cut(filepath.ToSlash(goroot), "/"+toolchainModule+"@"); ok && !strings.Contains(modVersion, "/") {
		t.URI = "pkg:golang/" + toolchainModule + "@" + modVersion
		if modcache != "" {
			zip := filepath.Join(modcache, "cache", "download", filepath.FromSlash(toolchainModule), "@v", modVersion+".zip")
			if sum, err := fileSHA256(zip); err == nil {
				t.ZipSHA256 = sum
			}
		}
	}
	return t, nil
}

func fileSHA256(path string) (string, error) {
	sum, _, err := filehash.SHA256(path)
	return sum, err
}
