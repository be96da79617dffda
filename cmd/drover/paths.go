package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// pathInputs lists, per command, what on its command line names a file or
// directory: its positional arguments (all of them, when args is true) and
// these string flags. resolvePaths makes each one absolute before the
// command runs, so that nothing below cmd/drover depends on the working
// directory: the harness runs go, QEMU and the control plane in other
// directories, and a relative path handed down would name something else
// there. Every string flag must be classified here or in notPathFlags
// (TestEveryFlagClassified).
var pathInputs = map[string]struct {
	args  bool
	flags []string
}{
	"drover":      {flags: []string{"cache", "keyring"}}, // persistent: every command has them
	"lock":        {args: true},
	"fetch":       {args: true},
	"sources":     {args: true},
	"outdated":    {args: true},
	"build":       {args: true, flags: []string{"output", "agent", "init", "sign-key", "secure-boot-key", "secure-boot-cert"}},
	"run":         {args: true, flags: []string{"state", "userdata", "work"}},
	"smoke":       {args: true, flags: []string{"work", "junit", "userdata", "cache", "bench-previous", "bench-record"}},
	"conformance": {args: true, flags: []string{"work", "junit", "cache"}},
	// validate reads its arguments in this process and names each one in its
	// verdict as the user typed it ("testdata/x.ign: ok"): nothing below it
	// runs elsewhere, so they are left as given.
	"validate": {},
	"userdata": {flags: []string{"from", "ca-file"}},
	"diff":     {args: true},
	"verify":   {args: true, flags: []string{"manifest", "pub"}},
	"publish":  {args: true, flags: []string{"manifest", "pub", "checkpoint-dir"}},
	"rollout":  {flags: []string{"userdata", "kubeconfig"}},
}

// notPathFlags are the string flags that are not paths, by command.
var notPathFlags = map[string][]string{
	"drover":      {"mirror", "security-mirror", "registry-mirror"},
	"lock":        {"toolchain"},
	"run":         {"until", "cluster"},
	"smoke":       {"kubernetes-version"},
	"conformance": {"kubernetes-version", "focus"},
	"userdata":    {"server", "ca-hash", "token", "sandbox-image", "cluster-domain"},
	"publish":     {"region", "bucket", "object-prefix", "image-name", "platform", "architecture", "ecs-endpoint", "oss-endpoint"},
	// rollout's --image is an image ID (m-…) or a file: it is read in
	// this process, so left as given.
	"rollout": {"scaling-group", "image", "region", "ecs-endpoint", "ess-endpoint", "max-unavailable", "surge", "max-unhealthy"},
	// verify reads --expect-lock and --expect-recipe in this process and
	// names them in a mismatch as the user typed them ("from --expect-lock
	// recipes/ecs-node.yaml.lock"); --expect-builder is an ID.
	"verify": {"expect-lock", "expect-recipe", "expect-builder"},
}

// resolvePaths is the root command's PersistentPreRunE. Positional
// arguments are rewritten in place: cobra hands the same slice to RunE.
func resolvePaths(cmd *cobra.Command, args []string) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err != nil || !isPathFlag(cmd, f.Name) || f.Value.Type() != "string" {
			return
		}
		p, aerr := absPath(f.Value.String())
		if aerr != nil {
			err = fmt.Errorf("--%s %s: %w", f.Name, f.Value, aerr)
			return
		}
		err = f.Value.Set(p)
	})
	if err != nil {
		return err
	}
	if pathInputs[cmd.Name()].args {
		for i, a := range args {
			if args[i], err = absPath(a); err != nil {
				return fmt.Errorf("argument %q: %w", a, err)
			}
		}
	}
	return nil
}

// isPathFlag reports whether the flag called name, as cmd sees it, is a
// path: one of cmd's own, or a persistent flag of an ancestor.
func isPathFlag(cmd *cobra.Command, name string) bool {
	for c := cmd; c != nil; c = c.Parent() {
		if c != cmd && c.PersistentFlags().Lookup(name) == nil {
			continue
		}
		if c == cmd && c.LocalFlags().Lookup(name) == nil {
			continue
		}
		for _, f := range pathInputs[c.Name()].flags {
			if f == name {
				return true
			}
		}
		return false
	}
	return false
}

// absPath makes p absolute; "" (not given) and "-" (stdin/stdout) stay.
func absPath(p string) (string, error) {
	if p == "" || p == "-" {
		return p, nil
	}
	return filepath.Abs(p)
}
