//go:build integration

package registry

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-os/drover/agent/containerd"
	"github.com/drover-os/drover/image/oci"
)

// upstream is a registry the test mirrors; it never reaches it: hosts.toml
// sends every request to the local registry.
const upstream = "registry.k8s.io"

// namespace keeps the test's containerd objects apart from anything else.
const namespace = "drover-registry-test"

// TestContainerdPullsAndRuns proves the node-side wiring described in the
// package doc with a real containerd: the hello image is pulled under an
// upstream name through a mirror hosts.toml, and by the registry's own
// address and run with runc. Then the sandbox image archive drover build
// ships (image/oci.LayoutTar of cmd/drover-pause) is imported the way the
// agent does, and containerd must list it by name with the index digest
// and the pinned label.
func TestContainerdPullsAndRuns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run containerd")
	}
	containerdBin := needTool(t, "containerd", "containerd")
	ctrBin := needTool(t, "ctr", "containerd")
	needTool(t, "containerd-shim-runc-v2", "containerd")
	needTool(t, "runc", "runc")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var regLog syncBuffer
	reg, err := Start(ctx, "127.0.0.1:0", &regLog)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	digests, err := BuildAndPush(ctx, reg, goBin(t), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}

	// A short directory: the gRPC socket path must fit in sun_path (108 bytes).
	dir, err := os.MkdirTemp("", "drover-ctrd-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	certs := filepath.Join(dir, "certs.d")
	mirror := "http://" + reg.Addr()
	for _, host := range []string{upstream, reg.Addr()} {
		writeFile(t, filepath.Join(certs, host, "hosts.toml"), HostsTOML(mirror))
	}
	sock := filepath.Join(dir, "containerd.sock")
	config := fmt.Sprintf(`version = 2
root = %q
state = %q

[grpc]
  address = %q

[ttrpc]
  address = %q

[plugins."io.containerd.internal.v1.opt"]
  path = %q

[plugins."io.containerd.grpc.v1.cri".registry]
  config_path = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), sock, sock+".ttrpc", filepath.Join(dir, "opt"), certs)
	writeFile(t, filepath.Join(dir, "config.toml"), []byte(config))

	var daemonLog syncBuffer
	daemon := exec.Command(containerdBin, "--config", filepath.Join(dir, "config.toml"))
	daemon.Stdout, daemon.Stderr = &daemonLog, &daemonLog
	if err := daemon.Start(); err != nil {
		t.Fatalf("starting containerd: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- daemon.Wait() }()
	defer func() {
		daemon.Process.Signal(syscall.SIGTERM)
		<-exited
		// The runc shim keeps container state under a fixed root per
		// namespace; remove ours if it is empty (a leftover container would
		// keep it, and is worth seeing).
		os.Remove(filepath.Join("/run/containerd/runc", namespace))
		if t.Failed() {
			t.Logf("containerd log:\n%s\nregistry log:\n%s", daemonLog.String(), regLog.String())
		}
	}()

	ctr := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, ctrBin, append([]string{"--address", sock, "--namespace", namespace}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	waitForContainerd(t, ctx, ctr, exited)

	mirroredRef := upstream + "/" + HelloImage
	if out, err := ctr("images", "pull", "--hosts-dir", certs, mirroredRef); err != nil {
		t.Fatalf("ctr images pull %s through the mirror: %v\n%s", mirroredRef, err, out)
	}
	helloRef := reg.Addr() + "/" + HelloImage
	if out, err := ctr("images", "pull", "--hosts-dir", certs, helloRef); err != nil {
		t.Fatalf("ctr images pull %s: %v\n%s", helloRef, err, out)
	}
	list, err := ctr("images", "ls")
	if err != nil {
		t.Fatalf("ctr images ls: %v\n%s", err, list)
	}
	t.Logf("ctr images ls:\n%s", list)
	for ref, digest := range map[string]string{mirroredRef: digests[HelloImage], helloRef: digests[HelloImage]} {
		if !hasImage(list, ref, digest) {
			t.Errorf("containerd does not list %s with digest %s", ref, digest)
		}
	}
	if !strings.Contains(regLog.String(), "/v2/drover/hello/manifests/v1") {
		t.Errorf("the mirror pull did not ask for /v2/drover/hello/manifests/v1; registry log:\n%s", regLog.String())
	}

	out, err := ctr("run", "--rm", helloRef, "drover-hello")
	if err != nil {
		t.Fatalf("ctr run %s: %v\n%s", helloRef, err, out)
	}
	t.Logf("hello container printed:\n%s", out)
	lines := strings.Split(strings.TrimSpace(strings.ReplaceAll(out, "\r\n", "\n")), "\n")
	if len(lines) != 2 || lines[0] != HelloGreeting || !strings.HasPrefix(lines[1], "hostname: ") {
		t.Errorf("hello container printed %q, want the greeting and a hostname line", out)
	}

	// Imported as the agent does it (agent/containerd, containerd's API),
	// read back by containerd's own ctr.
	archive, digest := sandboxArchive(t, ctx)
	res, err := containerd.ImportArchive(ctx, sock, namespace, archive, map[string]string{"io.cri-containerd.pinned": "pinned"})
	if err != nil {
		t.Fatalf("importing %s: %v", archive, err)
	}
	t.Logf("import: %s", res)
	list, err = ctr("images", "ls")
	if err != nil {
		t.Fatalf("ctr images ls: %v\n%s", err, list)
	}
	t.Logf("after the import:\n%s", list)
	for _, ref := range []string{sandboxRef, "drover.dev/pause@" + digest} {
		if !hasImage(list, ref, digest) {
			t.Errorf("containerd does not list the imported %s with digest %s", ref, digest)
		}
	}
	if strings.Count(list, "io.cri-containerd.pinned=pinned") != 2 {
		t.Errorf("ctr lists the sandbox image's two names without the pinned label:\n%s", list)
	}
}

const sandboxRef = "drover.dev/pause:3.10"

// sandboxArchive builds cmd/drover-pause for both architectures and packs
// it as drover build does; it returns the archive's path and the index
// digest.
func sandboxArchive(t *testing.T, ctx context.Context) (string, string) {
	t.Helper()
	dir := t.TempDir()
	bins := map[string][]byte{}
	for _, goarch := range oci.Arches {
		out := filepath.Join(dir, "pause-"+goarch)
		cmd := exec.CommandContext(ctx, goBin(t), "build", "-trimpath", "-o", out, "../../cmd/drover-pause")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building drover-pause for %s: %v\n%s", goarch, err, b)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		bins[goarch] = b
	}
	idx, err := oci.ProgramIndex("pause", bins, oci.PlainLayers)
	if err != nil {
		t.Fatal(err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	tarball, err := oci.LayoutTar(idx, sandboxRef, dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "pause.tar")
	writeFile(t, path, tarball)
	return path, d.String()
}

// waitForContainerd polls until the daemon answers; the overall deadline is
// the test context's, and a daemon that exits fails the test at once.
func waitForContainerd(t *testing.T, ctx context.Context, ctr func(...string) (string, error), exited <-chan error) {
	t.Helper()
	for {
		out, err := ctr("version")
		if err == nil {
			return
		}
		select {
		case werr := <-exited:
			t.Fatalf("containerd exited before serving: %v (last ctr version: %s)", werr, out)
		case <-ctx.Done():
			t.Fatalf("containerd did not start serving: %v (last ctr version: %v %s)", ctx.Err(), err, out)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// hasImage reports whether `ctr images ls` lists ref with digest.
func hasImage(list, ref, digest string) bool {
	for _, line := range strings.Split(list, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == ref && f[2] == digest {
			return true
		}
	}
	return false
}

// TestImagesReproducibleColdCache rebuilds the programs with an empty Go
// build cache: equal digests show the binaries, not just the cache, are
// reproducible.
func TestImagesReproducibleColdCache(t *testing.T) {
	ctx := context.Background()
	warm := imageDigests(t, ctx, t.TempDir())
	t.Setenv("GOCACHE", t.TempDir())
	cold := imageDigests(t, ctx, t.TempDir())
	for prog, d := range warm {
		if cold[prog] != d {
			t.Errorf("%s: digest %s with a warm cache, %s with an empty one", prog, d, cold[prog])
		}
	}
	t.Logf("digests: %v", cold)
}

func needTool(t *testing.T, tool, debianPackage string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		t.Fatalf("%s not found (install the Debian package %s): %v", tool, debianPackage, err)
	}
	return p
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
