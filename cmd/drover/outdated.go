package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/drover-os/drover/image/gomod"
	"github.com/drover-os/drover/image/lock"
	"github.com/drover-os/drover/image/lockcheck"
	"github.com/drover-os/drover/image/outdated"
	"github.com/drover-os/drover/image/recipe"
	"github.com/drover-os/drover/image/sources"
)

func newOutdatedCmd(g *globals) *cobra.Command {
	var asJSON, securityOnly bool
	var lf lockFlags
	cmd := &cobra.Command{
		Use:   "outdated RECIPE",
		Short: "Say whether a rebuild is due: newer Debian packages (security updates marked) and Go patch releases than RECIPE.lock pins",
		Long: `outdated compares RECIPE.lock with what is published now: the signed indexes
of the recipe's Debian suites (e.g. trixie, trixie-updates, trixie-security;
each InRelease verified as drover lock does) and the Go module proxy.

It lists every locked Debian package with a newer version in those suites,
marking the ones that come from a -security suite (a published security fix
the image lacks), and every Go component (kubelet, containerd) with a newer
patch release of the same minor.

First it checks every deb line against the signed Packages index of the
InRelease the lock pins, as drover build does, for each suite whose pinned
InRelease is in the cache (drover lock keeps it there) or still served: a
line that index does not list exactly (an invented version, another
digest, size or path) is an error naming the line. While it reads today's
signed indexes it also checks every locked .deb that is still published.
A locked version the suites no longer list (superseded) is only noted: the
security suite keeps one version of a package.

A freshly fetched InRelease dated before the one the lock records for its
suite is refused (a mirror that is behind, or replays an old signed
Release), naming the suite and both dates; --allow-older-release accepts
it on purpose.

Exit status: 0 current, 1 outdated (a rebuild is due), 2 error (a lock line
the index contradicts: run drover lock --refresh; a stale lock, an
unverifiable or older InRelease, no network).
With --security-only, only Debian security updates make it outdated; Go
releases are not classified and are left out. Progress goes to stderr.`,
		Example: `  drover outdated recipes/ecs-node.yaml
  drover outdated --security-only recipes/ecs-node.yaml || drover lock recipes/ecs-node.yaml
  drover outdated --json recipes/ecs-node.yaml | jq '.packages[] | select(.security)'`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, r, err := runOutdated(cmd, g, args[0], lf)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				b, _ := json.MarshalIndent(struct {
					Lock         string   `json:"lock"`
					Suites       []string `json:"suites"`
					Outdated     bool     `json:"outdated"`
					SecurityOnly bool     `json:"securityOnly"`
					*outdated.Report
				}{relToWorkDir(r.LockPath()), r.Debian.Suites, rep.Outdated(securityOnly), securityOnly, rep}, "", "  ")
				fmt.Fprintln(out, string(b))
			} else if err := rep.Text(out, relToWorkDir(r.LockPath()), r.Debian.Suites, securityOnly); err != nil {
				return &exitError{code: 2, err: err}
			}
			for _, gone := range rep.Gone {
				fmt.Fprintf(g.log(), "outdated: %s is no longer in %s (superseded); `drover lock` pins what is published\n", gone, strings.Join(r.Debian.Suites, ", "))
			}
			if rep.Outdated(securityOnly) {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.Flags().BoolVar(&securityOnly, "security-only", false, "only Debian security updates count (exit 1 only for them)")
	lf.registerAllowOlder(cmd)
	return cmd
}

// runOutdated reads the recipe and its lock, fetches the signed indexes of
// the recipe's suites and the module proxy's versions, and checks the lock
// against them. A lock line the signed index contradicts is an error.
func runOutdated(cmd *cobra.Command, g *globals, path string, lf lockFlags) (*outdated.Report, *recipe.Recipe, error) {
	r, err := recipe.Load(path)
	if err != nil {
		return nil, nil, err
	}
	l, err := lock.Read(r.LockPath())
	if err != nil {
		return nil, nil, err
	}
	if err := l.CheckFresh(r.Path, r.InputsDigest()); err != nil {
		return nil, nil, err
	}
	o, err := g.options(true)
	if err != nil {
		return nil, nil, err
	}
	o.AllowOlderRelease = lf.allowOlder
	ctx := cmd.Context()
	// What drover build checks, where the pinned Releases can be had: a
	// line today's index no longer lists may be superseded (reported
	// below) or invented, and only the pinned index tells which.
	unchecked, err := sources.VerifyPinned(ctx, r, l, o)
	if err != nil {
		return nil, nil, err
	}
	if len(unchecked) > 0 {
		fmt.Fprintf(g.log(), "outdated: the InRelease the lock pins for %s is neither in the cache nor served any more: their lines are checked only where today's index lists their version (drover build checks them all)\n", strings.Join(unchecked, ", "))
	}
	suites, err := sources.Releases(ctx, r, o)
	if err != nil {
		return nil, nil, err
	}
	if err := sources.CheckReleaseDates(l, suites, o); err != nil {
		return nil, nil, err
	}
	idx, err := sources.Index(ctx, r, suites)
	if err != nil {
		return nil, nil, err
	}
	versions := map[string][]string{}
	for _, m := range outdated.GoModules(l) {
		fmt.Fprintf(g.log(), "outdated: listing the module proxy's versions of %s\n", m)
		v, err := gomod.ModuleVersions(ctx, o.Go, m)
		if err != nil {
			return nil, nil, err
		}
		versions[m] = v
	}
	fmt.Fprintf(g.log(), "outdated: %d locked packages against %d published in %s\n", len(l.Debs), len(idx.Packages), strings.Join(r.Debian.Suites, ", "))
	rep := outdated.Check(l, idx.Packages, versions)
	if len(rep.Mismatches) > 0 {
		var lines []string
		for _, m := range rep.Mismatches {
			lines = append(lines, fmt.Sprintf("%s:%d: %s", relToWorkDir(r.LockPath()), m.Line, m.Detail()))
		}
		n := map[int]bool{}
		for _, m := range rep.Mismatches {
			n[m.Line] = true
		}
		return nil, nil, errors.New(strings.Join(lines, "\n") + "\n" + lockcheck.Advice(relToWorkDir(r.LockPath()), relToWorkDir(r.Path), len(n)))
	}
	return rep, r, nil
}
