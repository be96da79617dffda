package registry

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/drover-os/drover/image/oci"
)

// Image references pushed by BuildAndPush, relative to the registry.
const (
	HelloImage = "drover/hello:v1"
	// ProbeImage inspects the node for the smoke test (see programs/probe).
	ProbeImage = "drover/probe:v1"
)

// HelloGreeting is the first line the hello image prints.
const HelloGreeting = "hello from drover"

// Epoch stamps every file and the creation time of the harness images, so the
// digests depend only on the program sources and the Go toolchain.
var Epoch = oci.Epoch

// The programs are embedded rather than found next to this file so that a
// drover binary built elsewhere can still build them.
//
//go:embed programs
var programs embed.FS

// programsModule is the go.mod of the throwaway module the programs are built
// in: the programs use the standard library only, so drover's own module
// (and its dependencies) is not needed. Its path is the directory's import
// path in drover's module, so a package shared by the programs (cisevidence)
// has one import path in both modules and drover's own code can import it.
const programsModule = "module github.com/drover-os/drover/harness/registry/programs\n\ngo 1.26\n"

// programNames lists the embedded programs (the directories with a
// main.go; the others are packages they share), sorted.
func programNames() ([]string, error) {
	entries, err := programs.ReadDir("programs")
	if err != nil {
		return nil, fmt.Errorf("listing the embedded harness programs: %w", err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if _, err := fs.Stat(programs, "programs/"+e.Name()+"/main.go"); err == nil {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// Arches are the architectures every harness image is built for, so
// that nodes of each architecture drover builds pull the same references.
var Arches = oci.Arches

// BuildPrograms compiles every embedded program into a static
// linux/<goarch> binary with goBin (the go command) and returns the
// binaries by program name. The throwaway module lives in a temporary directory under workDir
// ("" means the system default) and is removed afterwards. -trimpath keeps
// that directory out of the binaries, so equal sources and toolchain give
// equal bytes.
func BuildPrograms(ctx context.Context, goBin, workDir, goarch string) (map[string][]byte, error) {
	dir, err := os.MkdirTemp(workDir, "drover-programs-")
	if err != nil {
		return nil, fmt.Errorf("creating a build directory for the harness images in %q: %w", workDir, err)
	}
	defer os.RemoveAll(dir)
	// The go command runs in src, so a relative workDir would name another
	// directory there: every path handed to it is absolute.
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, fmt.Errorf("resolving the harness images' build directory: %w", err)
	}
	src := filepath.Join(dir, "src")
	if err := writeModule(src); err != nil {
		return nil, err
	}
	out := filepath.Join(dir, "bin")
	if err := os.Mkdir(out, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", out, err)
	}
	names, err := programNames()
	if err != nil {
		return nil, err
	}
	args := []string{"build", "-trimpath", "-ldflags=-s -w", "-o", out + string(filepath.Separator)}
	for _, n := range names {
		args = append(args, "./"+n)
	}
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = src
	// The inherited environment keeps GOCACHE, HOME and PATH; the rest is
	// pinned because a caller's GOFLAGS, GOOS or workspace would change or
	// break the build.
	cmd.Env = append(os.Environ(),
		"CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch, "GOAMD64=v1", "GOARM64=v8.0",
		"GOTOOLCHAIN=local", "GOWORK=off", "GOFLAGS=-buildvcs=false", "GOEXPERIMENT=",
	)
	if outp, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building the harness image programs for linux/%s (%s %v in %s): %w\n%s (check that %s is a working Go toolchain)",
			goarch, goBin, args, src, err, outp, goBin)
	}
	bins := make(map[string][]byte, len(names))
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(out, n))
		if err != nil {
			return nil, fmt.Errorf("reading the built program %s: %w", n, err)
		}
		bins[n] = b
	}
	return bins, nil
}

// writeModule copies the embedded programs to dir and adds the go.mod.
func writeModule(dir string) error {
	sub, err := fs.Sub(programs, "programs")
	if err != nil {
		return fmt.Errorf("opening the embedded programs: %w", err)
	}
	if err := os.CopyFS(dir, sub); err != nil {
		return fmt.Errorf("writing the harness image programs to %s: %w", dir, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(programsModule), 0o644); err != nil {
		return fmt.Errorf("writing go.mod for the harness image programs in %s: %w", dir, err)
	}
	return nil
}

// pushes maps each reference BuildAndPush pushes to the program it runs.
var pushes = []struct{ ref, repo, tag, program string }{
	{HelloImage, "drover/hello", "v1", "hello"},
	{ProbeImage, "drover/probe", "v1", "probe"},
}

// BuildAndPush builds the harness images (see the package doc) for every
// architecture in Arches with goBin, stamped with Epoch, and pushes each
// as a multi-architecture image index to reg. It returns the index digest
// ("sha256:…") of each reference — what the kubelet reports as a Pod's
// imageID — keyed by the reference relative to the registry (HelloImage,
// ProbeImage).
func BuildAndPush(ctx context.Context, reg *Registry, goBin, workDir string) (map[string]string, error) {
	byArch := map[string]map[string][]byte{} // program → goarch → binary
	for _, goarch := range Arches {
		bins, err := BuildPrograms(ctx, goBin, workDir, goarch)
		if err != nil {
			return nil, err
		}
		for name, bin := range bins {
			if byArch[name] == nil {
				byArch[name] = map[string][]byte{}
			}
			byArch[name][goarch] = bin
		}
	}
	indexes := make(map[string]v1.ImageIndex, len(byArch))
	for name, bins := range byArch {
		idx, err := oci.ProgramIndex(name, bins, oci.GzipLayers)
		if err != nil {
			return nil, err
		}
		indexes[name] = idx
	}
	digests := make(map[string]string, len(pushes))
	for _, p := range pushes {
		idx, ok := indexes[p.program]
		if !ok {
			return nil, fmt.Errorf("pushing %s: program %q is not embedded in harness/registry/programs", p.ref, p.program)
		}
		if err := PushIndex(ctx, reg, p.repo, p.tag, idx); err != nil {
			return nil, err
		}
		d, err := idx.Digest()
		if err != nil {
			return nil, fmt.Errorf("computing the digest of %s: %w", p.ref, err)
		}
		digests[p.ref] = d.String()
	}
	return digests, nil
}
