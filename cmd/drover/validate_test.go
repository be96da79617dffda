package main

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-os/drover/agent/agent"
	"github.com/drover-os/drover/agent/ignition"
)

// TestValidateMatchesTheAgent runs `drover validate` on every Ignition
// fixture of the agent's table tests and requires the same verdict and the
// same text as the agent's own check (agent.Options: policy + node file).
func TestValidateMatchesTheAgent(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "ignition", "*.ign"))
	if len(files) < 30 {
		t.Fatalf("only %d fixtures", len(files))
	}
	for _, f := range files {
		data, _ := os.ReadFile(f)
		problems := ignition.Validate(data, agent.Options(nil))
		var want strings.Builder
		for _, p := range problems {
			want.WriteString(p.String() + "\n")
		}
		wantCode := 0
		if len(problems) > 0 {
			wantCode = 1
		} else {
			want.WriteString(f + ": ok, the node would accept it\n")
		}
		out, errOut, code := drover(t, "validate", "--offline", f)
		if code != wantCode || out != want.String() {
			t.Errorf("%s: exit %d (want %d)\n got: %s%s\nwant: %s", filepath.Base(f), code, wantCode, out, errOut, want.String())
		}
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
