package sources

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/drover-os/drover/image/lock"
)

// TestFetchURLOnly: a lock that pins only files by URL (no package) is
// fetched; Fetched names each file by its component and counts its bytes.
func TestFetchURLOnly(t *testing.T) {
	e := newEnv(t)
	base := strings.TrimSuffix(e.archive.URL, "/debian")
	e.archive.Put("/files/a", []byte("tool a"))
	e.archive.Put("/files/b", []byte("tool bb"))
	sa, sb := sha256.Sum256([]byte("tool a")), sha256.Sum256([]byte("tool bb"))
	l := &lock.Lock{Inputs: "x", URLs: []lock.URL{
		{Name: "a", SHA256: hex.EncodeToString(sa[:]), Size: 6, URL: base + "/files/a"},
		{Name: "b", SHA256: hex.EncodeToString(sb[:]), Size: 7, URL: base + "/files/b"},
	}}
	f, err := Fetch(context.Background(), e.recipe("name: t\npackages: [libc6]\n"), l, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	if f.Bytes != 13 || len(f.Debs) != 0 || len(f.URLs) != 2 {
		t.Fatalf("Fetched = %+v, want 13 bytes in the two URL files", f)
	}
	for name, want := range map[string]string{"a": "tool a", "b": "tool bb"} {
		if data, err := os.ReadFile(f.URLs[name]); err != nil || string(data) != want {
			t.Errorf("%s: %q, %v; want %q", name, data, err, want)
		}
	}
}

// TestLockLogs: an unchanged re-lock says so and why; without a log
// writer nothing is written and nothing fails.
func TestLockLogs(t *testing.T) {
	e := newEnv(t)
	r := e.recipe("name: t\npackages: [systemd]\n")
	o := e.opts
	o.Log = nil
	res, err := Lock(context.Background(), r, nil, o)
	if err != nil {
		t.Fatal(err)
	}
	if e.log.Len() != 0 {
		t.Errorf("logged to a writer not given: %s", e.log)
	}
	if _, err := e.lock(r, res.Lock); err != nil {
		t.Fatal(err)
	}
	want := "lock: " + r.LockPath() + " unchanged (same recipe inputs, same signed Releases of " + releaseDates(res.Suites) + ")\n"
	if !strings.Contains(e.log.String(), want) {
		t.Errorf("log:\n%s\nwant it to hold %q", e.log, want)
	}
}
