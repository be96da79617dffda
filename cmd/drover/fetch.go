package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-os/drover/image/lock"
	"github.com/drover-os/drover/image/lockcheck"
	"github.com/drover-os/drover/image/recipe"
	"github.com/drover-os/drover/image/sources"
	"github.com/drover-os/drover/internal/bytesize"
)

func newFetchCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "fetch RECIPE",
		Short: "Download everything RECIPE.lock pins into the verified cache",
		Long: `fetch downloads every .deb and URL component the lock pins into the
content-addressed cache, in parallel with retries, resuming partial downloads.
Entries already cached are re-verified: a corrupted entry is reported (name,
expected and actual sha256) and fetched again. It refuses a lock that no longer
matches the recipe, and one whose suites were not signed by a key of the trust
root this run uses (the keys in recipes/keys, the recipe's debian.keyring, or
the same --keyring the lock was made with): the packages' hashes are only as
good as that signature. Before it downloads a package it checks every deb
line against the signed Packages index of the InRelease the lock pins, as
drover build does; a line the index contradicts exits 2 (run drover lock
--refresh).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := recipe.Load(args[0])
			if err != nil {
				return err
			}
			l, err := lock.Read(r.LockPath())
			if err != nil {
				return err
			}
			if err := l.CheckFresh(r.Path, r.InputsDigest()); err != nil {
				return err
			}
			o, err := g.options(len(l.Debs) > 0)
			if err != nil {
				return err
			}
			start := time.Now()
			f, err := sources.Fetch(cmd.Context(), r, l, o)
			if err != nil {
				return lockExit(err)
			}
			fmt.Fprintf(g.log(), "fetch: %d packages and %d URL components verified in the cache (%s) in %s\n",
				len(f.Debs), len(f.URLs), bytesize.Format(f.Bytes), time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
}

// lockExit gives an error saying that the lock disagrees with the signed
// archive exit status 2, as drover outdated does for a lock line the
// index contradicts; any other error passes as it is (exit status 1).
func lockExit(err error) error {
	if errors.Is(err, lockcheck.ErrContradicted) {
		return &exitError{code: 2, err: err}
	}
	return err
}
