package ignition

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	const secret = "0123456789abcdef"
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write([]byte("token: abcdef." + secret + "\n"))
	zw.Close()
	remote := []byte("remote abcdef." + secret + "\n")
	sum := sha256.Sum256(remote)
	hash := "sha256-" + hex.EncodeToString(sum[:])
	cache := DirCache(filepath.Join(t.TempDir(), "contents"))
	must(t, cache.Save(hash, remote))
	other := []byte("no secret here\n")
	osum := sha256.Sum256(other)
	ohash := "sha256-" + hex.EncodeToString(osum[:])
	must(t, cache.Save(ohash, other))
	cfg := `{"ignition":{"version":"3.1.0"},"storage":{"files":[` +
		`{"path":"/etc/opt/a","mode":420,"contents":{"source":"data:,token%3A%20abcdef.` + secret + `"}},` +
		`{"path":"/etc/opt/b","contents":{"compression":"gzip","source":"data:;base64,` + base64.StdEncoding.EncodeToString(z.Bytes()) + `"}},` +
		`{"path":"/etc/opt/c","contents":{"source":"https://x.test/c","verification":{"hash":"` + hash + `"}}},` +
		`{"path":"/etc/opt/d","contents":{"source":"https://x.test/d","verification":{"hash":"` + ohash + `"}},"append":[{"source":"data:,x` + secret + `"}]}]},` +
		`"systemd":{"units":[{"name":"x.service","contents":"[Service]\nEnvironment=T=` + secret + `\n"}]}}`
	red, err := Redact([]byte(cfg), secret, "redacted", cache)
	must(t, err)
	if !red.Changed || bytes.Contains(red.Config, []byte(secret)) {
		t.Fatalf("changed %v:\n%s", red.Changed, red.Config)
	}
	if len(red.Dropped) != 1 || red.Dropped[0] != hash {
		t.Errorf("dropped %v, want the remote copy holding the secret (%s) only", red.Dropped, hash)
	}
	s := string(red.Config)
	for _, want := range []string{`"version":"3.1.0"`, `"mode":420`, `"https://x.test/d"`, ohash} {
		if !strings.Contains(s, want) {
			t.Errorf("redacted config lost %s:\n%s", want, s)
		}
	}
	if strings.Contains(s, "gzip") || strings.Contains(s, hash) {
		t.Errorf("a redacted resource kept its compression or hash:\n%s", s)
	}
	// What the redacted config writes, once applied.
	plan, err := Prepare(context.Background(), red.Config, Options{Fetcher: MapFetcher{}, Contents: cache})
	must(t, err)
	root := newRoot(t)
	_, err = Apply(plan, root)
	must(t, err)
	for p, want := range map[string]string{"etc/opt/a": "token: abcdef.redacted", "etc/opt/b": "token: abcdef.redacted\n",
		"etc/opt/c": "remote abcdef.redacted\n", "etc/opt/d": "no secret here\nxredacted",
		"etc/systemd/system/x.service": "[Service]\nEnvironment=T=redacted\n"} {
		if b, _ := os.ReadFile(filepath.Join(root, p)); string(b) != want {
			t.Errorf("/%s = %q, want %q", p, b, want)
		}
	}
	// Nothing to redact: the very same bytes.
	again, err := Redact(red.Config, secret, "redacted", cache)
	must(t, err)
	if again.Changed || !bytes.Equal(again.Config, red.Config) {
		t.Error("redacting a redacted config changed it")
	}
}
