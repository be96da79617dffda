package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// repoRoot is where a user runs drover from; the commands below use the
// relative paths the README shows.
const repoRoot = "../.."

// droverAt runs the CLI in dir, as a user would from there.
func droverAt(t *testing.T, dir string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(droverBin, args...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// golden compares what a drover run printed and its exit status with
// testdata/<name>.golden: "exit N", then the exact stdout and stderr.
func golden(t *testing.T, name, stdout, stderr string, code int) {
	t.Helper()
	got := fmt.Sprintf("exit %d\n-- stdout --\n%s-- stderr --\n%s", code, stdout, stderr)
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: write it with `go test ./cmd/drover -run %s -update` and review it", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("drover output differs from %s (regenerate with -update after an intended change)\n got:\n%s\nwant:\n%s", path, got, want)
	}
}

// TestValidateGolden runs `drover validate --offline` from the repository
// root on every user-data of the shared Ignition corpus and compares the
// exact stdout, stderr and exit status with a reviewed golden file: the
// verdict and every problem line a user sees are pinned, independently of
// the code that computes them.
func TestValidateGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot, "testdata", "ignition", "*.ign"))
	if err != nil || len(files) < 30 {
		t.Fatalf("only %d corpus files in testdata/ignition (%v)", len(files), err)
	}
	accepted, refused := 0, 0
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".ign")
		t.Run(name, func(t *testing.T) {
			rel := filepath.ToSlash(filepath.Join("testdata", "ignition", name+".ign"))
			out, errOut, code := droverAt(t, repoRoot, "validate", "--offline", rel)
			golden(t, filepath.Join("validate", name), out, errOut, code)
			switch code {
			case 0:
				accepted++
			case 1:
				refused++
			}
		})
	}
	// The corpus has no node file in most configs (the agent's Ignition
	// layer is tested without one), so most are refused for that too; the
	// accepted verdict is pinned by the userdata samples below.
	if refused < 30 || accepted+refused != len(files) {
		t.Errorf("%d accepted and %d refused of %d corpus files", accepted, refused, len(files))
	}
}

// TestValidateGoldenCases pins the sample user-data (accepted, and refused
// for its node file), --json for both verdicts, a missing file, a missing
// argument and an unknown flag (exit 2: nothing was checked), and
// `drover userdata --from`, whose output must be the sample user-data
// byte for byte.
func TestValidateGoldenCases(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"pool-accepted", []string{"validate", "--offline", "testdata/userdata/pool.ign"}},
		{"bad-node-refused", []string{"validate", "--offline", "testdata/userdata/bad-node.ign"}},
		{"json-accepted", []string{"validate", "--offline", "--json", "testdata/userdata/pool.ign"}},
		{"json-refused-node", []string{"validate", "--offline", "--json", "testdata/userdata/bad-node.ign"}},
		{"json-refused", []string{"validate", "--offline", "--json", "testdata/ignition/52-many-problems.ign"}},
		{"missing-file", []string{"validate", "--offline", "testdata/ignition/no-such.ign"}},
		{"no-argument", []string{"validate"}},
		{"unknown-flag", []string{"validate", "--ofline", "testdata/userdata/pool.ign"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := droverAt(t, repoRoot, tc.args...)
			golden(t, filepath.Join("validate", tc.name), out, errOut, code)
		})
	}
	sample, err := os.ReadFile(filepath.Join(repoRoot, "testdata", "userdata", "pool.ign"))
	if err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := droverAt(t, repoRoot, "userdata", "--from", "testdata/userdata/pool.yaml"); code != 0 || out != string(sample) {
		t.Errorf("drover userdata --from testdata/userdata/pool.yaml (exit %d, %s) differs from testdata/userdata/pool.ign:\n%s", code, errOut, out)
	}
}

func TestUserdataRendersWhatTheAgentAccepts(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	pem, _ := os.ReadFile(filepath.Join("..", "..", "testdata", "pki", "ca.crt"))
	os.WriteFile(ca, pem, 0o644)
	out, errOut, code := drover(t, "userdata", "--server", "https://100.64.0.2:6443", "--ca-file", ca, "--token", "abcdef.0123456789abcdef",
		"--label", "example.com/pool=workers", "--taint", "dedicated=batch:NoSchedule", "--mirror", "registry.k8s.io=http://100.64.0.2:5000")
	if code != 0 {
		t.Fatalf("userdata: %s", errOut)
	}
	ud := filepath.Join(dir, "ud.ign")
	os.WriteFile(ud, []byte(out), 0o644)
	if vout, _, code := drover(t, "validate", "--offline", ud); code != 0 {
		t.Fatalf("rendered user-data refused:\n%s", vout)
	}
	var cfg struct {
		Storage struct {
			Files []struct {
				Path     string
				Contents struct{ Source string }
			}
		}
	}
	json.Unmarshal([]byte(out), &cfg)
	node, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(cfg.Storage.Files[0].Contents.Source, "data:;base64,"))
	for _, want := range []string{"server: https://100.64.0.2:6443", "example.com/pool: workers", "dedicated=batch:NoSchedule", "http://100.64.0.2:5000"} {
		if !strings.Contains(string(node), want) {
			t.Errorf("node file lacks %q:\n%s", want, node)
		}
	}
	b64, _, _ := drover(t, "userdata", "--server", "https://100.64.0.2:6443", "--ca-file", ca, "--token", "abcdef.0123456789abcdef", "--base64")
	if dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64)); err != nil || !json.Valid(dec) {
		t.Errorf("--base64 output does not decode to JSON: %v", err)
	}
	_, errOut, code = drover(t, "userdata", "--server", "http://insecure:6443", "--ca-file", ca, "--token", "bad")
	if code != 1 || !strings.Contains(errOut, "would be refused by the node") {
		t.Errorf("bad settings: exit %d: %s", code, errOut)
	}
}

// TestValidateRemoteDestinations: drover validate fetches with the agent's
// client but refuses private addresses unless --allow-private-sources is
// given, and loopback, link-local and the metadata service whatever the
// flags; nothing connects to a refused address.
func TestValidateRemoteDestinations(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var peers []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			peers = append(peers, c.RemoteAddr().String())
			mu.Unlock()
			c.Close()
		}
	}()
	defer func() { l.Close(); <-done }()

	source := func(url string) map[string]any {
		return map[string]any{"source": url, "verification": map[string]any{"hash": "sha256-" + strings.Repeat("0", 64)}}
	}
	files := []any{
		map[string]any{"path": "/etc/opt/a", "contents": source("http://" + l.Addr().String() + "/a")},
		map[string]any{"path": "/etc/opt/b", "contents": source("http://100.100.100.200/latest/user-data")},
		map[string]any{"path": "/etc/opt/c", "contents": source("http://169.254.169.254/latest/meta-data/")},
	}
	write := func(name string, files []any) string {
		b, _ := json.Marshal(map[string]any{"ignition": map[string]any{"version": "3.5.0"}, "storage": map[string]any{"files": files}})
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The private source only where it is refused: with the flag, validate
	// would connect to it.
	withPrivate := write("private.ign", append(files[:3:3], map[string]any{"path": "/etc/opt/d", "contents": source("http://10.255.255.1/d")}))
	for _, args := range [][]string{{"validate", withPrivate}, {"validate", "--allow-private-sources", write("public.ign", files)}} {
		out, errOut, code := drover(t, args...)
		if code != 1 {
			t.Fatalf("%v: exit %d, want 1\n%s%s", args, code, out, errOut)
		}
		for _, want := range []string{
			"$.storage.files[0].contents.source: fetching contents of /etc/opt/a failed: GET http://" + l.Addr().String() + "/a: ",
			"refused to connect to 127.0.0.1: it is a loopback address",
			"$.storage.files[1].contents.source: fetching contents of /etc/opt/b failed: GET http://100.100.100.200/latest/user-data: ",
			"refused to connect to 100.100.100.200: it is the ECS instance metadata service",
			"refused to connect to 169.254.169.254: it is a link-local address",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: output lacks %q:\n%s", args, want, out)
			}
		}
		for _, line := range strings.Split(out, "\n") {
			if !strings.HasPrefix(line, "$.storage.files[3]") && strings.Contains(line, "--allow-private-sources") {
				t.Errorf("%v: a refusal the flag cannot lift names it: %s", args, line)
			}
		}
	}
	out, _, _ := drover(t, "validate", withPrivate)
	private := "$.storage.files[3].contents.source: fetching contents of /etc/opt/d failed: GET http://10.255.255.1/d: Get \"http://10.255.255.1/d\": dial tcp 10.255.255.1:80: refused to connect to 10.255.255.1: it is a private address (RFC 1918); private addresses are fetched from only with --allow-private-sources"
	if !strings.Contains(out, private) {
		t.Errorf("the private source is not refused naming the flag:\n%s", out)
	}
	// A connection of our own must be the first the listener saw.
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		got := append([]string(nil), peers...)
		mu.Unlock()
		if len(got) > 0 {
			if got[0] != c.LocalAddr().String() {
				t.Errorf("drover validate connected to the refused loopback address: %v", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the probe connection was never accepted")
		}
	}
	if out, _, _ := drover(t, "validate", "--help"); !strings.Contains(out, "--allow-private-sources") || !strings.Contains(out, "100.100.100.200") {
		t.Errorf("--help does not explain --allow-private-sources:\n%s", out)
	}
}
