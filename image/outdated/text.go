package outdated

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Text writes the report for a person: a summary line, then one line per
// package and Go component with a newer release (security updates first
// and marked), then what to do. With securityOnly only the security
// updates are listed.
func (r *Report) Text(w io.Writer, lockPath string, suites []string, securityOnly bool) error {
	var pkgs []Package
	for _, sec := range []bool{true, false} {
		for _, p := range r.Packages {
			if p.Security == sec && (sec || !securityOnly) {
				pkgs = append(pkgs, p)
			}
		}
	}
	var gos []Go
	if !securityOnly {
		gos = r.Go
	}
	if len(pkgs) == 0 && len(gos) == 0 {
		what := "no newer version in " + strings.Join(suites, ", ")
		if securityOnly {
			what = "no security update in " + strings.Join(suites, ", ")
		} else if len(r.Go) == 0 {
			what += ", no newer patch release of its Go components"
		}
		_, err := fmt.Fprintf(w, "%s is current: %s\n", lockPath, what)
		return err
	}
	fmt.Fprintf(w, "%s is outdated: %s\n", lockPath, r.summary(pkgs, gos))
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	for _, p := range pkgs {
		mark := ""
		if p.Security {
			mark = "security update"
		}
		fmt.Fprintf(tw, "  %s\t%s (%s)\t-> %s (%s)\t%s\n", p.Name, p.Locked, p.LockSuite, p.Newer, p.Suite, mark)
	}
	for _, g := range gos {
		fmt.Fprintf(tw, "  %s\t%s@%s\t-> %s\tpatch releases: %s\n", g.Name, g.Module, g.Locked, g.Newer, strings.Join(g.Between, " "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	recipe := strings.TrimSuffix(lockPath, ".lock")
	if len(gos) > 0 {
		fmt.Fprintf(w, "rebuild due: set the Go components' versions in %s, then `drover lock %s` and rebuild\n", recipe, recipe)
	} else {
		fmt.Fprintf(w, "rebuild due: `drover lock %s`, then rebuild\n", recipe)
	}
	_, err := fmt.Fprintln(w, "see docs/security.md for the whole path to replaced nodes")
	return err
}

func (r *Report) summary(pkgs []Package, gos []Go) string {
	var parts []string
	sec := 0
	for _, p := range pkgs {
		if p.Security {
			sec++
		}
	}
	if len(pkgs) > 0 {
		parts = append(parts, fmt.Sprintf("%s with a newer version (%d security %s)", plural(len(pkgs), "Debian package"), sec, pluralWord(sec, "update")))
	}
	if len(gos) > 0 {
		parts = append(parts, fmt.Sprintf("%s with a newer patch release", plural(len(gos), "Go component")))
	}
	return strings.Join(parts, ", ")
}

func plural(n int, what string) string { return fmt.Sprintf("%d %s", n, pluralWord(n, what)) }

func pluralWord(n int, what string) string {
	if n == 1 {
		return what
	}
	return what + "s"
}
