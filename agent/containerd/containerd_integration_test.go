//go:build integration

package containerd

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-os/drover/image/oci"
)

// TestImportIntoContainerd imports a layout as drover build writes it
// (image/oci) into a real containerd, the host's or the one
// DROVER_TEST_CONTAINERD names (with DROVER_TEST_CTR: the node's 2.x from
// the build cache), and reads the result back with containerd's own ctr:
// both names at the index digest with the pinned label, every blob there
// and still there after a synchronous garbage collection (the references
// are labelled), the same import again changing nothing, and an image
// whose label someone removed labelled again.
func TestImportIntoContainerd(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run containerd (CI runs the integration tier as root)")
	}
	daemon, ctrBin := tool(t, "DROVER_TEST_CONTAINERD", "containerd"), tool(t, "DROVER_TEST_CTR", "ctr")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	sock, _ := startContainerd(t, daemon, "", false)
	ctr := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, ctrBin, append([]string{"--address", sock, "--namespace", CRINamespace}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ctr %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	t.Logf("containerd: %s", strings.TrimSpace(ctr("version")))

	archive, digest := layoutArchive(t)
	labels := map[string]string{"io.cri-containerd.pinned": "pinned"}
	names := []string{"drover.dev/pause:3.10", "drover.dev/pause@" + digest}
	res, err := ImportArchive(ctx, sock, CRINamespace, archive, labels)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first import: %s", res)
	if res.Written != 7 || res.Present != 0 || strings.Join(res.Created, " ") != strings.Join(names, " ") {
		t.Errorf("first import: %+v, want 7 blobs written and both names created", res)
	}
	checkListed := func(when string) {
		t.Helper()
		list := ctr("images", "ls")
		for _, name := range names {
			found := false
			for _, line := range strings.Split(list, "\n") {
				f := strings.Fields(line)
				if len(f) >= 3 && f[0] == name {
					found = true
					if f[2] != digest || !strings.Contains(line, "io.cri-containerd.pinned=pinned") {
						t.Errorf("%s: ctr lists %q, want digest %s and the pinned label", when, line, digest)
					}
				}
			}
			if !found {
				t.Errorf("%s: ctr does not list %s:\n%s", when, name, list)
			}
		}
		check := ctr("images", "check")
		if strings.Count(check, " complete (") != 2 || strings.Contains(check, "incomplete") {
			t.Errorf("%s: ctr images check, want both images complete:\n%s", when, check)
		}
		// Every blob, both platforms', not only what check looks at.
		blobs := ctr("content", "ls")
		n := 0
		for _, line := range strings.Split(blobs, "\n") {
			if strings.HasPrefix(line, "sha256:") {
				n++
			}
		}
		if n != 7 {
			t.Errorf("%s: the content store holds %d blobs, want the layout's 7:\n%s", when, n, blobs)
		}
	}
	checkListed("after the import")

	// A garbage collection now keeps every blob only if the image records
	// reach them through the blobs' labels: the import's lease is gone.
	if leases := ctr("leases", "ls"); strings.Contains(leases, "drover-import-") {
		t.Errorf("the import left its lease:\n%s", leases)
	}
	ctr("leases", "create", "--id", "drover-test-gc")
	ctr("leases", "delete", "--sync", "drover-test-gc")
	checkListed("after a garbage collection")

	res, err = ImportArchive(ctx, sock, CRINamespace, archive, labels)
	if err != nil {
		t.Fatal(err)
	}
	if res.Written != 0 || res.Present != 7 || len(res.Unchanged) != 2 {
		t.Errorf("second import: %s, want nothing written or changed", res)
	}

	// Someone removes the pin; the next boot's import puts it back.
	ctr("images", "label", names[0], "io.cri-containerd.pinned=")
	res, err = ImportArchive(ctx, sock, CRINamespace, archive, labels)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(res.Updated, " ") != names[0] || len(res.Unchanged) != 1 {
		t.Errorf("import after the label's removal: %s, want %s updated", res, names[0])
	}
	checkListed("after the label was restored")

	// An error names the call and containerd's answer.
	_, err = New(sock, CRINamespace).Image(ctx, "drover.dev/none:1")
	if !IsCode(err, NotFound) || !strings.Contains(err.Error(), "containerd /containerd.services.images.v1.Images/Get: NotFound: ") {
		t.Errorf("Get of a missing image: %v", err)
	}
}

// layoutArchive is the sandbox image's layout as drover build writes it,
// with stand-ins for the pause binaries (nothing runs them here).
func layoutArchive(t *testing.T) (string, string) {
	t.Helper()
	idx, err := oci.ProgramIndex("pause", map[string][]byte{"amd64": []byte("amd64 pause"), "arm64": []byte("arm64 pause")}, oci.PlainLayers)
	if err != nil {
		t.Fatal(err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	data, err := oci.LayoutTar(idx, "drover.dev/pause:3.10", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "pause.tar")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p, d.String()
}

// startContainerd runs daemon on a private root, state and socket under
// dir (a new short directory when ""), with containerd's CRI plugin or
// without it, until the test ends (its log shown if the test failed);
// stop ends it sooner. It returns the socket.
func startContainerd(t *testing.T, daemon, dir string, cri bool) (sock string, stop func()) {
	t.Helper()
	if dir == "" {
		// A short directory: the socket path must fit in sun_path.
		var err error
		if dir, err = os.MkdirTemp("", "drover-ctrd-"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
	sock = filepath.Join(dir, "containerd.sock")
	disabled := ""
	if !cri {
		disabled = "disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n"
	}
	// Version 2: containerd 1.6 (Debian's) reads it, 2.x migrates it. The
	// opt plugin's directory too: its default is the host's /opt.
	config := fmt.Sprintf("version = 2\nroot = %q\nstate = %q\n%s[grpc]\n  address = %q\n[ttrpc]\n  address = %q\n[plugins.\"io.containerd.internal.v1.opt\"]\n  path = %q\n",
		filepath.Join(dir, "root"), filepath.Join(dir, "state"), disabled, sock, sock+".ttrpc", filepath.Join(dir, "opt"))
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	log := &bytes.Buffer{}
	cmd := exec.Command(daemon, "--config", filepath.Join(dir, "config.toml"))
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", daemon, err)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		os.Remove(sock)
		if t.Failed() {
			t.Logf("containerd log:\n%s", log.String())
		}
	}
	t.Cleanup(stop)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("containerd did not create %s\n%s", sock, log.String())
		}
	}
	return sock, stop
}

// tool is the program the environment variable names, else name on PATH.
func tool(t *testing.T, env, name string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		return p
	}
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found (install the Debian package containerd, or set %s): %v", name, env, err)
	}
	return p
}
