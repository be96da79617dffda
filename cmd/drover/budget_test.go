package main

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// gzipped compresses data once, as a user compresses user-data.
func gzipped(t *testing.T, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestValidateBudgetBomb: `drover validate` on a few KB of user-data
// whose one file has 64 append fragments of 64 MiB each (each under the
// per-resource limit, 4 GiB together) names the fragment where the
// config's 128 MiB budget runs out and exits 1, within safety bounds on
// its CPU time and peak RSS. The bounds are generous (refusing takes
// well under a second and the budget's 128 MiB); they guard against the
// bomb, they do not measure performance.
func TestValidateBudgetBomb(t *testing.T) {
	const maxCPU, maxRSS = 5 * time.Second, 256 << 20
	frag := map[string]any{
		"source":      "data:;base64," + base64.StdEncoding.EncodeToString(gzipped(t, make([]byte, 64<<20))),
		"compression": "gzip",
	}
	appends := make([]any, 64)
	for i := range appends {
		appends[i] = frag
	}
	js, err := json.Marshal(map[string]any{
		"ignition": map[string]any{"version": "3.5.0"},
		"storage":  map[string]any{"files": []any{map[string]any{"path": "/etc/opt/app/log", "append": appends}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ud := gzipped(t, js)
	file := filepath.Join(t.TempDir(), "bomb.ign")
	if err := os.WriteFile(file, ud, 0o644); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(droverBin, "validate", "--offline", file)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err = cmd.Run()
	wall := time.Since(start)
	code := cmd.ProcessState.ExitCode()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10 // KiB on Linux
	// CPU time, not wall time: the bound is on the work the bomb makes,
	// which a busy CI machine does not change (it stretches the wall).
	cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	t.Logf("drover validate on %d bytes of user-data: exit %d in %v (%v of CPU), peak RSS %d MiB\n%s%s",
		len(ud), code, wall.Round(time.Millisecond), cpu.Round(time.Millisecond), rss>>20, out.String(), errb.String())

	want := "$.storage.files[0].append[2]: the config's contents expand past 128 MiB in total; a node's config is KBs to a few MiB"
	if !strings.Contains(out.String(), want) {
		t.Errorf("stdout lacks %q:\n%s", want, out.String())
	}
	if code != 1 {
		t.Errorf("exit %d, want 1 (refused); stderr:\n%s", code, errb.String())
	}
	if cpu > maxCPU {
		t.Errorf("refusing took %v of CPU (%v wall), want under %v", cpu, wall, maxCPU)
	}
	if rss > maxRSS {
		t.Errorf("peak RSS %d MiB, want under %d MiB", rss>>20, maxRSS>>20)
	}
}
