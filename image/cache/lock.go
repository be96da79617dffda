package cache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Lock takes the cross-process advisory lock for key, waiting as long as
// another holder keeps it. Different goroutines of one process exclude each
// other too (each call opens its own file description). Lock files are
// never removed: removing one while another process waits on it would let
// two holders in.
func (c *Cache) Lock(key string) (unlock func(), err error) {
	return c.LockContext(context.Background(), key)
}

// LockContext is Lock that gives up when ctx is done. A wait that is given
// up on still completes in the background and releases the lock at once.
func (c *Cache) LockContext(ctx context.Context, key string) (unlock func(), err error) {
	path := c.lockPath(key)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cache: lock %q: %w", key, err)
	}
	release := func() {
		// Closing the last descriptor drops the flock.
		f.Close()
	}
	// Fast path: no contention, no goroutine.
	if err := flock(f, unix.LOCK_EX|unix.LOCK_NB); err == nil {
		return release, nil
	} else if err != unix.EWOULDBLOCK {
		f.Close()
		return nil, fmt.Errorf("cache: lock %s: %w", path, err)
	}
	// flock cannot be interrupted by a context, so wait in a goroutine and
	// hand the lock back if nobody wants it any more.
	done := make(chan error, 1)
	go func() { done <- flock(f, unix.LOCK_EX) }()
	select {
	case err := <-done:
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("cache: lock %s: %w", path, err)
		}
		return release, nil
	case <-ctx.Done():
		go func() {
			<-done
			f.Close()
		}()
		return nil, fmt.Errorf("cache: waiting for lock %q (held by another drover process): %w", key, ctx.Err())
	}
}

func (c *Cache) lockPath(key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(c.dir, "locks", hex.EncodeToString(sum[:]))
}

func flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if err != unix.EINTR {
			return err
		}
	}
}
