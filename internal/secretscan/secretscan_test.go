package secretscan

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const secret = "0123456789abcdef"

func gz(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

// escapeAll percent-encodes every byte, as a data: URL may.
func escapeAll(b []byte) string {
	var s strings.Builder
	for _, c := range b {
		s.WriteString("%" + strings.ToUpper(hex.EncodeToString([]byte{c})))
	}
	return s.String()
}

func TestFind(t *testing.T) {
	node := []byte("cluster:\n  bootstrapToken: abcdef." + secret + "\n")
	wrapped := base64.StdEncoding.EncodeToString(append(bytes.Repeat([]byte("x"), 100), node...))
	var lines []string
	for len(wrapped) > 76 {
		lines, wrapped = append(lines, wrapped[:76]), wrapped[76:]
	}
	lines = append(lines, wrapped)
	for _, tc := range []struct {
		name, data, want string
	}{
		{"plain", string(node), "plain"},
		{"percent data URL", `{"source":"data:,` + escapeAll(node) + `"}`, "data: URL at 11 → plain"},
		{"base64 data URL", `{"source":"data:;base64,` + base64.StdEncoding.EncodeToString(node) + `"}`, "data: URL at 11 → plain"},
		{"gzip base64 data URL", `{"compression":"gzip","source":"data:;base64,` + base64.StdEncoding.EncodeToString(gz(node)) + `"}`, "data: URL at 32 → gzip at 0 → plain"},
		{"gzip file", string(gz(node)), "gzip at 0 → plain"},
		{"url-safe base64 unpadded, off alignment", "token=" + base64.RawURLEncoding.EncodeToString(append([]byte("ab"), node...)), "base64 at 6 → plain"},
		{"line-wrapped base64", "blob: |\n  " + strings.Join(lines, "\n  ") + "\n", "base64 at 168 → plain"},
		{"percent-encoded query", "ExecStart=/usr/bin/curl https://x.test/join?t=abcdef." + escapeAll([]byte(secret)) + "&x=1\n", "percent-encoded at 24 → plain"},
		{"percent-encoded, partly", "token: " + secret[:4] + "%" + strings.ToUpper(hex.EncodeToString([]byte(secret[4:5]))) + secret[5:], "percent-encoded at 7 → plain"},
		{"percent-encoded base64", "t=" + strings.ReplaceAll(base64.StdEncoding.EncodeToString(node), "=", "%3D"), "base64 at 2 → plain"},
		{"base64 of gzip of base64", base64.StdEncoding.EncodeToString(gz([]byte(base64.StdEncoding.EncodeToString(node)))), "base64 at 0 → gzip at 0 → base64 at 0 → plain"},
	} {
		got := Find([]byte(tc.data), []byte(secret))
		if got != tc.want {
			t.Errorf("%s: Find = %q, want %q", tc.name, got, tc.want)
		}
	}
	redacted := bytes.ReplaceAll(node, []byte(secret), []byte("redacted"))
	for _, clean := range [][]byte{redacted, gz(redacted), []byte("data:;base64," + base64.StdEncoding.EncodeToString(redacted)),
		[]byte("q=" + escapeAll(redacted)), []byte("100%" + secret[:8] + "%zz" + secret[8:])} {
		if got := Find(clean, []byte(secret)); got != "" {
			t.Errorf("a redacted copy was found: %q", got)
		}
	}
}

func TestTreeNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "lib/drover"), 0o755)
	os.WriteFile(filepath.Join(dir, "lib/drover/config.ign"), []byte(`{"source":"data:;base64,`+base64.StdEncoding.EncodeToString([]byte("t: x."+secret))+`"}`), 0o600)
	os.WriteFile(filepath.Join(dir, "lib/drover/clean"), []byte("nothing here"), 0o600)
	hits, err := Tree(dir, []byte(secret))
	if err != nil || len(hits) != 1 || hits[0].Path != "lib/drover/config.ign" {
		t.Fatalf("hits %v, err %v", hits, err)
	}
}
