// Package cache is drover's content-addressed local store of downloads and
// derived artefacts, shared safely by several drover processes.
//
// Layout under the cache directory:
//
//	sha256/<aa>/<hex>   verified blobs, read-only, named by their sha256
//	keys/<sha256(key)>  keyed entries pointing at a blob (e.g. a built Go binary)
//	locks/<sha256(key)> advisory lock files (flock)
//	tmp/                temp and partial files, renamed into place once verified
//
// A final path only ever appears by an atomic rename of content whose sha256
// has been checked, so an interrupted run leaves nothing a rerun would trust.
package cache

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// staleAge is how old a file in tmp/ must be before Open removes it: old
// enough that no live process is still writing it (writes refresh mtime).
const staleAge = 24 * time.Hour

// bufSize is the read size for hashing: large reads keep the hash loop, not
// syscalls, as the cost of verifying a warm cache.
const bufSize = 1 << 20

var bufPool = sync.Pool{New: func() any { b := make([]byte, bufSize); return &b }}

// Cache is an opened cache directory. It holds no open files and is safe for
// concurrent use by goroutines and by other processes opening the same dir.
type Cache struct {
	dir string
}

// DefaultDir returns $XDG_CACHE_HOME/drover, or ~/.cache/drover when
// XDG_CACHE_HOME is unset or relative (the XDG spec says to ignore relative
// values). getenv is os.Getenv in production.
func DefaultDir(getenv func(string) string) (string, error) {
	if x := getenv("XDG_CACHE_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "drover"), nil
	}
	home := getenv("HOME")
	if home == "" {
		return "", errors.New("cache: neither XDG_CACHE_HOME nor HOME is set; pass --cache DIR")
	}
	return filepath.Join(home, ".cache", "drover"), nil
}

// Open creates the cache layout under dir if needed and removes temp files
// left behind more than a day ago by interrupted runs.
func Open(dir string) (*Cache, error) {
	if dir == "" {
		return nil, errors.New("cache: open: empty directory name")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("cache: open %s: %w", dir, err)
	}
	c := &Cache{dir: abs}
	for _, sub := range []string{"sha256", "keys", "locks", "tmp"} {
		if err := os.MkdirAll(filepath.Join(abs, sub), 0o755); err != nil {
			return nil, fmt.Errorf("cache: open %s: %w", abs, err)
		}
	}
	if err := c.cleanTmp(time.Now().Add(-staleAge)); err != nil {
		return nil, err
	}
	return c, nil
}

// Dir returns the absolute cache directory.
func (c *Cache) Dir() string { return c.dir }

// TempDir returns the directory for temp files: on the same filesystem as
// the blobs, so Commit can rename atomically.
func (c *Cache) TempDir() string { return filepath.Join(c.dir, "tmp") }

// PartialPath is where an interrupted download of sha is kept so the next
// attempt can resume it. Only the holder of Lock(sha) may touch it.
func (c *Cache) PartialPath(sha string) string {
	return filepath.Join(c.TempDir(), sha+".partial")
}

// Path returns where the blob with this sha256 (lowercase hex) lives. It
// does not say whether the blob exists; use Check for that.
func (c *Cache) Path(sha string) string {
	prefix := "xx"
	if len(sha) >= 2 {
		prefix = sha[:2]
	}
	return filepath.Join(c.dir, "sha256", prefix, sha)
}

// Check re-hashes the blob for sha. A missing blob gives ok=false and no
// error; a blob with different content gives ok=false and its actual sha256.
func (c *Cache) Check(sha string) (ok bool, actual string, err error) {
	if err := ValidSHA256(sha); err != nil {
		return false, "", fmt.Errorf("cache: check: %w", err)
	}
	f, err := os.Open(c.Path(sha))
	if errors.Is(err, fs.ErrNotExist) {
		return false, "", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("cache: check %s: %w", sha, err)
	}
	defer f.Close()
	actual, err = HashReader(f)
	if err != nil {
		return false, "", fmt.Errorf("cache: check %s: %w", c.Path(sha), err)
	}
	return actual == sha, actual, nil
}

// HashReader returns the hex sha256 of everything r yields, reading in
// 1 MiB chunks.
func HashReader(r io.Reader) (string, error) {
	h := sha256.New()
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	// Hide r's WriterTo (os.File has one) so CopyBuffer really uses our buffer.
	if _, err := io.CopyBuffer(h, struct{ io.Reader }{r}, *bp); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Put stores the content of r as the blob sha, verifying it while writing.
// On a mismatch nothing is stored and the error names want and got. Two
// processes may Put the same sha at once: each writes its own temp file and
// the renames replace identical content atomically.
func (c *Cache) Put(sha string, r io.Reader) (path string, err error) {
	if err := ValidSHA256(sha); err != nil {
		return "", fmt.Errorf("cache: put: %w", err)
	}
	f, err := os.CreateTemp(c.TempDir(), "put-*.tmp")
	if err != nil {
		return "", fmt.Errorf("cache: put %s: %w", sha, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	h := sha256.New()
	bp := bufPool.Get().(*[]byte)
	_, err = io.CopyBuffer(io.MultiWriter(f, h), struct{ io.Reader }{r}, *bp)
	bufPool.Put(bp)
	if err != nil {
		return "", fmt.Errorf("cache: put %s: %w", sha, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sha {
		return "", fmt.Errorf("cache: put: sha256 mismatch: want %s, got %s", sha, got)
	}
	if err = f.Close(); err != nil {
		return "", fmt.Errorf("cache: put %s: %w", sha, err)
	}
	return c.Commit(sha, tmp)
}

// Commit moves tmp, a file in TempDir whose sha256 the caller has already
// verified to be sha while writing it, to the blob's final path: read-only,
// fsynced, then renamed atomically. tmp must not be open for writing.
func (c *Cache) Commit(sha, tmp string) (string, error) {
	if err := ValidSHA256(sha); err != nil {
		return "", fmt.Errorf("cache: commit: %w", err)
	}
	if filepath.Dir(tmp) != c.TempDir() {
		return "", fmt.Errorf("cache: commit %s: %s is not in %s, so the rename would not be atomic", sha, tmp, c.TempDir())
	}
	final := c.Path(sha)
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return "", fmt.Errorf("cache: commit %s: %w", sha, err)
	}
	if err := syncFile(tmp, 0o444); err != nil {
		return "", fmt.Errorf("cache: commit %s: %w", sha, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return "", fmt.Errorf("cache: commit %s: %w", sha, err)
	}
	// Persist the directory entry too, or a crash could lose the rename
	// while the (now missing) temp file was already removed.
	if err := syncDir(filepath.Dir(final)); err != nil {
		return "", fmt.Errorf("cache: commit %s: %w", sha, err)
	}
	return final, nil
}

// Remove deletes the blob sha (e.g. after Check found it corrupt). A missing
// blob is not an error.
func (c *Cache) Remove(sha string) error {
	if err := ValidSHA256(sha); err != nil {
		return fmt.Errorf("cache: remove: %w", err)
	}
	if err := os.Remove(c.Path(sha)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cache: remove %s: %w", sha, err)
	}
	return nil
}

// ValidSHA256 reports whether s is a lowercase hex sha256, the only form
// used for names in the cache.
func ValidSHA256(s string) error {
	if len(s) != 64 || strings.Trim(s, "0123456789abcdef") != "" {
		return fmt.Errorf("%q is not a lowercase hex sha256", s)
	}
	return nil
}

func syncFile(path string, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Chmod(mode); err != nil {
		return err
	}
	return f.Sync()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// cleanTmp removes temp files last modified before cutoff. A file another
// process removes first is fine; nothing at a final path is touched.
func (c *Cache) cleanTmp(cutoff time.Time) error {
	entries, err := os.ReadDir(c.TempDir())
	if err != nil {
		return fmt.Errorf("cache: clean %s: %w", c.TempDir(), err)
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.ModTime().Before(cutoff) {
			continue
		}
		p := filepath.Join(c.TempDir(), e.Name())
		if err := os.RemoveAll(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("cache: clean stale temp file %s: %w", p, err)
		}
	}
	return nil
}
