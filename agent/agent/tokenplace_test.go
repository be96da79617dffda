package agent

import (
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestGzipUserDataStoredAsGiven: the provider hands over gzip user-data
// as given; the agent stores it so, with the digest of those bytes, and
// the token is redacted from the compressed stored config too. A reboot
// with the same user-data is not taken for a change.
func TestGzipUserDataStoredAsGiven(t *testing.T) {
	ud := gzipped(t, userData(t, "hello"))
	r := newRig(t, ud)
	if err := r.agent().Run(context.Background()); err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(r.log, "\n"))
	}
	if d, _ := os.ReadFile(filepath.Join(r.root, StoredDigest)); strings.TrimSpace(string(d)) != digest(ud) {
		t.Errorf("%s = %q, want the digest of the compressed user-data as given", StoredDigest, d)
	}
	noSecretLeft(t, r.root, "first boot, gzip user-data")
	reboot(r)
	if err := r.agent().Run(context.Background()); err != nil {
		t.Fatalf("second boot: %v\n%s", err, strings.Join(r.log, "\n"))
	}
	if log := strings.Join(r.log, "\n"); strings.Contains(log, "REFUSED") || !strings.Contains(log, "bootstrap token redacted), re-applied") {
		t.Errorf("second boot with the same gzip user-data:\n%s", log)
	}
	noSecretLeft(t, r.root, "second boot, gzip user-data")
}

// TestDoubleGzipUserDataRefused: gzip inside gzip is refused on the node
// as drover validate refuses it, and nothing (no token) reaches /var.
func TestDoubleGzipUserDataRefused(t *testing.T) {
	r := newRig(t, gzipped(t, gzipped(t, userData(t, "hello"))))
	err := r.agent().Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "compressed twice (gzip inside gzip)") {
		t.Fatalf("want the compressed-twice refusal, got %v", err)
	}
	if fileExists(filepath.Join(r.root, StoredConfig)) {
		t.Error("a refused config was stored")
	}
	noSecretLeft(t, r.root, "refused double-gzip user-data")
}
