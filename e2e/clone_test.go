//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// clone is a fresh clone of the repository at its committed HEAD, in which
// commands run as a new user runs them: from the clone's root, with the
// relative paths the README, the Makefile and --help show, and the clone's
// bin/ on PATH (so "drover" is the binary `make` built there).
type clone struct {
	dir string
	env []string
}

// clusterCache holds the control plane binaries across runs (building them
// takes ~15 minutes); CI keeps it warm.
var clusterCache = filepath.Join(os.TempDir(), "drover-cluster-cache")

// freshClone clones the repository's HEAD into a temporary directory. The
// drover cache is the default one ($XDG_CACHE_HOME/drover, as for any user)
// pointed at the shared cluster cache; the Go build cache stays the
// caller's, so the clone's builds are no colder than CI's.
func freshClone(t *testing.T) *clone {
	t.Helper()
	head := strings.TrimSpace(run(t, "git", "-C", repo, "rev-parse", "HEAD"))
	if st := strings.TrimSpace(run(t, "git", "-C", repo, "status", "--porcelain", "--untracked-files=no")); st != "" {
		t.Logf("the working tree has uncommitted changes; the clone tests the committed HEAD %s:\n%s", head, st)
	}
	base, err := os.MkdirTemp("", "drover-e2e-clone-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	dir := filepath.Join(base, "drover")
	// --shared: the objects of a worktree's branch are in the main
	// repository's store; a plain clone would fetch only its refs.
	run(t, "git", "clone", "-q", "--shared", "--no-checkout", repo, dir)
	run(t, "git", "-C", dir, "checkout", "-q", "--detach", head)

	xdg := filepath.Join(base, "xdg")
	if err := os.MkdirAll(clusterCache, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(xdg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(clusterCache, filepath.Join(xdg, "drover")); err != nil {
		t.Fatal(err)
	}
	gocache := strings.TrimSpace(run(t, "go", "env", "GOCACHE"))
	var env []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "PATH", "XDG_CACHE_HOME", "GOCACHE", "GOFLAGS", "DROVER_MIRROR":
		default:
			env = append(env, kv)
		}
	}
	env = append(env, "PATH="+filepath.Join(dir, "bin")+":"+os.Getenv("PATH"), "XDG_CACHE_HOME="+xdg, "GOCACHE="+gocache)
	return &clone{dir: dir, env: env}
}

func (c *clone) path(p string) string { return filepath.Join(c.dir, p) }

// sh runs a shell command line in the clone's root (bash, pipefail) and
// returns its output and exit status.
func (c *clone) sh(t *testing.T, timeout time.Duration, line string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", line)
	cmd.Dir, cmd.Env = c.dir, c.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("%s: no result within %s\n%s", line, timeout, tail(out.String(), 60))
	}
	t.Logf("$ %s   (exit %d, %s)", line, code, time.Since(start).Round(time.Second))
	return out.String(), code
}

// interactive starts a command line in the clone's root in its own process
// group, as a terminal would, and calls onLine with each line it prints
// and with "" every 5 seconds (to poll something else), until onLine
// returns true; then it sends SIGINT (Ctrl-C) to the group and waits for
// the command to exit. It returns the output.
func (c *clone) interactive(t *testing.T, timeout time.Duration, line string, onLine func(string) bool) string {
	t.Helper()
	cmd := exec.Command("bash", "-c", line)
	cmd.Dir, cmd.Env = c.dir, c.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { err := cmd.Wait(); pw.Close(); exited <- err }()
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		io.Copy(io.Discard, pr)
		close(lines)
	}()
	var out strings.Builder
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	deadline := time.After(timeout)
	kill := func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	for reached := false; !reached; {
		select {
		case l, ok := <-lines:
			if !ok {
				err := <-exited
				t.Fatalf("$ %s exited (%v) before it got where the test waits for\n%s", line, err, tail(out.String(), 80))
			}
			out.WriteString(l + "\n")
			reached = onLine(l)
		case <-tick.C:
			reached = onLine("")
		case <-deadline:
			kill()
			t.Fatalf("$ %s: not there within %s\n%s", line, timeout, tail(out.String(), 80))
		}
	}
	took := time.Since(start)
	syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
	stop := time.After(2 * time.Minute)
	for {
		select {
		case l, ok := <-lines:
			if ok {
				out.WriteString(l + "\n")
				continue
			}
			err := <-exited
			t.Logf("$ %s   (reached in %s; stopped by Ctrl-C: %v)", line, took.Round(time.Second), err)
			return out.String()
		case <-stop:
			kill()
			t.Errorf("$ %s did not stop within 2 minutes of Ctrl-C\n%s", line, tail(out.String(), 40))
			return out.String()
		}
	}
}

// nodeReady asks the API server named in a kubeconfig (as written by the
// harness: one cluster, one user with embedded certificates) whether node
// is Ready.
func nodeReady(ctx context.Context, kubeconfig, node string) (bool, error) {
	data, err := os.ReadFile(kubeconfig)
	if err != nil {
		return false, err
	}
	var kc struct {
		Clusters []struct {
			Cluster struct {
				Server string `yaml:"server"`
				CA     string `yaml:"certificate-authority-data"`
			} `yaml:"cluster"`
		} `yaml:"clusters"`
		Users []struct {
			User struct {
				Cert string `yaml:"client-certificate-data"`
				Key  string `yaml:"client-key-data"`
			} `yaml:"user"`
		} `yaml:"users"`
	}
	if err := yaml.Unmarshal(data, &kc); err != nil || len(kc.Clusters) != 1 || len(kc.Users) != 1 {
		return false, fmt.Errorf("%s: want one cluster and one user (%v)", kubeconfig, err)
	}
	dec := func(s string) []byte { b, _ := base64.StdEncoding.DecodeString(s); return b }
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(dec(kc.Clusters[0].Cluster.CA)) {
		return false, fmt.Errorf("%s: no CA certificate", kubeconfig)
	}
	cert, err := tls.X509KeyPair(dec(kc.Users[0].User.Cert), dec(kc.Users[0].User.Key))
	if err != nil {
		return false, fmt.Errorf("%s: client certificate: %w", kubeconfig, err)
	}
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, kc.Clusters[0].Cluster.Server+"/api/v1/nodes/"+node, nil)
	resp, err := hc.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return false, nil
	}
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("GET node %s: %s", node, resp.Status)
	}
	var n struct {
		Status struct {
			Conditions []struct{ Type, Status string } `json:"conditions"`
		} `json:"status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&n); err != nil {
		return false, err
	}
	for _, c := range n.Status.Conditions {
		if c.Type == "Ready" {
			return c.Status == "True", nil
		}
	}
	return false, nil
}
