package cache

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func open(t *testing.T) *Cache {
	t.Helper()
	c, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestDefaultDir(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"XDG_CACHE_HOME": "/x", "HOME": "/h"}, "/x/drover"},
		{map[string]string{"HOME": "/h"}, "/h/.cache/drover"},
		{map[string]string{"XDG_CACHE_HOME": "rel", "HOME": "/h"}, "/h/.cache/drover"},
	} {
		got, err := DefaultDir(func(k string) string { return tc.env[k] })
		if err != nil || got != tc.want {
			t.Errorf("DefaultDir(%v) = %q, %v; want %q", tc.env, got, err, tc.want)
		}
	}
	if _, err := DefaultDir(func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "--cache") {
		t.Errorf("DefaultDir with empty env: err = %v, want a hint about --cache", err)
	}
}

func TestOpenLayout(t *testing.T) {
	c := open(t)
	for _, sub := range []string{"sha256", "keys", "locks", "tmp"} {
		if fi, err := os.Stat(filepath.Join(c.Dir(), sub)); err != nil || !fi.IsDir() {
			t.Errorf("%s: %v", sub, err)
		}
	}
}

func TestPutCheck(t *testing.T) {
	c := open(t)
	data := bytes.Repeat([]byte("drover"), 400_000) // > 1 MiB: several hash reads
	sha := sum(data)
	ok, _, err := c.Check(sha)
	if ok || err != nil {
		t.Fatalf("Check on empty cache = %v, %v; want false, nil", ok, err)
	}
	path, err := c.Put(sha, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(c.Dir(), "sha256", sha[:2], sha); path != want || c.Path(sha) != want {
		t.Errorf("Put path = %s, Path = %s; want %s", path, c.Path(sha), want)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o444 {
		t.Errorf("blob mode = %v, want 0444", fi.Mode().Perm())
	}
	if ok, actual, err := c.Check(sha); !ok || actual != sha || err != nil {
		t.Errorf("Check = %v, %s, %v; want true, %s, nil", ok, actual, err, sha)
	}
	// Putting the same content again replaces it atomically.
	if _, err := c.Put(sha, bytes.NewReader(data)); err != nil {
		t.Errorf("second Put: %v", err)
	}
	assertEmpty(t, c.TempDir())

	// Corrupt one byte: Check reports the actual sha.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	data[1000] ^= 1
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	ok, actual, err := c.Check(sha)
	if ok || actual != sum(data) || err != nil {
		t.Errorf("Check corrupt = %v, %s, %v; want false, %s, nil", ok, actual, err, sum(data))
	}
	if err := c.Remove(sha); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := c.Check(sha); ok || err != nil {
		t.Errorf("Check after Remove = %v, %v", ok, err)
	}
}

func TestPutMismatch(t *testing.T) {
	c := open(t)
	want := sum([]byte("expected"))
	_, err := c.Put(want, strings.NewReader("something else"))
	if err == nil {
		t.Fatal("Put with wrong content succeeded")
	}
	got := sum([]byte("something else"))
	for _, s := range []string{"mismatch", "want " + want, "got " + got} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not contain %q", err, s)
		}
	}
	if _, err := os.Stat(c.Path(want)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("blob exists after mismatch: %v", err)
	}
	assertEmpty(t, c.TempDir())
}

func TestInvalidSHA(t *testing.T) {
	c := open(t)
	for _, bad := range []string{"", "abc", strings.Repeat("A", 64), strings.Repeat("g", 64), "../" + strings.Repeat("a", 61)} {
		if _, err := c.Put(bad, strings.NewReader("")); err == nil {
			t.Errorf("Put(%q) accepted an invalid sha", bad)
		}
		if _, _, err := c.Check(bad); err == nil {
			t.Errorf("Check(%q) accepted an invalid sha", bad)
		}
	}
}

func TestCommitOutsideTemp(t *testing.T) {
	c := open(t)
	other := filepath.Join(t.TempDir(), "f")
	os.WriteFile(other, []byte("x"), 0o644)
	if _, err := c.Commit(sum([]byte("x")), other); err == nil {
		t.Error("Commit accepted a file outside the cache's temp dir")
	}
}

func TestLinkLookup(t *testing.T) {
	c := open(t)
	key := "golang.org/x/tools@v0.1.0 ./cmd/stringer linux/amd64 go1.26.8"
	if _, ok, err := c.Lookup(key); ok || err != nil {
		t.Fatalf("Lookup on empty cache = %v, %v", ok, err)
	}
	data := []byte("binary")
	sha := sum(data)
	// A link to a blob that is not there is not a hit.
	if err := c.Link(key, sha); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := c.Lookup(key); ok || err != nil {
		t.Errorf("Lookup with missing blob = %v, %v; want miss", ok, err)
	}
	if _, err := c.Put(sha, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	got, ok, err := c.Lookup(key)
	if !ok || got != sha || err != nil {
		t.Errorf("Lookup = %s, %v, %v; want %s, true, nil", got, ok, err, sha)
	}
	if _, ok, _ := c.Lookup(key + " "); ok {
		t.Error("Lookup of another key hit")
	}
	// A blob that no longer verifies is not a hit.
	p := c.Path(sha)
	os.Chmod(p, 0o644)
	os.WriteFile(p, []byte("tampered"), 0o644)
	if _, ok, err := c.Lookup(key); ok || err != nil {
		t.Errorf("Lookup with corrupt blob = %v, %v; want miss", ok, err)
	}
	if err := c.Link("a\nb", sha); err == nil {
		t.Error("Link accepted a multi-line key")
	}
	assertEmpty(t, c.TempDir())
}

func TestLockExcludes(t *testing.T) {
	c := open(t)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		holders int
		maxSeen int
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				unlock, err := c.Lock("k")
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				holders++
				maxSeen = max(maxSeen, holders)
				mu.Unlock()
				time.Sleep(50 * time.Microsecond) // widen the window a second holder would need
				mu.Lock()
				holders--
				mu.Unlock()
				unlock()
			}
		}()
	}
	wg.Wait()
	if maxSeen != 1 {
		t.Errorf("%d goroutines held the lock at once", maxSeen)
	}
}

func TestLockContextCancel(t *testing.T) {
	c := open(t)
	unlock, err := c.Lock("k")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.LockContext(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Errorf("LockContext with held lock and cancelled ctx: %v", err)
	}
	unlock()
	// The abandoned waiter must not keep the lock.
	u2, err := c.Lock("k")
	if err != nil {
		t.Fatal(err)
	}
	u2()
	// Other keys are independent.
	u3, _ := c.Lock("k")
	u4, err := c.LockContext(ctx, "other")
	if err != nil {
		t.Errorf("lock on another key: %v", err)
	} else {
		u4()
	}
	u3()
}

func TestOpenCleansStaleTemp(t *testing.T) {
	dir := t.TempDir()
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(c.TempDir(), "put-1.tmp")
	fresh := filepath.Join(c.TempDir(), "put-2.tmp")
	for _, p := range []string{stale, fresh} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-25 * time.Hour)
	os.Chtimes(stale, old, old)
	if _, err := Open(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale temp file survived Open: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("fresh temp file removed: %v", err)
	}
}

func assertEmpty(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("left behind in %s: %s", dir, e.Name())
	}
}
