package cache

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Link records that the derived artefact named by key (for a Go binary:
// module@version, package, GOOS/GOARCH and toolchain) is the blob sha. The
// entry holds the sha and the key itself, so Lookup can tell a hash
// collision or a hand-edited entry from a real hit. It is written to a temp
// file and renamed, so readers see the old entry or the new one, never half.
func (c *Cache) Link(key, sha string) error {
	if err := ValidSHA256(sha); err != nil {
		return fmt.Errorf("cache: link %q: %w", key, err)
	}
	if strings.ContainsRune(key, '\n') {
		return fmt.Errorf("cache: link %q: key must be a single line", key)
	}
	f, err := os.CreateTemp(c.TempDir(), "key-*.tmp")
	if err != nil {
		return fmt.Errorf("cache: link %q: %w", key, err)
	}
	tmp := f.Name()
	_, err = fmt.Fprintf(f, "%s\n%s\n", sha, key)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, c.keyPath(key))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("cache: link %q: %w", key, err)
	}
	return nil
}

// Lookup returns the blob linked to key, but only when that blob exists and
// still hashes to its name; otherwise ok is false and the caller rebuilds.
func (c *Cache) Lookup(key string) (sha string, ok bool, err error) {
	data, err := os.ReadFile(c.keyPath(key))
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("cache: lookup %q: %w", key, err)
	}
	gotSHA, gotKey, found := strings.Cut(strings.TrimSuffix(string(data), "\n"), "\n")
	if !found || gotKey != key || ValidSHA256(gotSHA) != nil {
		// Unreadable or someone else's entry: treat as a miss, Link repairs it.
		return "", false, nil
	}
	valid, _, err := c.Check(gotSHA)
	if err != nil {
		return "", false, fmt.Errorf("cache: lookup %q: %w", key, err)
	}
	if !valid {
		return "", false, nil
	}
	return gotSHA, true, nil
}

func (c *Cache) keyPath(key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(c.dir, "keys", hex.EncodeToString(sum[:]))
}
