package registry

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/drover-os/drover/image/oci"
)

// goBin finds the go command; go test puts GOROOT/bin first on PATH.
func goBin(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the harness programs: %v", err)
	}
	return p
}

func TestBuildAndPushPullBack(t *testing.T) {
	ctx := context.Background()
	reg, err := Start(ctx, "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()

	digests, err := BuildAndPush(ctx, reg, goBin(t), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pushed: %v", digests)
	if len(digests) != 2 {
		t.Fatalf("BuildAndPush returned %d digests, want 2: %v", len(digests), digests)
	}

	bins := map[string][]byte{}
	for _, c := range []struct{ ref, program string }{
		{HelloImage, "hello"}, {ProbeImage, "probe"},
	} {
		ref, err := name.NewTag(reg.Addr()+"/"+c.ref, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := remote.Index(ref, remote.WithContext(ctx))
		if err != nil {
			t.Fatalf("pulling the index %s: %v", ref, err)
		}
		if d, _ := idx.Digest(); d.String() != digests[c.ref] {
			t.Errorf("%s: pulled digest %s, pushed %s", c.ref, d, digests[c.ref])
		}
		if mt, _ := idx.MediaType(); mt != types.OCIImageIndex {
			t.Errorf("%s: media type %s, want %s", c.ref, mt, types.OCIImageIndex)
		}
		im, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		var platforms []string
		for _, m := range im.Manifests {
			if m.Platform == nil {
				t.Fatalf("%s: manifest %s has no platform", c.ref, m.Digest)
			}
			platforms = append(platforms, m.Platform.String())
			// Pulled by platform, as a node's containerd does.
			img, err := remote.Image(ref, remote.WithContext(ctx), remote.WithPlatform(*m.Platform))
			if err != nil {
				t.Fatalf("pulling %s for %s: %v", ref, m.Platform, err)
			}
			if d, _ := img.Digest(); d != m.Digest {
				t.Errorf("%s for %s: pulled %s, the index names %s", c.ref, m.Platform, d, m.Digest)
			}
			bin := checkProgramImage(t, c.ref, img, c.program, m.Platform.Architecture)
			if m.Platform.Architecture == runtime.GOARCH {
				bins[c.program] = bin
			}
		}
		if got := strings.Join(platforms, " "); got != "linux/amd64 linux/arm64" {
			t.Errorf("%s: index platforms %q, want linux/amd64 linux/arm64", c.ref, got)
		}
	}

	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Logf("not running the programs: host is %s/%s, images are linux/amd64", runtime.GOOS, runtime.GOARCH)
		return
	}
	dir := t.TempDir()
	for prog, b := range bins {
		if err := os.WriteFile(filepath.Join(dir, prog), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	runHello(t, filepath.Join(dir, "hello"))
}

// checkProgramImage verifies the manifest, config and single layer of a
// harness image and returns the binary it carries.
func checkProgramImage(t *testing.T, ref string, img v1.Image, program, goarch string) []byte {
	t.Helper()
	if mt, _ := img.MediaType(); mt != types.OCIManifestSchema1 {
		t.Errorf("%s: manifest media type %s, want %s", ref, mt, types.OCIManifestSchema1)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatalf("%s: reading config: %v", ref, err)
	}
	if cfg.OS != "linux" || cfg.Architecture != goarch {
		t.Errorf("%s: platform %s/%s, want linux/%s", ref, cfg.OS, cfg.Architecture, goarch)
	}
	if want := []string{"/" + program}; !slices.Equal(cfg.Config.Entrypoint, want) {
		t.Errorf("%s: entrypoint %q, want %q", ref, cfg.Config.Entrypoint, want)
	}
	if !cfg.Created.Time.Equal(Epoch) {
		t.Errorf("%s: created %v, want %v", ref, cfg.Created.Time, Epoch)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%s: %d layers (err %v), want 1", ref, len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatalf("%s: opening layer: %v", ref, err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	hdr, err := tr.Next()
	if err != nil {
		t.Fatalf("%s: reading layer: %v", ref, err)
	}
	if hdr.Name != program || hdr.Typeflag != tar.TypeReg || hdr.Mode&0o7777 != 0o755 ||
		hdr.Uid != 0 || hdr.Gid != 0 || !hdr.ModTime.Equal(Epoch) {
		t.Errorf("%s: layer entry %q type %c mode %o uid %d gid %d mtime %v; want %q regular 755 0 0 %v",
			ref, hdr.Name, hdr.Typeflag, hdr.Mode, hdr.Uid, hdr.Gid, hdr.ModTime, program, Epoch)
	}
	bin, err := io.ReadAll(tr)
	if err != nil {
		t.Fatalf("%s: reading /%s: %v", ref, program, err)
	}
	if _, err := tr.Next(); err != io.EOF {
		t.Errorf("%s: layer has more than one entry (next: %v)", ref, err)
	}
	checkStaticELF(t, ref, bin, goarch)
	return bin
}

func checkStaticELF(t *testing.T, ref string, bin []byte, goarch string) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		t.Fatalf("%s: binary is not ELF: %v", ref, err)
	}
	if want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[goarch]; f.Machine != want {
		t.Errorf("%s: %s binary machine %v, want %v", ref, goarch, f.Machine, want)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s: binary has a program interpreter; want a static binary", ref)
		}
	}
}

func runHello(t *testing.T, path string) {
	out, err := exec.Command(path).Output()
	if err != nil {
		t.Fatalf("running hello: %v", err)
	}
	host, _ := os.Hostname()
	if want := HelloGreeting + "\nhostname: " + host + "\n"; string(out) != want {
		t.Errorf("hello printed %q, want %q", out, want)
	}
}

// TestImagesReproducible builds the programs twice in different directories
// and requires identical image digests: the build directory must not leak in.
// Both builds share the Go build cache; the integration test also rebuilds
// with an empty cache.
func TestImagesReproducible(t *testing.T) {
	ctx := context.Background()
	first := imageDigests(t, ctx, t.TempDir())
	second := imageDigests(t, ctx, t.TempDir())
	t.Logf("digests: %v", first)
	for prog, d := range first {
		if second[prog] != d {
			t.Errorf("%s: digest %s then %s", prog, d, second[prog])
		}
	}
	if len(first) != 4 || len(second) != 4 {
		t.Errorf("built %d and %d program images, want hello and probe for amd64 and arm64", len(first), len(second))
	}
}

func imageDigests(t *testing.T, ctx context.Context, workDir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, goarch := range Arches {
		bins, err := BuildPrograms(ctx, goBin(t), workDir, goarch)
		if err != nil {
			t.Fatal(err)
		}
		for prog, b := range bins {
			img, err := oci.ProgramImage(prog, b, goarch, oci.GzipLayers)
			if err != nil {
				t.Fatal(err)
			}
			d, err := img.Digest()
			if err != nil {
				t.Fatal(err)
			}
			out[prog+" linux/"+goarch] = d.String()
		}
	}
	return out
}

func TestBuildProgramsBadGo(t *testing.T) {
	_, err := BuildPrograms(context.Background(), filepath.Join(t.TempDir(), "no-go"), t.TempDir(), "amd64")
	if err == nil || !strings.Contains(err.Error(), "no-go") {
		t.Fatalf("BuildPrograms with a missing go command: err = %v, want an error naming it", err)
	}
}

// TestBuildProgramsRelativeWorkDir: a relative work directory (what `drover
// smoke out/x.raw` derives from a relative image path) must work, although
// the go command runs in another directory.
func TestBuildProgramsRelativeWorkDir(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.Mkdir("work", 0o755); err != nil {
		t.Fatal(err)
	}
	bins, err := BuildPrograms(context.Background(), goBin(t), "work", "amd64")
	if err != nil {
		t.Fatal(err)
	}
	if len(bins["probe"]) == 0 || len(bins["hello"]) == 0 {
		t.Errorf("built %d programs, want probe and hello among them", len(bins))
	}
}
